//! Property tests: Value → text → Value is the identity (compact and pretty), the writers agree,
//! the canonical text is a fixed point, and any serde type round-trips.

use std::collections::BTreeMap;

use concord_aicl::{json, DType, Map, ParseOptions, Tensor, Value};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

/// Equality where every NaN equals every NaN (the writer spells them all `nan`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => {
            (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
        }
        (Value::List(xs), Value::List(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same(x, y))
        }
        (Value::Dict(xs), Value::Dict(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .zip(ys.iter())
                    .all(|((kx, x), (ky, y))| kx == ky && same(x, y))
        }
        _ => a == b,
    }
}

fn tensor() -> impl Strategy<Value = Tensor> {
    (
        proptest::sample::select(DType::ALL.to_vec()),
        proptest::collection::vec(0usize..4, 0..4),
    )
        .prop_flat_map(|(dtype, shape)| {
            let bytes = shape.iter().product::<usize>() * dtype.itemsize();
            proptest::collection::vec(any::<u8>(), bytes).prop_map(move |mut data| {
                if dtype == DType::Bool {
                    data.iter_mut().for_each(|byte| *byte &= 1);
                }
                Tensor::new(dtype, shape.clone(), data).unwrap()
            })
        })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "[a-z\\[\\]\\\\:, \n#]{0,12}",]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        text().prop_map(Value::String),
        any::<i64>().prop_map(Value::Int),
        any::<f64>().prop_map(Value::Float),
        prop_oneof![
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
            Just(f64::NAN)
        ]
        .prop_map(Value::Float),
        any::<bool>().prop_map(Value::Bool),
        tensor().prop_map(Value::Tensor),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::List),
            proptest::collection::vec((text(), inner), 0..6)
                .prop_map(|entries| Value::Dict(entries.into_iter().collect::<Map>())),
        ]
    })
}

fn has_non_finite(value: &Value) -> bool {
    match value {
        Value::Float(x) => !x.is_finite(),
        Value::List(items) => items.iter().any(has_non_finite),
        Value::Dict(map) => map.values().any(has_non_finite),
        Value::Tensor(tensor) => {
            let json = json::to_json(&Value::Tensor(tensor.clone()));
            json.is_err()
        }
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn compact_text_round_trips(value in value()) {
        let text = value.to_string();
        prop_assert_eq!(&text, &concord_aicl::to_string(&value).unwrap(), "both writers agree");
        let back: Value = concord_aicl::from_str(&text).unwrap();
        prop_assert!(same(&back, &value), "{}", text);
        prop_assert_eq!(&back.to_string(), &text, "canonical text is a fixed point");
        let lenient: Value = concord_aicl::from_str_with(&text, &ParseOptions::lenient()).unwrap();
        prop_assert!(same(&lenient, &value));
    }

    #[test]
    fn pretty_text_round_trips(value in value()) {
        let text = format!("{value:#}");
        prop_assert_eq!(&text, &concord_aicl::to_string_pretty(&value).unwrap());
        let back: Value = concord_aicl::from_slice(text.as_bytes()).unwrap();
        prop_assert!(same(&back, &value), "{}", text);
    }

    #[test]
    fn json_bridge_round_trips(value in value()) {
        match json::to_json(&value) {
            Ok(json) => {
                let back = json::from_json(&json).unwrap();
                // A dictionary shaped like a tensor in JSON comes back as a tensor; strings
                // from `text()` never name a dtype, so that cannot happen here.
                prop_assert!(same(&back, &value));
            }
            Err(error) => {
                prop_assert!(has_non_finite(&value), "{}", error);
                prop_assert_eq!(error.code(), concord_aicl::ErrorCode::DataFormatError);
            }
        }
    }

    #[test]
    fn any_prefix_of_valid_text_fails_cleanly(value in value(), cut in any::<proptest::sample::Index>()) {
        let text = value.to_string();
        let cut = cut.index(text.len());
        if let Some(prefix) = text.get(..cut) {
            if let Err(error) = concord_aicl::from_str::<Value>(prefix) {
                prop_assert!(error.position().is_some(), "{}", error);
            }
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
enum Kind {
    Empty,
    Count(u16),
    Pair(i8, String),
    Named { weight: f32, tags: Vec<String> },
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Record {
    id: u64,
    name: String,
    score: f64,
    small: f32,
    active: bool,
    letter: char,
    kind: Kind,
    kinds: Vec<Kind>,
    note: Option<String>,
    limits: BTreeMap<String, i32>,
    by_id: BTreeMap<u32, bool>,
    pair: (i64, bool),
    nested: Vec<Vec<u8>>,
    tensor: Tensor,
}

fn finite_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO,
        Just(f64::INFINITY),
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Empty),
        any::<u16>().prop_map(Kind::Count),
        (any::<i8>(), text()).prop_map(|(a, b)| Kind::Pair(a, b)),
        (
            proptest::num::f32::NORMAL | proptest::num::f32::ZERO | proptest::num::f32::SUBNORMAL,
            proptest::collection::vec(text(), 0..3)
        )
            .prop_map(|(weight, tags)| Kind::Named { weight, tags }),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    (
        (
            0..=i64::MAX as u64,
            text(),
            finite_f64(),
            any::<f32>().prop_filter("no NaN", |x| !x.is_nan()),
        ),
        (
            any::<bool>(),
            any::<char>(),
            kind(),
            proptest::collection::vec(kind(), 0..4),
        ),
        (
            proptest::option::of(text()),
            proptest::collection::btree_map(text(), any::<i32>(), 0..4),
            proptest::collection::btree_map(any::<u32>(), any::<bool>(), 0..4),
        ),
        (
            (any::<i64>(), any::<bool>()),
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..4), 0..3),
            tensor(),
        ),
    )
        .prop_map(
            |(
                (id, name, score, small),
                (active, letter, kind, kinds),
                (note, limits, by_id),
                (pair, nested, tensor),
            )| Record {
                id,
                name,
                score,
                small,
                active,
                letter,
                kind,
                kinds,
                note,
                limits,
                by_id,
                pair,
                nested,
                tensor,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn serde_types_round_trip(record in record()) {
        let text = concord_aicl::to_string(&record).unwrap();
        prop_assert_eq!(&concord_aicl::from_str::<Record>(&text).unwrap(), &record);
        let pretty = concord_aicl::to_string_pretty(&record).unwrap();
        prop_assert_eq!(&concord_aicl::from_str::<Record>(&pretty).unwrap(), &record);
        let value = concord_aicl::to_value(&record).unwrap();
        prop_assert_eq!(value.to_string(), text.clone());
        prop_assert_eq!(&concord_aicl::from_value::<Record>(value).unwrap(), &record);
        let parsed: Value = concord_aicl::from_str(&text).unwrap();
        prop_assert_eq!(&concord_aicl::from_value::<Record>(parsed).unwrap(), &record);
    }

    #[test]
    fn typed_tensors_round_trip(values in proptest::collection::vec(any::<f32>(), 0..40), ints in proptest::collection::vec(any::<i64>(), 0..40)) {
        let floats = Tensor::from_vec(vec![values.len()], values.clone()).unwrap();
        let back: Tensor = concord_aicl::from_str(&concord_aicl::to_string(&floats).unwrap()).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&back.to_vec::<f32>().unwrap()), bits(&values));
        let longs = Tensor::from_vec(vec![1, ints.len()], ints.clone()).unwrap();
        let back: Tensor = concord_aicl::from_value(concord_aicl::to_value(&longs).unwrap()).unwrap();
        prop_assert_eq!(back.to_vec::<i64>().unwrap(), ints);
    }
}
