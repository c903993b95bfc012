//! The serde data model: what Rust types become in AICL, and back.

use std::collections::{BTreeMap, HashMap};

use concord_aicl::{from_str, from_value, to_string, to_value, ErrorCode, Tensor, Value};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
enum Shape {
    Point,
    Circle(f64),
    Rect(f64, f64),
    Polygon { sides: u8, length: f64 },
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Wrapper(String);

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Unit;

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Everything {
    name: String,
    count: u32,
    delta: i64,
    ratio: f32,
    flag: bool,
    letter: char,
    tags: Vec<String>,
    pair: (u8, String),
    shapes: Vec<Shape>,
    wrapped: Wrapper,
    unit: (),
    marker: Unit,
    maybe: Option<String>,
    absent: Option<u64>,
    scores: BTreeMap<u32, f64>,
    nested: HashMap<String, Vec<i16>>,
    #[serde(with = "bytes")]
    blob: Vec<u8>,
    weights: Tensor,
}

/// `serialize_bytes` / `deserialize_byte_buf`, like the `serde_bytes` crate.
mod bytes {
    pub fn serialize<S: serde::Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(bytes)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_byte_buf<E>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(bytes)
            }
            fn visit_bytes<E>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
                Ok(bytes.to_vec())
            }
        }
        deserializer.deserialize_byte_buf(Visitor)
    }
}

fn everything() -> Everything {
    Everything {
        name: "a [bracketed] \\ name".into(),
        count: 7,
        delta: -3,
        ratio: 0.1,
        flag: true,
        letter: '语',
        tags: vec!["x".into(), "y".into()],
        pair: (1, "one".into()),
        shapes: vec![
            Shape::Point,
            Shape::Circle(1.5),
            Shape::Rect(2.0, 3.0),
            Shape::Polygon {
                sides: 6,
                length: 1.0,
            },
        ],
        wrapped: Wrapper("inner".into()),
        unit: (),
        marker: Unit,
        maybe: Some("here".into()),
        absent: None,
        scores: [(1, 0.5), (2, 0.25)].into_iter().collect(),
        nested: [("k".to_owned(), vec![-1, 2])].into_iter().collect(),
        blob: vec![0, 1, 2, 255, 254],
        weights: Tensor::from_vec(vec![2, 2], vec![1.0f32, -2.0, 0.5, 4.0]).unwrap(),
    }
}

#[test]
fn every_kind_of_field_round_trips() {
    let original = everything();
    let text = to_string(&original).unwrap();
    assert_eq!(from_str::<Everything>(&text).unwrap(), original);
    let pretty = concord_aicl::to_string_pretty(&original).unwrap();
    assert_eq!(from_str::<Everything>(&pretty).unwrap(), original);
    let value = to_value(&original).unwrap();
    assert_eq!(value.to_string(), text, "to_value then write == to_string");
    assert_eq!(from_value::<Everything>(value.clone()).unwrap(), original);
    // Through `Value` parsed from text, too.
    assert_eq!(from_str::<Value>(&text).unwrap(), value);
}

#[test]
fn the_data_model_in_text() {
    let text = to_string(&everything()).unwrap();
    for fragment in [
        r"[s:name]:[s:a \[bracketed\] \\ name]",
        "[s:ratio]:[f:0.1]",
        "[s:letter]:[s:语]",
        "[s:pair]:[l:[i:1],[s:one]]",
        "[s:shapes]:[l:[s:Point],[d:[s:Circle]:[f:1.5]],[d:[s:Rect]:[l:[f:2.0],[f:3.0]]],[d:[s:Polygon]:[d:[s:sides]:[i:6],[s:length]:[f:1.0]]]]",
        "[s:wrapped]:[s:inner]",
        "[s:unit]:[l:]",
        "[s:marker]:[l:]",
        "[s:maybe]:[s:here]",
        "[s:scores]:[d:[s:1]:[f:0.5],[s:2]:[f:0.25]]",
        "[s:blob]:[t:uint8:5:",
        "[s:weights]:[t:float32:2,2:",
    ] {
        assert!(text.contains(fragment), "missing {fragment} in\n{text}");
    }
    assert!(!text.contains("absent"), "None fields are left out");
}

#[test]
fn none_outside_an_entry_is_an_error() {
    let error = to_string(&vec![Some(1), None]).unwrap_err();
    assert_eq!(error.code(), ErrorCode::DataFormatError);
    assert!(error.to_string().contains("no null"), "{error}");
    assert!(to_value(&Option::<u8>::None).is_err());
    // In a map, a None value leaves the entry out.
    let map: BTreeMap<&str, Option<i32>> = [("a", Some(1)), ("b", None), ("c", Some(3))].into();
    assert_eq!(to_string(&map).unwrap(), "[d:[s:a]:[i:1],[s:c]:[i:3]]");
    assert_eq!(
        to_value(&map).unwrap().to_string(),
        "[d:[s:a]:[i:1],[s:c]:[i:3]]"
    );
    let pretty = concord_aicl::to_string_pretty(&map).unwrap();
    assert_eq!(pretty, "[d:\n  [s:a]:[i:1],\n  [s:c]:[i:3]\n]");
    let only_none: BTreeMap<&str, Option<i32>> = [("b", None)].into();
    assert_eq!(concord_aicl::to_string_pretty(&only_none).unwrap(), "[d:]");
}

