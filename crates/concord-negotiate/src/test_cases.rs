//! Negotiated test cases: each a request message, a response message and the expected
//! result, as text both agents (and their LLMs) can read.
//!
//! The parser reads the seeds' layout (`# 测试用例1`, `**测试请求数据**`, `**测试响应数据**`,
//! `**测试预期结果**`, JSON inline) and its English equivalent (`# Test case 1`,
//! `Request`, `Response`, `Expected`); the writer produces the English layout.

use concord_proto::TextPosition;
use serde_json::Value;

use crate::document::pretty;
use crate::markdown::{first_json, heading, normalise, sections};

/// One test case.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TestCase {
    /// The case's heading, e.g. `Test case 1`.
    pub name: String,
    /// The request message the requester's code must produce / the provider's code must read.
    pub request: Value,
    /// The response message the provider's code must produce / the requester's code must read.
    pub response: Value,
    /// The expected result, in words.
    pub expected: String,
}

/// A set of test cases.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct TestCases {
    /// The cases, in document order.
    pub cases: Vec<TestCase>,
}

/// Why a text is not a usable set of test cases.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TestCasesError {
    /// No `# Test case …` section.
    #[error("no test case found (expected sections headed `# Test case N` or `# 测试用例N`)")]
    NoCases,
    /// A case lacks its request or response.
    #[error("test case {case:?} has no {part} JSON")]
    MissingPart {
        /// The case's heading.
        case: String,
        /// `request` or `response`.
        part: &'static str,
    },
    /// A case's JSON does not parse.
    #[error("test case {case:?}: the {part} is not valid JSON at {position}: {message}")]
    Json {
        /// The case's heading.
        case: String,
        /// `request` or `response`.
        part: &'static str,
        /// Where in the whole text.
        position: TextPosition,
        /// What the JSON parser found.
        message: String,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Request,
    Response,
    Expected,
}

/// The part a label line opens, and the byte offset in `line` where the part's text starts
/// (after the colon; the line's end when there is none).
fn label(line: &str) -> Option<(Part, usize)> {
    let item = line
        .trim_start()
        .trim_start_matches(['-', '*', '+'])
        .trim_start();
    let item_start = line.len() - item.len();
    let (name, rest_start) = match item.find([':', '：']) {
        Some(at) => {
            let colon_len = item[at..].chars().next().map_or(1, char::len_utf8);
            (&item[..at], item_start + at + colon_len)
        }
        None => (item.trim_end(), line.len()),
    };
    let part = match normalise(name).as_str() {
        "测试请求数据" | "请求数据" | "请求" | "request" | "testrequest" | "requestdata"
        | "testrequestdata" => Part::Request,
        "测试响应数据" | "响应数据" | "响应" | "response" | "testresponse" | "responsedata"
        | "testresponsedata" => Part::Response,
        "测试预期结果" | "预期结果" | "expected" | "expectedresult" | "expectation"
        | "testexpectedresult" => Part::Expected,
        _ => return None,
    };
    Some((part, rest_start))
}

/// The expected result from its part's text: trimmed, or the string a JSON string literal
/// holds (how [`TestCases::write`] writes a text that would otherwise read as structure).
fn expected_text(chunk: &str) -> String {
    let text = chunk.trim();
    if text.starts_with('"') {
        if let Ok(literal) = serde_json::from_str::<String>(text) {
            return literal;
        }
    }
    text.to_owned()
}

/// Writes `expected` as it is when it reads back unchanged: one line, already trimmed, not
/// quoted, and neither a heading, a fence nor a part's label. Anything else (several lines
/// from a peer or a model, say) is written as a JSON string literal, which is one line that
/// is never structure.
fn write_expected(out: &mut String, expected: &str) {
    let plain = !expected.contains(['\n', '\r'])
        && expected.trim() == expected
        && !expected.starts_with('"')
        && !expected.starts_with("```")
        && !expected.starts_with("~~~")
        && heading(expected).is_none()
        && label(expected).is_none();
    if plain {
        out.push_str(expected);
    } else {
        // A `String` always serializes.
        out.push_str(&serde_json::to_string(expected).unwrap_or_default());
    }
}

