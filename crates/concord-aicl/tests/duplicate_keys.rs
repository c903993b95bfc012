//! Strict mode refuses a duplicate dictionary key whatever the target type, at the second key:
//! struct fields (the field mask), unknown and ignored fields, fields past the 64th, nested
//! structs, flattened structs, maps and `Value` (the general check).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use concord_aicl::{Error, ErrorCode, ErrorKind, ParseOptions, Value};
use proptest::prelude::*;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

#[derive(Deserialize, Debug, PartialEq)]
struct Point {
    x: i64,
    y: i64,
    #[serde(default)]
    label: Option<String>,
}

#[derive(Deserialize, Debug, PartialEq)]
struct Shape {
    name: String,
    origin: Point,
    #[serde(default)]
    points: Vec<Point>,
}

#[derive(Deserialize, Debug, PartialEq)]
struct Flattened {
    id: i64,
    #[serde(flatten)]
    rest: BTreeMap<String, i64>,
}

#[derive(Deserialize, Debug, PartialEq)]
struct Renamed {
    #[serde(rename = "a[1]")]
    bracketed: i64,
    #[serde(rename = "a\\b")]
    backslashed: i64,
    plain: i64,
}

/// The duplicate key error's key and (line, column, offset).
fn duplicate<T: for<'de> Deserialize<'de> + fmt::Debug>(text: &str) -> (String, usize) {
    let error: Error = concord_aicl::from_str::<T>(text).expect_err(text);
    assert_eq!(error.code(), ErrorCode::ProtocolError, "{text}: {error}");
    let position = error.position().expect("position");
    match error.kind() {
        ErrorKind::DuplicateKey { key } => (key.clone(), position.offset),
        other => panic!("{text}: expected a duplicate key, got {other:?}"),
    }
}

/// Byte offset of the `n`th occurrence (from 0) of `needle` in `text`.
fn nth(text: &str, needle: &str, n: usize) -> usize {
    text.match_indices(needle).nth(n).expect(needle).0
}

#[test]
fn known_fields_in_order_and_out_of_order() {
    let point: Point = concord_aicl::from_str("[d:[s:y]:[i:2],[s:x]:[i:1]]").unwrap();
    assert_eq!((point.x, point.y), (1, 2));
    for text in [
        "[d:[s:x]:[i:1],[s:y]:[i:2],[s:x]:[i:3]]",
        "[d:[s:x]:[i:1],[s:x]:[i:3],[s:y]:[i:2]]",
        "[d:[s:y]:[i:2],[s:x]:[i:1],[s:x]:[i:3]]",
        "[d:[s:x]:[i:1],[s:y]:[i:2],[s:label]:[s:p],[s:x]:[i:3]]",
    ] {
        assert_eq!(
            duplicate::<Point>(text),
            ("x".into(), nth(text, "[s:x]", 1))
        );
    }
    // The repeated key is the field that would come next in order.
    let text = "[d:[s:y]:[i:2],[s:x]:[i:1],[s:y]:[i:3]]";
    assert_eq!(
        duplicate::<Point>(text),
        ("y".into(), nth(text, "[s:y]", 1))
    );
    let text = "[d:[s:x]:[i:1],[s:y]:[i:2],[s:label]:[s:p],[s:label]:[s:q]]";
    assert_eq!(
        duplicate::<Point>(text),
        ("label".into(), nth(text, "[s:label]", 1))
    );
}

#[test]
fn unknown_fields_and_what_they_hold() {
    let point: Point =
        concord_aicl::from_str("[d:[s:x]:[i:1],[s:z]:[i:9],[s:y]:[i:2],[s:w]:[i:0]]").unwrap();
    assert_eq!((point.x, point.y), (1, 2));
    let text = "[d:[s:x]:[i:1],[s:z]:[i:9],[s:y]:[i:2],[s:z]:[i:0]]";
    assert_eq!(
        duplicate::<Point>(text),
        ("z".into(), nth(text, "[s:z]", 1))
    );
    // Inside an ignored field's value.
    let text = "[d:[s:x]:[i:1],[s:extra]:[d:[s:k]:[i:1],[s:k]:[i:2]],[s:y]:[i:2]]";
    assert_eq!(
        duplicate::<Point>(text),
        ("k".into(), nth(text, "[s:k]", 1))
    );
    let text = "[d:[s:x]:[i:1],[s:extra]:[l:[d:[s:x]:[i:1]],[d:[s:x]:[i:1],[s:x]:[i:1]]]]";
    assert_eq!(
        duplicate::<Point>(text),
        ("x".into(), nth(text, "[s:x]", 3))
    );
    // A key that starts like a field, or that a field starts like, is another key.
    let point: Point =
        concord_aicl::from_str("[d:[s:x]:[i:1],[s:xx]:[i:1],[s:y]:[i:2],[s:lab]:[i:0]]").unwrap();
    assert_eq!((point.x, point.y), (1, 2));
}

