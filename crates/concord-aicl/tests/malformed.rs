//! One test per class of malformed input: the error kind, its AICL code and its position.

use concord_aicl::{Error, ErrorCode, ErrorKind, ParseOptions, Value};

fn parse(text: &str) -> Error {
    concord_aicl::from_str::<Value>(text).expect_err(text)
}

fn at(error: &Error) -> (usize, usize, usize) {
    let position = error.position().expect("position");
    (position.text.line, position.text.column, position.offset)
}

#[test]
fn unclosed_bracket() {
    let error = parse("[d:\n  [s:a]:[l:[i:1],[i:2]\n]");
    assert!(
        matches!(error.kind(), ErrorKind::Unclosed { tag: 'd', opened } if opened.offset == 0),
        "{error}"
    );
    assert_eq!(error.code(), ErrorCode::ProtocolError);
    assert_eq!(at(&error), (3, 2, 28));
    let error = parse("[s:no end");
    assert!(matches!(error.kind(), ErrorKind::Unclosed { tag: 's', .. }));
    let error = parse("[l:[i:1],[i:2]");
    assert!(matches!(error.kind(), ErrorKind::Unclosed { tag: 'l', .. }));
}

#[test]
fn bad_tag() {
    let error = parse("[l:[s:a],[x:1]]");
    assert_eq!(
        error.kind(),
        &ErrorKind::UnknownTag {
            tag: "x".to_owned()
        }
    );
    assert_eq!(error.code(), ErrorCode::ProtocolError);
    assert_eq!(at(&error), (1, 10, 9));
    assert!(matches!(parse("[str:a]").kind(), ErrorKind::UnknownTag { tag } if tag == "str"));
    assert!(matches!(
        parse("[S:a]").kind(),
        ErrorKind::UnknownTag { .. }
    ));
    assert!(matches!(parse("hello").kind(), ErrorKind::Expected { .. }));
}

#[test]
fn bad_int() {
    for text in [
        "[i:4.2]", "[i:]", "[i:+1]", "[i:007]", "[i: 1]", "[i:1e3]", "[i:0x1F]",
    ] {
        let error = parse(text);
        assert!(
            matches!(error.kind(), ErrorKind::BadInt { .. }),
            "{text}: {error}"
        );
        assert_eq!(error.code(), ErrorCode::ProtocolError);
        assert_eq!(at(&error).2, 3, "{text}");
    }
}

#[test]
fn int_overflow() {
    let error = parse("[l:[i:9223372036854775807],[i:9223372036854775808]]");
    assert_eq!(
        error.kind(),
        &ErrorKind::IntOverflow {
            text: "9223372036854775808".to_owned()
        }
    );
    assert_eq!(at(&error), (1, 31, 30));
    assert!(matches!(
        parse("[i:-9223372036854775809]").kind(),
        ErrorKind::IntOverflow { .. }
    ));
    assert_eq!(
        concord_aicl::from_str::<Value>("[i:-9223372036854775808]").unwrap(),
        Value::Int(i64::MIN)
    );
}

#[test]
fn bad_float() {
    for text in [
        "[f:abc]",
        "[f:1.2.3]",
        "[f:]",
        "[f:.5]",
        "[f:NaN]",
        "[f:1e999]",
        "[f:1,5]",
    ] {
        let error = parse(text);
        assert!(
            matches!(error.kind(), ErrorKind::BadFloat { .. }),
            "{text}: {error}"
        );
        assert_eq!(error.code(), ErrorCode::ProtocolError);
    }
}

#[test]
fn non_string_dict_key() {
    let error = parse("[d:[s:a]:[i:1],[i:2]:[s:b]]");
    assert_eq!(error.kind(), &ErrorKind::NonStringKey { tag: 'i' });
    assert_eq!(at(&error), (1, 16, 15));
    assert!(matches!(
        parse("[d:[l:]:[i:1]]").kind(),
        ErrorKind::NonStringKey { tag: 'l' }
    ));
}

#[test]
fn duplicate_key_in_strict_mode() {
    let text = "[d:[s:a]:[i:1],[s:b]:[i:2],[s:a]:[i:3]]";
    let error = parse(text);
    assert_eq!(
        error.kind(),
        &ErrorKind::DuplicateKey {
            key: "a".to_owned()
        }
    );
    assert_eq!(at(&error), (1, 28, 27));
    // Escaped keys compare by content.
    assert!(matches!(
        parse(r"[d:[s:a\[1\]]:[i:1],[s:a\[1\]]:[i:2]]").kind(),
        ErrorKind::DuplicateKey { key } if key == "a[1]"
    ));
    // Large dictionaries switch to a hash set; still caught.
    let mut big = String::from("[d:");
    for i in 0..100 {
        big.push_str(&format!("[s:k{i}]:[i:{i}],"));
    }
    big.push_str("[s:k42]:[i:0]]");
    assert!(matches!(parse(&big).kind(), ErrorKind::DuplicateKey { key } if key == "k42"));
    // Same key in different dictionaries is fine.
    assert!(
        concord_aicl::from_str::<Value>("[d:[s:a]:[d:[s:a]:[i:1]],[s:b]:[d:[s:a]:[i:2]]]").is_ok()
    );
    // Lenient mode: the last one wins, in the first one's place.
    let lenient: Value = concord_aicl::from_str_with(text, &ParseOptions::lenient()).unwrap();
    assert_eq!(lenient.to_string(), "[d:[s:a]:[i:3],[s:b]:[i:2]]");
}

