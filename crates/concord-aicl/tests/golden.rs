//! Golden vectors produced by Python (`testdata/generate_golden.py`, `base64.b85encode`,
//! `struct` little-endian packing): our tensors and base85 agree with them byte for byte.

use concord_aicl::{json, DType, ErrorKind, Tensor, Value};
use serde_json::Value as Json;

fn vectors(name: &str) -> Json {
    let path = format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    serde_json::from_str(&text).unwrap()
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn str_of<'a>(json: &'a Json, key: &str) -> &'a str {
    json[key].as_str().unwrap()
}

#[test]
fn base85_encoding_matches_python() {
    let vectors = vectors("golden-base85.json");
    let cases = vectors["encode"].as_array().unwrap();
    assert!(cases.len() > 25);
    for case in cases {
        let bytes = hex(str_of(case, "hex"));
        let expected = str_of(case, "base85");
        let tensor = Tensor::from_vec(vec![bytes.len()], bytes.clone()).unwrap();
        let text = Value::Tensor(tensor.clone()).to_string();
        assert_eq!(text, format!("[t:uint8:{}:{expected}]", bytes.len()));
        assert_eq!(text.parse::<Value>().unwrap(), Value::Tensor(tensor));
    }
}

#[test]
fn base85_decoding_matches_python() {
    let vectors = vectors("golden-base85.json");
    for case in vectors["decode"].as_array().unwrap() {
        let text = str_of(case, "text");
        if let Some(expected) = case["hex"].as_str() {
            let bytes = hex(expected);
            let aicl = format!("[t:uint8:{}:{text}]", bytes.len());
            let value: Value = aicl
                .parse()
                .unwrap_or_else(|error| panic!("{aicl}: {error}"));
            assert_eq!(value.as_tensor().unwrap().data(), &bytes[..], "{text}");
            continue;
        }
        // Python's error and position; our text has the 5k + 1 lengths Python also rejects.
        let bytes_for_length = text.len() / 5 * 4 + (text.len() % 5).saturating_sub(1);
        let aicl = format!("[t:uint8:{bytes_for_length}:{text}]");
        let error = aicl.parse::<Value>().unwrap_err();
        let at = case["at"].as_u64().unwrap() as usize;
        let prefix = aicl.len() - text.len() - 1;
        match str_of(case, "error") {
            "overflow" => assert_eq!(
                error.kind(),
                &ErrorKind::Base85Overflow { group_start: at },
                "{aicl}"
            ),
            "bad_char" => {
                assert!(
                    matches!(error.kind(), ErrorKind::BadBase85Char { .. }),
                    "{aicl}: {error}"
                );
                assert_eq!(error.position().unwrap().offset, prefix + at, "{aicl}");
            }
            other => panic!("unknown error kind {other}"),
        }
    }
}

/// Python writes floats as their repr text; Rust's parser rounds them correctly.
fn python_float(json: &Json) -> Option<f64> {
    json.as_str().map(|text| text.parse().unwrap())
}

fn same_number(actual: &Json, expected: &Json) -> bool {
    match python_float(expected) {
        Some(wanted) => actual
            .as_f64()
            .is_some_and(|a| a.to_bits() == wanted.to_bits()),
        None => actual == expected,
    }
}

#[test]
fn tensors_match_python_for_every_dtype() {
    let vectors = vectors("golden-tensors.json");
    let cases = vectors.as_array().unwrap();
    let mut dtypes_seen = std::collections::HashSet::new();
    for case in cases {
        let dtype: DType = str_of(case, "dtype").parse().unwrap();
        dtypes_seen.insert(dtype);
        let text = str_of(case, "aicl");
        let value: Value = text
            .parse()
            .unwrap_or_else(|error| panic!("{text}: {error}"));
        let tensor = value.as_tensor().unwrap();
        let shape: Vec<usize> = serde_json::from_value(case["shape"].clone()).unwrap();
        assert_eq!(tensor.dtype(), dtype);
        assert_eq!(tensor.shape(), &shape[..]);
        assert_eq!(tensor.data(), &hex(str_of(case, "hex"))[..], "{text}");
        // The writer produces Python's text exactly.
        assert_eq!(value.to_string(), text);
        // Element values, through the JSON bridge (NaN/inf have no JSON form: compare those apart).
        let expected = case["values"].as_array().unwrap();
        assert_eq!(tensor.len(), expected.len());
        let has_non_finite = expected
            .iter()
            .any(|value| python_float(value).is_some_and(|float| !float.is_finite()));
        match json::to_json(&value) {
            Ok(bridge) => {
                assert!(!has_non_finite);
                let data = bridge["data"].as_array().unwrap();
                for (actual, wanted) in data.iter().zip(expected) {
                    assert!(same_number(actual, wanted), "{text}: {actual} != {wanted}");
                }
            }
            Err(error) => assert!(has_non_finite, "{text}: {error}"),
        }
    }
    assert_eq!(dtypes_seen.len(), DType::ALL.len());
}

#[test]
fn typed_elements_match_python() {
    let vectors = vectors("golden-tensors.json");
    for case in vectors.as_array().unwrap() {
        let value: Value = str_of(case, "aicl").parse().unwrap();
        let tensor = value.as_tensor().unwrap();
        let expected = case["values"].as_array().unwrap();
        let same = |actual: f64, wanted: &Json| {
            let wanted = python_float(wanted).unwrap();
            (actual.is_nan() && wanted.is_nan()) || actual.to_bits() == wanted.to_bits()
        };
        match tensor.dtype() {
            DType::Float16 => {
                for (a, e) in tensor
                    .to_vec::<concord_aicl::f16>()
                    .unwrap()
                    .iter()
                    .zip(expected)
                {
                    assert!(same(a.to_f64(), e));
                }
            }
            DType::BFloat16 => {
                for (a, e) in tensor
                    .to_vec::<concord_aicl::bf16>()
                    .unwrap()
                    .iter()
                    .zip(expected)
                {
                    assert!(same(a.to_f64(), e));
                }
            }
            DType::Float32 => {
                for (a, e) in tensor.to_vec::<f32>().unwrap().iter().zip(expected) {
                    assert!(same(f64::from(*a), e));
                }
            }
            DType::Float64 => {
                for (a, e) in tensor.to_vec::<f64>().unwrap().iter().zip(expected) {
                    assert!(same(*a, e));
                }
            }
            DType::UInt64 => {
                let wanted: Vec<u64> = serde_json::from_value(case["values"].clone()).unwrap();
                assert_eq!(tensor.to_vec::<u64>().unwrap(), wanted);
            }
            DType::Int64 => {
                let wanted: Vec<i64> = serde_json::from_value(case["values"].clone()).unwrap();
                assert_eq!(tensor.to_vec::<i64>().unwrap(), wanted);
            }
            DType::Bool => {
                let wanted: Vec<bool> = serde_json::from_value(case["values"].clone()).unwrap();
                assert_eq!(tensor.to_vec::<bool>().unwrap(), wanted);
            }
            _ => {
                // The narrower integer types, through the bridge.
                let bridge = json::to_json(&value).unwrap();
                assert_eq!(&bridge["data"], &case["values"]);
            }
        }
    }
}
