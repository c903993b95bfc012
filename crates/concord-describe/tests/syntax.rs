//! Reading the JSON text: syntax errors at the exact place, duplicate keys, limits, and line
//! and column for every problem.

use concord_describe::{Problem, ProblemKind, Report, Validator};

fn first(report: &Report) -> (ProblemKind, usize, usize, String) {
    let problem = report.errors().next().expect("an error");
    let at = problem.position.expect("a position");
    (problem.kind, at.line, at.column, problem.message.clone())
}

/// Each problem's pointer, line and column.
fn located<'a>(problems: impl Iterator<Item = &'a Problem>) -> Vec<(&'a str, usize, usize)> {
    problems
        .map(|p| {
            let at = p.position.expect("a position");
            (p.pointer.as_str(), at.line, at.column)
        })
        .collect()
}

#[test]
fn syntax_errors_point_at_the_mistake() {
    let cases: &[(&str, usize, usize, &str)] = &[
        ("", 1, 1, "expected a JSON value, found the end of the text"),
        (
            "  \n ",
            2,
            2,
            "expected a JSON value, found the end of the text",
        ),
        ("{\"a\": 1,}", 1, 8, "trailing comma before `}`"),
        ("[1, 2,\n]", 1, 6, "trailing comma before `]`"),
        (
            "{\"a\": 1 \"b\": 2}",
            1,
            8,
            "missing `,` between object members (the next one starts at line 1, column 9)",
        ),
        (
            "[1 2]",
            1,
            3,
            "missing `,` between array elements (the next one starts at line 1, column 4)",
        ),
        ("{\"a\" 1}", 1, 6, "expected `:` after the key, found `1`"),
        ("{1: 2}", 1, 2, "expected a string key, found `1`"),
        (
            "{\"a\": 1",
            1,
            8,
            "unterminated object (opened at line 1, column 1)",
        ),
        (
            "[1, 2",
            1,
            6,
            "unterminated array (opened at line 1, column 1)",
        ),
        (
            "\"abc",
            1,
            5,
            "unterminated string (opened at line 1, column 1)",
        ),
        (
            "\"a\tb\"",
            1,
            3,
            "control character U+0009 in a string; write it as an escape such as \\n or \\u0009",
        ),
        ("\"\\x\"", 1, 2, "invalid escape: backslash followed by `x`"),
        ("\"\\u12\"", 1, 2, "\\u must be followed by four hex digits"),
        (
            "\"\\ud800\"",
            1,
            2,
            "unpaired surrogate \\ud800: a low surrogate escape must follow",
        ),
        ("\"\\udc00\"", 1, 2, "unpaired low surrogate \\udc00"),
        ("01", 1, 1, "numbers must not have leading zeros"),
        ("-", 1, 1, "expected a digit after `-`"),
        ("1.", 1, 1, "expected a digit after the decimal point"),
        ("1e+", 1, 1, "expected a digit in the exponent"),
        (
            "1e400",
            1,
            1,
            "number 1e400 is out of range for a 64-bit float",
        ),
        ("tru", 1, 1, "invalid literal: expected `true`"),
        ("nul", 1, 1, "invalid literal: expected `null`"),
        (
            "{} {}",
            1,
            4,
            "unexpected `{` after the end of the JSON value",
        ),
        ("'a'", 1, 1, "expected a JSON value, found `'`"),
        (
            "\u{feff}{}",
            1,
            1,
            "the text starts with a byte order mark (U+FEFF); JSON text must not",
        ),
        // Columns count characters, not bytes.
        ("{\"ä€😀\": 1,}", 1, 10, "trailing comma before `}`"),
    ];
    for (text, line, column, message) in cases {
        let report = concord_describe::validate(text.as_bytes());
        assert_eq!(
            first(&report),
            (ProblemKind::Syntax, *line, *column, (*message).to_owned()),
            "{text:?}"
        );
    }
}

#[test]
fn every_recoverable_mistake_is_reported_in_one_pass() {
    let text = "{\n  \"a\": [1, 2,],\n  \"b\": {\"c\": 1 \"d\": 2,}\n  \"e\": 3\n}";
    let report = concord_describe::validate(text.as_bytes());
    let found: Vec<(usize, usize)> = report
        .errors()
        .map(|p| (p.position.unwrap().line, p.position.unwrap().column))
        .collect();
    assert_eq!(found, [(2, 13), (3, 15), (3, 22), (3, 24)], "{report}");
    assert!(report.errors().all(|p| p.kind == ProblemKind::Syntax));
}