#[test]
fn bad_base85_char() {
    // 4 bytes need 5 characters; `"` is not in the RFC 1924 alphabet.
    let error = parse("[t:uint8:4:00\"00]");
    assert_eq!(error.kind(), &ErrorKind::BadBase85Char { found: '"' });
    assert_eq!(error.code(), ErrorCode::InvalidTensor);
    assert_eq!(at(&error), (1, 14, 13));
    let error = parse("[t:uint8:4:~~~~~]");
    assert_eq!(error.kind(), &ErrorKind::Base85Overflow { group_start: 0 });
    assert_eq!(error.code(), ErrorCode::InvalidTensor);
}

#[test]
fn tensor_length_differs_from_shape() {
    let error = parse("[t:int16:3:0000000]");
    assert_eq!(
        error.kind(),
        &ErrorKind::TensorLength {
            dtype: "int16",
            shape: "3".to_owned(),
            expected: 6,
            expected_chars: 8,
            actual: 7
        }
    );
    assert_eq!(error.code(), ErrorCode::InvalidTensor);
    assert_eq!(at(&error).2, 11);
    assert!(matches!(
        parse("[t:float8:1:00]").kind(),
        ErrorKind::UnknownDType { .. }
    ));
    assert!(matches!(
        parse("[t:uint8:2x:00]").kind(),
        ErrorKind::BadShape { .. }
    ));
    assert!(matches!(
        parse("[t:bool:1:0s]").kind(),
        ErrorKind::BadTensor { .. }
    ));
    let huge = parse("[t:float64:99999999999,99999999999:00]");
    assert!(matches!(huge.kind(), ErrorKind::BadShape { .. }), "{huge}");
    assert_eq!(huge.code(), ErrorCode::InvalidTensor);
}

#[test]
fn depth_over_limit() {
    let deep = |depth: usize| "[l:".repeat(depth) + &"]".repeat(depth);
    assert!(concord_aicl::from_str::<Value>(&deep(128)).is_ok());
    let error = parse(&deep(129));
    assert_eq!(error.kind(), &ErrorKind::DepthLimit { limit: 128 });
    assert_eq!(at(&error).2, 128 * 3);
    // Far deeper input fails the same way, without exhausting the stack.
    assert!(matches!(
        parse(&deep(100_000)).kind(),
        ErrorKind::DepthLimit { .. }
    ));
    let options = ParseOptions::strict().with_max_depth(2);
    assert!(concord_aicl::from_str_with::<Value>("[d:[s:a]:[l:[i:1]]]", &options).is_ok());
    assert!(concord_aicl::from_str_with::<Value>("[d:[s:a]:[l:[l:]]]", &options).is_err());
}

#[test]
fn size_over_limit() {
    let limit = ParseOptions::DEFAULT_MAX_SIZE;
    let text = format!("[s:{}]", "a".repeat(limit));
    let error = parse(&text);
    assert_eq!(
        error.kind(),
        &ErrorKind::SizeLimit {
            size: limit + 4,
            limit
        }
    );
    assert_eq!(error.code(), ErrorCode::ProtocolError);
    assert!(concord_aicl::from_slice::<Value>(text.as_bytes()).is_err());
    // Just under the limit parses.
    let text = format!("[s:{}]", "a".repeat(limit - 4));
    assert!(concord_aicl::from_str::<Value>(&text).is_ok());
}

#[test]
fn trailing_text_in_strict_mode() {
    let error = parse("[i:1] and more");
    assert_eq!(error.kind(), &ErrorKind::TrailingText);
    assert_eq!(at(&error), (1, 7, 6));
    assert!(concord_aicl::from_str::<Value>("  [i:1]\n\t ").is_ok());
    assert!(matches!(
        parse("[i:1][i:2]").kind(),
        ErrorKind::TrailingText
    ));
    let lenient: Value =
        concord_aicl::from_str_with("[i:1] and more", &ParseOptions::lenient()).unwrap();
    assert_eq!(lenient, Value::Int(1));
}

#[test]
fn other_strict_mode_refusals() {
    assert!(matches!(
        parse(r"[s:a\nb]").kind(),
        ErrorKind::BadEscape { found: 'n' }
    ));
    assert!(matches!(
        parse("[s:see [1]]").kind(),
        ErrorKind::UnescapedBracket
    ));
    assert!(matches!(
        parse("[b:True]").kind(),
        ErrorKind::BadBool { .. }
    ));
    assert!(matches!(
        parse("[l:[i:1],]").kind(),
        ErrorKind::Expected { .. }
    ));
    assert!(matches!(
        parse("[d:[s:a][i:1]]").kind(),
        ErrorKind::Expected { .. }
    ));
    assert!(matches!(parse("").kind(), ErrorKind::UnexpectedEnd { .. }));
    let invalid_utf8 = concord_aicl::from_slice::<Value>(b"[s:\xff]").unwrap_err();
    assert_eq!(invalid_utf8.kind(), &ErrorKind::InvalidUtf8);
    assert_eq!(invalid_utf8.position().unwrap().offset, 3);
}