#[test]
fn nested_structs() {
    let text = "[d:[s:name]:[s:s],[s:origin]:[d:[s:x]:[i:0],[s:y]:[i:0]],[s:points]:[l:[d:[s:x]:[i:1],[s:y]:[i:1]]]]";
    let shape: Shape = concord_aicl::from_str(text).unwrap();
    assert_eq!(
        shape.points,
        vec![Point {
            x: 1,
            y: 1,
            label: None
        }]
    );
    let text = "[d:[s:name]:[s:s],[s:origin]:[d:[s:x]:[i:0],[s:y]:[i:0],[s:y]:[i:1]]]";
    assert_eq!(
        duplicate::<Shape>(text),
        ("y".into(), nth(text, "[s:y]", 1))
    );
    let text = "[d:[s:name]:[s:s],[s:origin]:[d:[s:x]:[i:0],[s:y]:[i:0]],[s:points]:[l:[d:[s:x]:[i:1],[s:y]:[i:1],[s:x]:[i:1]]]]";
    assert_eq!(
        duplicate::<Shape>(text),
        ("x".into(), nth(text, "[s:x]", 2))
    );
    let text = "[d:[s:name]:[s:s],[s:origin]:[d:[s:x]:[i:0],[s:y]:[i:0]],[s:name]:[s:t]]";
    assert_eq!(
        duplicate::<Shape>(text),
        ("name".into(), nth(text, "[s:name]", 1))
    );
}

#[test]
fn flattened_structs_and_maps() {
    let value: Flattened = concord_aicl::from_str("[d:[s:id]:[i:1],[s:a]:[i:2]]").unwrap();
    assert_eq!(value.rest.get("a"), Some(&2));
    let text = "[d:[s:id]:[i:1],[s:a]:[i:2],[s:a]:[i:3]]";
    assert_eq!(
        duplicate::<Flattened>(text),
        ("a".into(), nth(text, "[s:a]", 1))
    );
    let text = "[d:[s:id]:[i:1],[s:a]:[i:2],[s:id]:[i:3]]";
    assert_eq!(
        duplicate::<Flattened>(text),
        ("id".into(), nth(text, "[s:id]", 1))
    );
    // A `HashMap` would keep the last value.
    let text = "[d:[s:a]:[i:1],[s:b]:[i:2],[s:a]:[i:3]]";
    assert_eq!(
        duplicate::<HashMap<String, i64>>(text),
        ("a".into(), nth(text, "[s:a]", 1))
    );
    assert_eq!(
        duplicate::<Value>(text),
        ("a".into(), nth(text, "[s:a]", 1))
    );
}

#[test]
fn escaped_keys_are_compared_decoded() {
    let text = r"[d:[s:a\[1\]]:[i:1],[s:a\\b]:[i:2],[s:plain]:[i:3]]";
    let renamed: Renamed = concord_aicl::from_str(text).unwrap();
    assert_eq!(
        (renamed.bracketed, renamed.backslashed, renamed.plain),
        (1, 2, 3)
    );
    let text = r"[d:[s:a\[1\]]:[i:1],[s:a\\b]:[i:2],[s:plain]:[i:3],[s:a\[1\]]:[i:1]]";
    assert_eq!(
        duplicate::<Renamed>(text),
        ("a[1]".into(), nth(text, r"[s:a\[1\]]", 1))
    );
    // A field name holding `[`, `]` or `\` matches only the escaped key: written raw, the
    // key is malformed, as it is for any target.
    for text in [
        r"[d:[s:a[1]]:[i:1],[s:a\\b]:[i:2],[s:plain]:[i:3]]",
        r"[d:[s:a\[1\]]:[i:1],[s:a\b]:[i:2],[s:plain]:[i:3]]",
    ] {
        let error = concord_aicl::from_str::<Renamed>(text).unwrap_err();
        let expected = concord_aicl::from_str::<Value>(text).unwrap_err();
        assert!(
            matches!(
                error.kind(),
                ErrorKind::UnescapedBracket | ErrorKind::BadEscape { .. }
            ),
            "{text}: {error}"
        );
        assert_eq!(
            (error.kind(), error.position()),
            (expected.kind(), expected.position())
        );
    }
    let text = r"[d:[s:a\\b]:[i:2],[s:a\\b]:[i:2]]";
    assert_eq!(
        duplicate::<Renamed>(text),
        (r"a\b".into(), nth(text, r"[s:a\\b]", 1))
    );
}

