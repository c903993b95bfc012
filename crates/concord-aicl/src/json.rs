//! The JSON bridge: AICL values to and from `serde_json::Value`.
//!
//! | AICL | JSON |
//! |---|---|
//! | `[s:…]`, `[b:…]`, `[l:…]`, `[d:…]` | string, bool, array, object (key order kept) |
//! | `[i:…]` | integer number |
//! | `[f:…]` | number with a fraction or exponent (`1.0`); NaN and ±inf have none: an error |
//! | `[t:dtype:shape:data]` | `{"dtype": "float32", "shape": [2, 3], "data": [1.0, …]}` |
//!
//! From JSON, an object with exactly the keys `dtype`, `shape` and `data` whose `dtype` names a
//! tensor dtype is read as a tensor; `data` may be flat or nested as the shape. `null` and
//! integers beyond the signed 64-bit range have no AICL form and are errors, as are tensor
//! elements out of range for their dtype. Every error names the path (`/items/3/price`).

use serde::Deserialize;

use crate::error::{int_out_of_range_reason, Error, ErrorKind, Result};
use crate::tensor::{DType, Scalar, Tensor};
use crate::value::{Map, Value};

/// Converts an AICL value to JSON.
///
/// ```
/// use concord_aicl::{json, Tensor, Value};
///
/// let value: Value = "[d:[s:price]:[f:899.99],[s:pixels]:[t:uint8:3:0RjU]]".parse()?;
/// assert_eq!(
///     json::to_json(&value)?.to_string(),
///     r#"{"price":899.99,"pixels":{"dtype":"uint8","shape":[3],"data":[1,2,3]}}"#
/// );
/// assert!(json::to_json(&Value::Float(f64::NAN)).is_err());
/// # Ok::<(), concord_aicl::Error>(())
/// ```
pub fn to_json(value: &Value) -> Result<serde_json::Value> {
    let mut path = String::new();
    to_json_at(value, &mut path)
}

/// Converts JSON to an AICL value.
///
/// ```
/// use concord_aicl::{json, DType, Value};
///
/// let json = serde_json::json!({"weights": {"dtype": "float32", "shape": [2, 2], "data": [[1, 2], [3, 4.5]]}});
/// let value = json::from_json(&json)?;
/// let weights = value.get("weights").and_then(Value::as_tensor).unwrap();
/// assert_eq!(weights.dtype(), DType::Float32);
/// assert_eq!(weights.to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.5]);
/// assert!(json::from_json(&serde_json::json!({"a": null})).is_err());
/// # Ok::<(), concord_aicl::Error>(())
/// ```
pub fn from_json(json: &serde_json::Value) -> Result<Value> {
    let mut path = String::new();
    from_json_at(json, &mut path)
}

fn not_representable(path: &str, reason: String) -> Error {
    Error::new(ErrorKind::NotRepresentable {
        path: path.to_owned(),
        reason,
    })
}

/// Appends a JSON-pointer segment (`~` and `/` escaped) for the duration of `f`.
fn with_segment<T>(path: &mut String, segment: &str, f: impl FnOnce(&mut String) -> T) -> T {
    let length = path.len();
    path.push('/');
    path.push_str(&segment.replace('~', "~0").replace('/', "~1"));
    let result = f(path);
    path.truncate(length);
    result
}

fn to_json_at(value: &Value, path: &mut String) -> Result<serde_json::Value> {
    Ok(match value {
        Value::String(text) => serde_json::Value::String(text.clone()),
        Value::Int(value) => serde_json::Value::from(*value),
        Value::Float(value) => float_to_json(*value, path)?,
        Value::Bool(value) => serde_json::Value::Bool(*value),
        Value::List(items) => serde_json::Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    with_segment(path, itoa::Buffer::new().format(index), |path| {
                        to_json_at(item, path)
                    })
                })
                .collect::<Result<_>>()?,
        ),
        Value::Dict(map) => serde_json::Value::Object(
            map.iter()
                .map(|(key, item)| {
                    with_segment(path, key, |path| to_json_at(item, path))
                        .map(|item| (key.to_owned(), item))
                })
                .collect::<Result<_>>()?,
        ),
        Value::Tensor(tensor) => tensor_to_json(tensor, path)?,
    })
}

fn float_to_json(value: f64, path: &str) -> Result<serde_json::Value> {
    serde_json::Number::from_f64(value)
        .map(serde_json::Value::Number)
        .ok_or_else(|| not_representable(path, format!("float {value} has no JSON representation")))
}

