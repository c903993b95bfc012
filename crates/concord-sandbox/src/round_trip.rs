//! What a JSON value becomes on its way through a handler (passed in, returned unchanged),
//! and the caps the sandbox measures it against on the way.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use crate::convert::number_value;
use crate::error::SandboxError;
use crate::limits::Limits;
use crate::meter::measure;

/// The value a handler returns when it returns its input unchanged: what the engine makes
/// of any JSON value.
///
/// - **Numbers** become JavaScript numbers (doubles) and come back as `JSON.stringify` then
///   `serde_json` give them: `1.0` is `1`, `-0.0` is `0`, integers beyond ±2^53 are rounded
///   to the nearest double (`9007199254740993` is `9007199254740992`).
/// - **Object members** come back in JavaScript's property order: integer-like keys
///   (`"0"`, `"7"`, `"10"`; canonical array indices) first, in ascending numeric order, then
///   the others in the order they were given.
/// - Everything else is unchanged.
///
/// Borrowed when `value` is already in that form (the common case), so checking costs no
/// allocation. Values nested deeper than the sandbox accepts are converted all the same.
///
/// ```
/// use concord_sandbox::round_trip;
/// use serde_json::json;
///
/// let value = json!({"b": 1.0, "10": 2, "2": [9007199254740993u64, -0.0, 1.5]});
/// assert_eq!(
///     serde_json::to_string(&round_trip(&value))?,
///     r#"{"2":[9007199254740992,0,1.5],"10":2,"b":1}"#
/// );
/// let plain = json!({"productId": "P1", "price": 1299.99});
/// assert!(matches!(round_trip(&plain), std::borrow::Cow::Borrowed(_)));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn round_trip(value: &Value) -> Cow<'_, Value> {
    if is_round_trip_stable(value) {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(convert(value))
    }
}

/// Checks `value` against the input caps as the sandbox does while it passes an argument
/// in: [`SandboxError::InputTooLarge`] when the argument's compact JSON text is over
/// [`Limits::input_bytes`], [`SandboxError::InputTooDeep`] when arrays and objects nest
/// deeper than 127 levels, whichever it meets first, member by member.
///
/// `value` sits `depth` levels inside the argument, after `before` bytes of its text (0 and
/// 0 when `value` is the argument itself). For native code that must refuse what the
/// sandbox refuses.
///
/// ```
/// use concord_sandbox::{check_input, Limits, SandboxError};
/// use serde_json::json;
///
/// let mut limits = Limits::default();
/// limits.input_bytes = 16;
/// assert!(check_input(&json!({"id": "P1"}), 0, 0, &limits).is_ok());
/// assert_eq!(
///     check_input(&json!({"id": "P1"}), 10, 1, &limits),
///     Err(SandboxError::InputTooLarge { limit: 16 })
/// );
/// ```
pub fn check_input(
    value: &Value,
    before: usize,
    depth: usize,
    limits: &Limits,
) -> Result<(), SandboxError> {
    measure(value, before, depth, limits.input_bytes, true).map_err(|over| over.input_error(limits))
}

/// Checks a result against the output cap as the sandbox does when it takes a result
/// out: [`SandboxError::OutputTooLarge`] when its compact JSON text, `around` bytes of an
/// enclosing result included, is over [`Limits::output_bytes`].
pub fn check_output(value: &Value, around: usize, limits: &Limits) -> Result<(), SandboxError> {
    measure(value, around, 0, limits.output_bytes, false).map_err(|_| {
        SandboxError::OutputTooLarge {
            limit: limits.output_bytes,
        }
    })
}

/// Orders an object's members as JavaScript enumerates them (see [`round_trip`]); the
/// members' values are left as they are.
pub fn property_order(map: Map<String, Value>) -> Map<String, Value> {
    if map.keys().all(|key| array_index(key).is_none()) {
        return map;
    }
    let mut indexed: Vec<(u32, String, Value)> = Vec::new();
    let mut named: Vec<(String, Value)> = Vec::new();
    for (key, value) in map {
        match array_index(&key) {
            Some(index) => indexed.push((index, key, value)),
            None => named.push((key, value)),
        }
    }
    indexed.sort_by_key(|(index, ..)| *index);
    indexed
        .into_iter()
        .map(|(_, key, value)| (key, value))
        .chain(named)
        .collect()
}

/// The index a property key stands for when JavaScript treats it as an array index: the
/// canonical decimal form of an integer from 0 to 2^32 - 2.
fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    let canonical = match bytes {
        [b'0'] => true,
        [b'1'..=b'9', rest @ ..] => rest.len() < 10 && rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical {
        return None;
    }
    key.parse::<u32>().ok().filter(|index| *index != u32::MAX)
}

fn is_round_trip_stable(value: &Value) -> bool {
    match value {
        Value::Number(number) => is_stable_number(number),
        Value::Array(items) => items.iter().all(is_round_trip_stable),
        Value::Object(map) => is_in_property_order(map) && map.values().all(is_round_trip_stable),
        Value::Null | Value::Bool(_) | Value::String(_) => true,
    }
}

fn is_in_property_order(map: &Map<String, Value>) -> bool {
    let mut previous: Option<u32> = None;
    let mut named = false;
    for key in map.keys() {
        match array_index(key) {
            Some(index) => {
                if named || previous.is_some_and(|previous| previous >= index) {
                    return false;
                }
                previous = Some(index);
            }
            None => named = true,
        }
    }
    true
}

/// 2^53: integers up to this size are exact as doubles.
const EXACT_INTEGERS: u64 = 1 << 53;

fn is_stable_number(number: &Number) -> bool {
    if let Some(integer) = number.as_i64() {
        return integer.unsigned_abs() <= EXACT_INTEGERS;
    }
    if number.as_u64().is_some() {
        // Beyond i64: always past 2^53.
        return false;
    }
    number
        .as_f64()
        .is_some_and(|float| number_value(float) == Value::Number(number.clone()))
}

fn convert(value: &Value) -> Value {
    match value {
        // The engine holds an `int32` or a double; either comes back as `number_value` gives it.
        Value::Number(number) => number_value(number.as_f64().unwrap_or(f64::NAN)),
        Value::Array(items) => Value::Array(items.iter().map(convert).collect()),
        Value::Object(map) => Value::Object(property_order(
            map.iter()
                .map(|(key, value)| (key.clone(), convert(value)))
                .collect(),
        )),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn array_indices_are_canonical_and_below_the_maximum() {
        for (key, index) in [
            ("0", Some(0)),
            ("7", Some(7)),
            ("4294967294", Some(4_294_967_294)),
        ] {
            assert_eq!(array_index(key), index, "{key}");
        }
        for key in [
            "",
            "01",
            "-1",
            "1.5",
            "4294967295",
            "99999999999",
            "1a",
            " 1",
        ] {
            assert_eq!(array_index(key), None, "{key}");
        }
    }

    #[test]
    fn stable_values_are_borrowed() {
        let stable = json!({"1": 1, "2": [2147483648u64, 0.5], "a": {"x": null}});
        assert!(matches!(round_trip(&stable), Cow::Borrowed(_)));
        for unstable in [
            json!({"a": 1, "1": 2}),
            json!({"2": 1, "1": 2}),
            json!([1.0]),
            json!(u64::MAX),
            json!(-0.0),
        ] {
            assert!(matches!(round_trip(&unstable), Cow::Owned(_)), "{unstable}");
        }
    }
}