/// `# Test case 1`, `# Test case 2: not found`, `# 测试用例1`, `# Case 3`.
fn is_case_heading(title: &str) -> bool {
    let title = normalise(title);
    ["测试用例", "testcase", "case"]
        .iter()
        .any(|prefix| title.starts_with(prefix))
}

impl TestCases {
    /// Parses test cases from text.
    ///
    /// ```
    /// use concord_negotiate::TestCases;
    ///
    /// let text = "# Test case 1\n- Request: {\"id\": 1}\n- Response: {\"ok\": true}\n- Expected: found\n";
    /// let cases = TestCases::parse(text)?;
    /// assert_eq!(cases.cases[0].request["id"], 1);
    /// assert_eq!(cases.cases[0].expected, "found");
    /// # Ok::<(), concord_negotiate::TestCasesError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self, TestCasesError> {
        let mut cases = Vec::new();
        for section in sections(text)
            .into_iter()
            .filter(|s| is_case_heading(s.title))
        {
            let name = section.title.to_owned();
            // Split the body into parts at each label line.
            let mut parts: Vec<(Part, usize)> = Vec::new();
            let mut offset = 0;
            for line in section.body.split_inclusive('\n') {
                if let Some((part, rest_start)) = label(line) {
                    parts.push((part, offset + rest_start));
                }
                offset += line.len();
            }
            let mut request = None;
            let mut response = None;
            let mut expected = String::new();
            for (index, (part, start)) in parts.iter().enumerate() {
                let end = parts.get(index + 1).map_or(section.body.len(), |next| {
                    // The next part starts at its label line.
                    section.body[..next.1]
                        .rfind('\n')
                        .map_or(next.1, |nl| nl + 1)
                });
                let chunk = &section.body[*start..end.max(*start)];
                match part {
                    Part::Expected => expected = expected_text(chunk),
                    Part::Request | Part::Response => {
                        let part_name = if *part == Part::Request {
                            "request"
                        } else {
                            "response"
                        };
                        let value = match first_json(chunk) {
                            Some(Ok(found)) => found.value,
                            Some(Err(fault)) => {
                                let position = fault.position_in(text, section.body_offset + start);
                                return Err(TestCasesError::Json {
                                    case: name,
                                    part: part_name,
                                    position,
                                    message: fault.message,
                                });
                            }
                            None => {
                                return Err(TestCasesError::MissingPart {
                                    case: name,
                                    part: part_name,
                                })
                            }
                        };
                        if *part == Part::Request {
                            request = Some(value);
                        } else {
                            response = Some(value);
                        }
                    }
                }
            }
            let request = request.ok_or_else(|| TestCasesError::MissingPart {
                case: name.clone(),
                part: "request",
            })?;
            let response = response.ok_or_else(|| TestCasesError::MissingPart {
                case: name.clone(),
                part: "response",
            })?;
            cases.push(TestCase {
                name,
                request,
                response,
                expected,
            });
        }
        if cases.is_empty() {
            return Err(TestCasesError::NoCases);
        }
        Ok(Self { cases })
    }

    /// Writes the cases in the English layout, byte-stable for the same cases.
    pub fn write(&self) -> String {
        let mut out = String::new();
        for (index, case) in self.cases.iter().enumerate() {
            if index > 0 {
                out.push('\n');
            }
            let name = if case.name.is_empty() {
                format!("Test case {}", index + 1)
            } else {
                case.name.clone()
            };
            out.push_str(&format!("# {name}\n\n- **Request**:\n"));
            out.push_str(&pretty(&case.request));
            out.push_str("\n\n- **Response**:\n");
            out.push_str(&pretty(&case.response));
            out.push_str("\n\n- **Expected**:\n");
            write_expected(&mut out, &case.expected);
            out.push('\n');
        }
        out
    }
}
