//! Text for people and peers: the results table, the details of failures, and the
//! fix-error report sent as `fixErrorNegotiation.errorDescription`.

use std::fmt::Write as _;

use serde_json::Value;

use crate::cases::{CaseReport, CaseStep, CasesReport, Failure, Problem};
use crate::diff::cut;
use crate::verify::InvalidMessage;

/// Most differences or violations listed per failure in a fix-error report.
const LISTED: usize = 20;
/// Longest fix-error report, in bytes (a peer reads it, and so may its LLM).
const REPORT_BYTES: usize = 16 * 1024;
/// Longest problem shown in a table cell, in characters.
const CELL_CHARS: usize = 100;

impl CasesReport {
    /// A table of results, one case a line: name, `pass`/`FAIL`, the first failed step and
    /// its problem.
    ///
    /// ```text
    /// case       result  step                     problem
    /// 测试用例1  pass
    /// 测试用例2  FAIL    provider encodeResponse  differs from the case at /productInfo: …
    /// ```
    pub fn table(&self) -> String {
        let rows: Vec<[String; 4]> = self
            .cases
            .iter()
            .map(|case| match case.failures.first() {
                None => [
                    case.name.clone(),
                    "pass".into(),
                    String::new(),
                    String::new(),
                ],
                Some(failure) => [
                    case.name.clone(),
                    "FAIL".into(),
                    failure.step.to_string(),
                    cut(&failure.problem.to_string(), CELL_CHARS),
                ],
            })
            .collect();
        let header = ["case", "result", "step", "problem"].map(str::to_owned);
        let mut widths = [0usize; 4];
        for row in std::iter::once(&header).chain(&rows) {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(display_width(cell));
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&rows) {
            let mut line = String::new();
            for (index, (cell, width)) in row.iter().zip(widths).enumerate() {
                line.push_str(cell);
                if index + 1 < row.len() {
                    line.push_str(&" ".repeat(width - display_width(cell) + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let failed = self.failed().count();
        let _ = writeln!(
            out,
            "{} of {} case(s) passed",
            self.cases.len() - failed,
            self.cases.len()
        );
        out
    }

    /// Every failure in full: each step, its problem, and for a mismatch each difference
    /// with the expected and the actual value.
    pub fn details(&self) -> String {
        let mut out = String::new();
        for case in self.failed() {
            let _ = writeln!(out, "{} (expected: {})", case.name, case.expected.trim());
            for failure in &case.failures {
                let _ = writeln!(out, "  {}: {}", failure.step, headline(&failure.problem));
                match &failure.problem {
                    Problem::Mismatch {
                        expected,
                        actual,
                        differences,
                    } => {
                        for difference in differences {
                            let _ = writeln!(out, "    {difference}");
                        }
                        let _ = writeln!(out, "    expected: {expected}");
                        let _ = writeln!(out, "    actual:   {actual}");
                    }
                    Problem::Schema(invalid) | Problem::InvalidCase(invalid) => {
                        for violation in &invalid.violations {
                            let _ = writeln!(out, "    {violation}");
                        }
                    }
                    _ => {}
                }
            }
        }
        out
    }

    /// The fix-error report for the failed cases (`None` when all passed): for
    /// `fixErrorNegotiation.errorDescription`. Each failure names the case, the step, and
    /// for each difference the JSON pointer with the expected and the actual value; then
    /// the whole expected and actual values. At most 16 KiB.
    pub fn fix_error_report(&self) -> Option<String> {
        let failed: Vec<&CaseReport> = self.failed().collect();
        if failed.is_empty() {
            return None;
        }
        let mut out = format!(
            "The handler code fails {} of {} negotiated test case(s). JSON pointers (RFC 6901) \
             locate values in the message or result named.\n",
            failed.len(),
            self.cases.len()
        );
        for case in failed {
            for failure in &case.failures {
                out.push('\n');
                out.push_str(&describe_failure(&case.name, failure));
            }
        }
        Some(bounded(out))
    }
}

impl InvalidMessage {
    /// A fix-error report for a received message that breaks the protocol's schema: each
    /// violation with its JSON pointer, then the message.
    pub fn error_description(&self, message: &Value) -> String {
        let mut out = format!(
            "The {} message we received breaks the agreed protocol's {} schema:\n",
            self.direction, self.direction
        );
        list_violations(&mut out, self);
        let _ = writeln!(out, "Message: {}", shown_long(message));
        bounded(out)
    }
}

fn headline(problem: &Problem) -> String {
    match problem {
        Problem::Mismatch { differences, .. } => {
            format!("differs from the case at {} place(s)", differences.len())
        }
        Problem::Schema(invalid) | Problem::InvalidCase(invalid) => format!(
            "the {} message breaks the protocol's schema",
            invalid.direction
        ),
        other => other.to_string(),
    }
}

fn describe_failure(case: &str, failure: &Failure) -> String {
    let mut out = String::new();
    let what = match failure.step {
        CaseStep::Case => "",
        CaseStep::EncodeRequest => "the request message it produced",
        CaseStep::EncodeResponse => "the response message it produced",
        CaseStep::DecodeRequest => "the result it returned for the case's request",
        CaseStep::DecodeResponse => "the result it returned for the case's response",
    };
    match &failure.problem {
        Problem::Mismatch {
            expected,
            actual,
            differences,
        } => {
            let _ = writeln!(
                out,
                "Test case {case:?}, {}: {what} differs from what the case expects:",
                failure.step
            );
            for difference in differences.iter().take(LISTED) {
                let _ = writeln!(out, "- {difference}");
            }
            if differences.len() > LISTED {
                let _ = writeln!(out, "- … {} more", differences.len() - LISTED);
            }
            let _ = writeln!(out, "Expected: {}", shown_long(expected));
            let _ = writeln!(out, "Actual: {}", shown_long(actual));
        }
        Problem::Schema(invalid) => {
            let _ = writeln!(
                out,
                "Test case {case:?}, {}: {what} breaks the agreed {} schema:",
                failure.step, invalid.direction
            );
            list_violations(&mut out, invalid);
        }
        Problem::InvalidCase(invalid) => {
            let which = invalid.direction;
            let _ = writeln!(
                out,
                "Test case {case:?}: the case's own {which} breaks the agreed {which} schema:"
            );
            list_violations(&mut out, invalid);
        }
        other => {
            let _ = writeln!(out, "Test case {case:?}, {}: {other}", failure.step);
        }
    }
    out
}

/// The first [`LISTED`] violations, one a line.
fn list_violations(out: &mut String, invalid: &InvalidMessage) {
    for violation in invalid.violations.iter().take(LISTED) {
        let _ = writeln!(out, "- {violation}");
    }
}

/// Compact JSON cut at 2,000 characters.
fn shown_long(value: &Value) -> String {
    cut(&value.to_string(), 2000)
}

fn bounded(mut text: String) -> String {
    if text.len() > REPORT_BYTES {
        let mut end = REPORT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n… (report cut at 16 KiB)\n");
    }
    text
}

/// Terminal columns of a cell: East Asian wide characters take two.
fn display_width(text: &str) -> usize {
    text.chars()
        .map(|c| {
            let c = c as u32;
            let wide = matches!(c,
                0x1100..=0x115F | 0x2E80..=0x303E | 0x3041..=0x33FF | 0x3400..=0x4DBF
                | 0x4E00..=0x9FFF | 0xA000..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF
                | 0xFE30..=0xFE4F | 0xFF00..=0xFF60 | 0xFFE0..=0xFFE6 | 0x20000..=0x3FFFD);
            if wide {
                2
            } else {
                1
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_characters_count_twice() {
        assert_eq!(display_width("测试用例1"), 9);
        assert_eq!(display_width("case"), 4);
    }

    #[test]
    fn reports_are_bounded() {
        let long = "é".repeat(20_000);
        let text = bounded(long);
        assert!(text.len() < REPORT_BYTES + 64);
        assert!(text.ends_with("(report cut at 16 KiB)\n"));
    }
}