#[test]
fn integers_beyond_i64_are_errors() {
    assert!(to_string(&u64::MAX).is_err());
    assert_eq!(
        to_string(&(i64::MAX as u64)).unwrap(),
        "[i:9223372036854775807]"
    );
    assert!(to_value(&u128::MAX).is_err());
    assert!(from_str::<u8>("[i:256]").is_err());
    assert_eq!(from_str::<u8>("[i:255]").unwrap(), 255);
    assert_eq!(from_str::<f64>("[i:3]").unwrap(), 3.0);
}

#[test]
fn typed_vectors_read_from_tensors() {
    let tensor = Tensor::from_vec(vec![4], vec![1.5f32, -0.25, 3.0, 0.0]).unwrap();
    let text = to_string(&tensor).unwrap();
    assert_eq!(from_str::<Vec<f32>>(&text).unwrap(), [1.5, -0.25, 3.0, 0.0]);
    assert_eq!(from_str::<Vec<f64>>(&text).unwrap(), [1.5, -0.25, 3.0, 0.0]);
    let matrix = to_string(&Tensor::from_vec(vec![2, 2], vec![1u8, 2, 3, 4]).unwrap()).unwrap();
    assert!(
        from_str::<Vec<u8>>(&matrix).is_err(),
        "rank 2 is not a flat sequence"
    );
    // Lists still read as lists.
    assert_eq!(from_str::<Vec<u8>>("[l:[i:1],[i:2]]").unwrap(), [1, 2]);
}

#[test]
fn bytes_are_uint8_tensors_only() {
    let text = to_string(&Tensor::from_vec(vec![2], vec![1.0f32, 2.0]).unwrap()).unwrap();
    #[derive(Deserialize, Debug)]
    struct Blob {
        #[serde(with = "bytes")]
        _data: Vec<u8>,
    }
    let wrapped = format!("[d:[s:_data]:{text}]");
    let error = from_str::<Blob>(&wrapped).unwrap_err();
    assert!(error.to_string().contains("float32 tensor"), "{error}");
    assert_eq!(error.position().unwrap().offset, 13);
}

#[test]
fn tensors_cross_into_other_formats() {
    let tensor = Tensor::from_vec(vec![3], vec![1i32, -2, 3]).unwrap();
    // serde_json is human-readable: the bridge form with numbers.
    let json = serde_json::to_string(&tensor).unwrap();
    assert_eq!(json, r#"{"dtype":"int32","shape":[3],"data":[1,-2,3]}"#);
    assert_eq!(serde_json::from_str::<Tensor>(&json).unwrap(), tensor);
    // AICL text read as `serde_json::Value` (a generic visitor) gets the same bridge form.
    let generic: serde_json::Value = from_str(&to_string(&tensor).unwrap()).unwrap();
    assert_eq!(generic.to_string(), json);
    // Nested data is accepted when it follows the shape.
    let nested = r#"{"dtype":"uint8","shape":[2,2],"data":[[1,2],[3,4]]}"#;
    let parsed: Tensor = serde_json::from_str(nested).unwrap();
    assert_eq!(parsed.data(), &[1, 2, 3, 4]);
    let ragged = r#"{"dtype":"uint8","shape":[2,2],"data":[[1,2],[3]]}"#;
    assert!(serde_json::from_str::<Tensor>(ragged).is_err());
    // A bridge-form dictionary in AICL text also reads as a tensor.
    let dict = "[d:[s:dtype]:[s:uint8],[s:shape]:[l:[i:2]],[s:data]:[l:[i:7],[i:9]]]";
    assert_eq!(from_str::<Tensor>(dict).unwrap().data(), &[7, 9]);
}

#[test]
fn map_keys_are_text() {
    let map: HashMap<u16, bool> = [(443, true)].into_iter().collect();
    let text = to_string(&map).unwrap();
    assert_eq!(text, "[d:[s:443]:[b:true]]");
    assert_eq!(from_str::<HashMap<u16, bool>>(&text).unwrap(), map);
    assert!(from_str::<HashMap<u16, bool>>("[d:[s:port]:[b:true]]").is_err());
    let tuple_keys: BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
    assert!(to_string(&tuple_keys).is_err());
}

#[test]
fn borrowed_strings_are_zero_copy() {
    #[derive(Deserialize)]
    struct Borrowed<'a> {
        #[serde(borrow)]
        name: &'a str,
    }
    let text = "[d:[s:name]:[s:plain]]";
    let parsed: Borrowed<'_> = from_str(text).unwrap();
    assert_eq!(parsed.name, "plain");
    // Escaped text cannot be borrowed.
    assert!(from_str::<Borrowed<'_>>(r"[d:[s:name]:[s:a\[b]]").is_err());
    assert_eq!(from_str::<String>(r"[s:a\[b]").unwrap(), "a[b");
}

#[test]
fn type_errors_name_the_place() {
    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Product {
        name: String,
        price: f64,
    }
    let error =
        from_str::<Product>("[d:\n  [s:name]:[s:x],\n  [s:price]:[s:cheap]\n]").unwrap_err();
    assert_eq!(error.code(), ErrorCode::DataFormatError);
    let position = error.position().unwrap();
    assert_eq!((position.text.line, position.text.column), (3, 13));
    let error = from_str::<Product>("[d:[s:name]:[s:x]]").unwrap_err();
    assert!(
        error.to_string().contains("missing field `price`"),
        "{error}"
    );
}