#[test]
fn not_utf8_names_the_byte() {
    let report = concord_describe::validate(b"{\n  \"t\": \"a\xffb\"}");
    assert_eq!(
        first(&report),
        (
            ProblemKind::Syntax,
            2,
            10,
            "the text is not UTF-8: byte 0xff at offset 11 starts no valid character".to_owned()
        )
    );
}

#[test]
fn duplicate_keys_anywhere_are_errors_at_the_second_key() {
    let text = br#"{
  "title": "a",
  "properties": {"p": {"type": "string", "type": "number", "forms": [{"href": "https://x.example.com/"}]}},
  "title": "b"
}"#;
    let report = concord_describe::validate(text);
    let duplicates = located(
        report
            .errors()
            .filter(|p| p.kind == ProblemKind::DuplicateKey),
    );
    assert_eq!(
        duplicates,
        [("/properties/p/type", 3, 42), ("/title", 4, 3)]
    );
}

#[test]
fn depth_and_size_limits() {
    let deep = "[".repeat(65) + &"]".repeat(65);
    let report = concord_describe::validate(deep.as_bytes());
    let (kind, line, column, _) = first(&report);
    assert_eq!((kind, line, column), (ProblemKind::TooDeep, 1, 65));
    let ok_depth = "[".repeat(64) + &"]".repeat(64);
    let report = concord_describe::validate(ok_depth.as_bytes());
    assert!(report
        .errors()
        .all(|p| p.kind != ProblemKind::TooDeep && p.kind != ProblemKind::Syntax));

    let report = Validator::new()
        .max_bytes(10)
        .validate(b"{\"title\": \"too long\"}");
    assert_eq!(report.errors().next().unwrap().kind, ProblemKind::TooLarge);
    let report = Validator::new()
        .max_depth(2)
        .validate(b"{\"a\": {\"b\": {}}}");
    assert_eq!(report.errors().next().unwrap().kind, ProblemKind::TooDeep);
}

#[test]
fn every_problem_has_a_position_in_the_text() {
    let text = br#"{
  "@context": "https://www.w3.org/2022/wot/td/v1.1",
  "title": "T",
  "securityDefinitions": {"s": {"scheme": "basic", "in": "nowhere"}},
  "security": ["s", "t"],
  "actions": {
    "a/b~c": {"forms": [{"href": "https://a.example.com/", "op": "readproperty"}]}
  }
}"#;
    let report = concord_describe::validate(text);
    assert_eq!(
        located(report.errors()),
        [
            ("/securityDefinitions/s/in", 4, 58),
            ("/security/1", 5, 21),
            ("/actions/a~1b~0c/forms/0/op", 7, 66),
        ],
        "{report}"
    );
}

#[test]
fn missing_terms_point_at_the_object_that_lacks_them() {
    let text = b"{\n  \"@context\": \"https://www.w3.org/2022/wot/td/v1.1\",\n  \"title\": \"T\",\n  \"security\": \"s\",\n  \"securityDefinitions\": {\"s\": {\"scheme\": \"nosec\"}},\n  \"version\": {\"model\": \"1\"}\n}";
    let report = concord_describe::validate(text);
    let problem = report.errors().next().unwrap();
    assert_eq!(problem.pointer, "/version/instance");
    let at = problem.position.unwrap();
    assert_eq!((at.line, at.column), (6, 14));
}

#[test]
fn problems_are_capped() {
    let mut text = String::from(
        r#"{"@context": "https://www.w3.org/2022/wot/td/v1.1", "title": "T", "securityDefinitions": {"s": {"scheme": "nosec"}}, "security": ["#,
    );
    text.push_str(&vec!["\"x\""; 500].join(","));
    text.push_str("]}");
    let report = Validator::new().max_problems(50).validate(text.as_bytes());
    assert_eq!(report.error_count(), 50);
    assert_eq!(
        report.warnings().next().unwrap().kind,
        ProblemKind::TooManyProblems
    );
}