fn tensor_to_json(tensor: &Tensor, path: &mut String) -> Result<serde_json::Value> {
    let data = with_segment(path, "data", |path| {
        tensor
            .scalars()
            .enumerate()
            .map(|(index, scalar)| match scalar {
                Scalar::Bool(value) => Ok(serde_json::Value::Bool(value)),
                Scalar::Int(value) => Ok(serde_json::Value::from(value)),
                Scalar::UInt(value) => Ok(serde_json::Value::from(value)),
                Scalar::Float(value) => {
                    with_segment(path, itoa::Buffer::new().format(index), |path| {
                        float_to_json(value, path)
                    })
                }
            })
            .collect::<Result<Vec<_>>>()
    })?;
    let mut object = serde_json::Map::new();
    object.insert("dtype".to_owned(), tensor.dtype().name().into());
    object.insert("shape".to_owned(), tensor.shape().into());
    object.insert("data".to_owned(), data.into());
    Ok(serde_json::Value::Object(object))
}

fn from_json_at(json: &serde_json::Value, path: &mut String) -> Result<Value> {
    Ok(match json {
        serde_json::Value::Null => {
            return Err(not_representable(
                path,
                "JSON null has no AICL equivalent".to_owned(),
            ))
        }
        serde_json::Value::Bool(value) => Value::Bool(*value),
        serde_json::Value::Number(number) => {
            if let Some(value) = number.as_i64() {
                Value::Int(value)
            } else if number.is_u64() {
                return Err(not_representable(path, int_out_of_range_reason(number)));
            } else {
                Value::Float(number.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(text) => Value::String(text.clone()),
        serde_json::Value::Array(items) => Value::List(
            items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    with_segment(path, itoa::Buffer::new().format(index), |path| {
                        from_json_at(item, path)
                    })
                })
                .collect::<Result<_>>()?,
        ),
        serde_json::Value::Object(object) if is_tensor(object) => {
            let tensor = Tensor::deserialize(json).map_err(|error| {
                let at = if path.is_empty() { "/" } else { path.as_str() };
                Error::new(ErrorKind::BadTensor {
                    reason: format!("{at}: {error}"),
                })
            })?;
            Value::Tensor(tensor)
        }
        serde_json::Value::Object(object) => Value::Dict(
            object
                .iter()
                .map(|(key, item)| {
                    with_segment(path, key, |path| from_json_at(item, path))
                        .map(|item| (key.clone(), item))
                })
                .collect::<Result<Map>>()?,
        ),
    })
}

/// Exactly `dtype`, `shape` and `data`, with `dtype` naming a tensor dtype.
fn is_tensor(object: &serde_json::Map<String, serde_json::Value>) -> bool {
    object.len() == 3
        && object.contains_key("shape")
        && object.contains_key("data")
        && object
            .get("dtype")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|name| DType::from_name(name).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_name_the_broken_place() {
        let value: Value = "[d:[s:items]:[l:[d:[s:price]:[f:nan]]]]".parse().unwrap();
        let error = to_json(&value).unwrap_err();
        assert!(error.to_string().starts_with("/items/0/price: float NaN"));
        let error = from_json(&json!({"a/b": [1, null]})).unwrap_err();
        assert!(error.to_string().starts_with("/a~1b/1: JSON null"));
        let error = from_json(&json!({"n": 18446744073709551615u64})).unwrap_err();
        assert!(error
            .to_string()
            .starts_with("/n: integer 18446744073709551615"));
    }

    #[test]
    fn tensors_go_both_ways() {
        let tensor = Tensor::from_vec(vec![2, 2], vec![1i16, -2, 3, -4]).unwrap();
        let json = to_json(&Value::Tensor(tensor.clone())).unwrap();
        assert_eq!(
            json,
            json!({"dtype": "int16", "shape": [2, 2], "data": [1, -2, 3, -4]})
        );
        assert_eq!(from_json(&json).unwrap(), Value::Tensor(tensor));
    }

    #[test]
    fn bad_tensor_objects_are_tensor_errors() {
        let error = from_json(&json!({"t": {"dtype": "uint8", "shape": [2], "data": [1, 256]}}))
            .unwrap_err();
        assert_eq!(error.code(), crate::ErrorCode::InvalidTensor);
        assert!(error.to_string().contains("/t"), "{error}");
        let error = from_json(&json!({"dtype": "int8", "shape": [2, 2], "data": [[1, 2], [3]]}))
            .unwrap_err();
        assert!(error.to_string().contains("shape"), "{error}");
        // Not a tensor dtype: an ordinary dictionary.
        let plain = from_json(&json!({"dtype": "text", "shape": "round", "data": null}));
        assert!(plain.is_err());
        let plain = from_json(&json!({"dtype": "text", "shape": "round", "data": 1})).unwrap();
        assert!(plain.as_dict().is_some());
    }

    #[test]
    fn integral_floats_stay_floats() {
        let value = Value::Float(1.0);
        let json = to_json(&value).unwrap();
        assert_eq!(json.to_string(), "1.0");
        let back: serde_json::Value = serde_json::from_str(&json.to_string()).unwrap();
        assert_eq!(from_json(&back).unwrap(), value);
    }
}