#[test]
fn whitespace_around_keys() {
    let text = "[d:\n  [s:x] : [i:1],\n  [s:y]:[i:2],\n  [s:x]:[i:3]\n]";
    let error = concord_aicl::from_str::<Point>(text).unwrap_err();
    assert_eq!(
        error.kind(),
        &ErrorKind::DuplicateKey {
            key: "x".to_owned()
        }
    );
    let position = error.position().unwrap();
    assert_eq!((position.text.line, position.text.column), (4, 3));
}

#[test]
fn lenient_mode_leaves_duplicates_to_the_target() {
    let lenient = ParseOptions::lenient();
    let map: HashMap<String, i64> =
        concord_aicl::from_str_with("[d:[s:a]:[i:1],[s:a]:[i:3]]", &lenient).unwrap();
    assert_eq!(map["a"], 3);
    // serde's own check for structs.
    let error =
        concord_aicl::from_str_with::<Point>("[d:[s:x]:[i:1],[s:y]:[i:2],[s:x]:[i:3]]", &lenient)
            .unwrap_err();
    assert!(error.to_string().contains("duplicate field `x`"), "{error}");
}

/// A struct of `fields.len()` fields read through `deserialize_struct`, counting the entries.
struct Wide(usize);

/// The field names `f0`, `f1`, …
fn wide_fields(count: usize) -> &'static [&'static str] {
    let names: Vec<&'static str> = (0..count)
        .map(|i| &*String::leak(format!("f{i}")))
        .collect();
    Vec::leak(names)
}

struct WideSeed(&'static [&'static str]);

impl<'de> de::DeserializeSeed<'de> for WideSeed {
    type Value = Wide;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Wide, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Wide;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a wide struct")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Wide, A::Error> {
                let mut count = 0;
                while map.next_entry::<String, IgnoredAny>()?.is_some() {
                    count += 1;
                }
                Ok(Wide(count))
            }
        }
        deserializer.deserialize_struct("Wide", self.0, Entries)
    }
}

fn read_wide(fields: &'static [&'static str], keys: &[String]) -> Result<usize, Error> {
    let body: Vec<String> = keys.iter().map(|key| format!("[s:{key}]:[i:0]")).collect();
    let text = format!("[d:{}]", body.join(","));
    let mut deserializer = concord_aicl::Deserializer::new(&text, ParseOptions::strict());
    let wide = de::DeserializeSeed::deserialize(WideSeed(fields), &mut deserializer)?;
    deserializer.end()?;
    Ok(wide.0)
}

#[test]
fn structs_of_more_than_64_fields() {
    let fields = wide_fields(100);
    let mut keys: Vec<String> = fields.iter().map(|name| name.to_string()).collect();
    assert_eq!(read_wide(fields, &keys).unwrap(), 100);
    keys.reverse();
    assert_eq!(read_wide(fields, &keys).unwrap(), 100);
    for repeated in ["f3", "f63", "f64", "f99"] {
        let mut keys = keys.clone();
        keys.push(repeated.to_owned());
        let error = read_wide(fields, &keys).unwrap_err();
        assert_eq!(
            error.kind(),
            &ErrorKind::DuplicateKey {
                key: repeated.to_owned()
            }
        );
    }
}

proptest! {
    /// Any sequence of keys (fields, other keys, escaped ones) read into a struct fails exactly
    /// when a key repeats, at its second occurrence, as it does when read into a `Value`.
    #[test]
    fn a_struct_refuses_the_same_duplicates_as_a_value(
        keys in proptest::collection::vec(
            prop_oneof![
                Just("f0"), Just("f1"), Just("f2"), Just("f70"), Just("f71"), Just("f"),
                Just("f00"), Just("g"), Just(r"f\[0\]"), Just(r"\\"), Just(""),
            ],
            0..24,
        ),
        field_count in prop_oneof![Just(0usize), Just(3), Just(72)],
    ) {
        let keys: Vec<String> = keys.into_iter().map(str::to_owned).collect();
        let fields = wide_fields(field_count);
        let body: Vec<String> = keys.iter().map(|key| format!("[s:{key}]:[i:0]")).collect();
        let text = format!("[d:{}]", body.join(","));
        let expected = concord_aicl::from_str::<Value>(&text).map(|_| keys.len());
        let actual = read_wide(fields, &keys);
        match (expected, actual) {
            (Ok(expected), Ok(actual)) => prop_assert_eq!(expected, actual),
            (Err(expected), Err(actual)) => {
                prop_assert_eq!(expected.kind(), actual.kind());
                prop_assert_eq!(expected.position(), actual.position());
            }
            (expected, actual) => prop_assert!(false, "{}: {:?} vs {:?}", text, expected, actual),
        }
    }
}
