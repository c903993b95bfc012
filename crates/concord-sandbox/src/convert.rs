//! Moving JSON values into and out of the engine.
//!
//! Measured (see the crate README), building JS values directly from a `serde_json::Value`, and
//! walking plain JS results back from Rust, costs about half of the JSON-text route
//! (`JSON.parse` of serialized text in, `JSON.stringify` then `serde_json` parsing out). The
//! walk reproduces `JSON.stringify` exactly for plain data (ordinary objects, arrays,
//! primitives, none with a `toJSON`) and hands anything else (`Date`, `Map`, wrapper objects,
//! `BigInt`, a `toJSON` method, lone surrogates, cycles) to the engine's own `JSON.stringify`,
//! so the semantics are always `JSON.stringify`'s.

use std::io;

use rquickjs::atom::PredefinedAtom;
use rquickjs::object::Property;
use rquickjs::{qjs, Array, Ctx, Object, Type, Value as JsValue};
use serde_json::{Map, Number, Value};

use crate::meter::{Meter, Over};
use crate::watch::Watch;

/// Deepest nesting of arrays and objects accepted in either direction: what `serde_json`'s
/// parser accepts, so every value that can arrive from the wire can be passed in, and every
/// output can be sent.
pub(crate) const MAX_NESTING: usize = 127;

/// Why an input could not be passed in.
#[derive(Debug)]
pub(crate) enum InputError {
    /// It is over the input limit or nests too deep.
    Over(Over),
    /// The deadline passed while it was being built (see [`to_js`]).
    DeadlinePassed,
    /// The engine failed (a limit was hit); the exception is pending on the context.
    Engine(rquickjs::Error),
}

impl From<rquickjs::Error> for InputError {
    fn from(error: rquickjs::Error) -> Self {
        InputError::Engine(error)
    }
}

impl From<Over> for InputError {
    fn from(over: Over) -> Self {
        InputError::Over(over)
    }
}

/// Builds the JS value `JSON.parse` would produce from `value`'s JSON text, counting the size of
/// that text as it goes ([`Meter`]) and stopping as soon as it passes `limit` bytes or nests
/// deeper than [`MAX_NESTING`].
///
/// Object members must be created as `JSON.parse` creates them, by definition: assignment would
/// run the `__proto__` setter, and fail for the names of `Object.prototype`'s (frozen) members.
/// For any other name, assigning to a fresh object *is* defining (nothing on the prototype
/// chain intercepts it) and takes a cheaper path, so `object_prototype_keys` (the own keys of the
/// frozen `Object.prototype`) decides which path a key takes.
///
/// No JavaScript runs here, so the interrupt handler is never polled; the builder checks the
/// deadline itself every [`DEADLINE_CHECK_INTERVAL`] values (interning many keys that collide
/// in the engine's atom table could otherwise take long).
pub(crate) fn to_js<'js>(
    ctx: &Ctx<'js>,
    value: &Value,
    limit: usize,
    watch: &Watch,
    object_prototype_keys: &[String],
) -> Result<JsValue<'js>, InputError> {
    InputBuilder {
        ctx,
        meter: Meter::new(limit, 0, true),
        until_deadline_check: DEADLINE_CHECK_INTERVAL,
        watch,
        object_prototype_keys,
    }
    .value(value, 0)
}

/// How many input values are built between two deadline checks.
const DEADLINE_CHECK_INTERVAL: usize = 64;

struct InputBuilder<'a, 'js> {
    ctx: &'a Ctx<'js>,
    meter: Meter,
    /// Values left to build before the next deadline check.
    until_deadline_check: usize,
    watch: &'a Watch,
    object_prototype_keys: &'a [String],
}

impl<'js> InputBuilder<'_, 'js> {
    /// Takes what the meter counted, and checks the deadline every so often.
    fn counted(&mut self, counted: Result<(), Over>) -> Result<(), InputError> {
        counted?;
        self.until_deadline_check -= 1;
        if self.until_deadline_check == 0 {
            self.until_deadline_check = DEADLINE_CHECK_INTERVAL;
            if self.watch.should_interrupt() {
                return Err(InputError::DeadlinePassed);
            }
        }
        Ok(())
    }

    fn value(&mut self, value: &Value, depth: usize) -> Result<JsValue<'js>, InputError> {
        let counted = self.meter.enter(value, depth);
        self.counted(counted)?;
        let ctx = self.ctx.clone();
        Ok(match value {
            Value::Null => JsValue::new_null(ctx),
            Value::Bool(flag) => JsValue::new_bool(ctx, *flag),
            Value::Number(number) => match number.as_i64().map(i32::try_from) {
                Some(Ok(small)) => JsValue::new_int(ctx, small),
                _ => JsValue::new_float(ctx, number.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(text) => rquickjs::String::from_str(ctx, text)?.into_value(),
            Value::Array(items) => {
                let array = Array::new(ctx)?;
                for (index, item) in items.iter().enumerate() {
                    array.set(index, self.value(item, depth + 1)?)?;
                }
                array.into_value()
            }
            Value::Object(map) => {
                let object = Object::new(ctx)?;
                for (key, item) in map {
                    let counted = self.meter.key(key);
                    self.counted(counted)?;
                    let item = self.value(item, depth + 1)?;
                    if self
                        .object_prototype_keys
                        .iter()
                        .any(|inherited| inherited == key)
                    {
                        let member = Property::from(item).writable().enumerable().configurable();
                        object.prop(key.as_str(), member)?;
                    } else {
                        object.set(key.as_str(), item)?;
                    }
                }
                object.into_value()
            }
        })
    }
}

/// Result of walking a handler's result.
#[derive(Debug)]
pub(crate) enum Walked {
    /// The JSON value, or `None` where `JSON.stringify` gives `undefined`.
    Value(Option<Value>),
    /// The JSON text would be larger than the limit.
    TooLarge,
    /// Not plain data: serialize with the engine's `JSON.stringify` instead.
    NeedsStringify,
}

/// Walks a handler's result into a `serde_json::Value` with `JSON.stringify` semantics.
pub(crate) struct OutputWalker {
    limit: usize,
    /// Bytes of JSON text known so far, counting every float as one byte.
    at_least: usize,
    /// Extra bytes floats may take beyond that (each at most 24 bytes of JSON).
    float_slack: usize,
}

/// Why a walk stopped early.
enum Stop {
    TooLarge,
    NeedsStringify,
    Engine(rquickjs::Error),
}

impl From<rquickjs::Error> for Stop {
    fn from(error: rquickjs::Error) -> Self {
        Stop::Engine(error)
    }
}

/// Longest compact JSON text of one number: a finite `f64` (`-1.2345678901234567e-308`);
/// integers take at most 20 characters (`-9223372036854775808`).
pub(crate) const MAX_NUMBER_LEN: usize = 24;

/// QuickJS's class id of ordinary objects (the first entry of its class table).
const JS_CLASS_OBJECT: qjs::JSClassID = 1;

/// Whether `value` is an ordinary object: not an array, function, wrapper (`Number`, `String`,
/// `Boolean`, `BigInt`), `Date`, `Map`, error or any other object with internal state.
fn is_ordinary_object(value: &JsValue<'_>) -> bool {
    // SAFETY: JS_GetClassID only reads the tag and object header of a live value.
    unsafe { qjs::JS_GetClassID(value.as_raw()) == JS_CLASS_OBJECT }
}

impl OutputWalker {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            at_least: 0,
            float_slack: 0,
        }
    }

    /// Walks `result`. Errors are engine exceptions (a getter threw, or a limit was hit while
    /// module code ran), pending on the context.
    pub(crate) fn walk(mut self, result: &JsValue<'_>) -> rquickjs::Result<Walked> {
        let value = match self.value(result, 0) {
            Ok(value) => value,
            Err(Stop::TooLarge) => return Ok(Walked::TooLarge),
            Err(Stop::NeedsStringify) => return Ok(Walked::NeedsStringify),
            Err(Stop::Engine(error)) => return Err(error),
        };
        if let Some(value) = &value {
            if self.at_least + self.float_slack > self.limit && exact_len(value) > self.limit {
                return Ok(Walked::TooLarge);
            }
        }
        Ok(Walked::Value(value))
    }

    fn count(&mut self, bytes: usize) -> Result<(), Stop> {
        self.at_least += bytes;
        if self.at_least > self.limit {
            return Err(Stop::TooLarge);
        }
        Ok(())
    }

    fn value(&mut self, value: &JsValue<'_>, depth: usize) -> Result<Option<Value>, Stop> {
        let json = match value.type_of() {
            Type::Uninitialized
            | Type::Undefined
            | Type::Symbol
            | Type::Function
            | Type::Constructor => return Ok(None),
            Type::Null => Value::Null,
            Type::Bool => Value::Bool(value.as_bool().unwrap_or_default()),
            Type::Int => Value::from(value.as_int().unwrap_or_default()),
            Type::Float => number_value(value.as_float().unwrap_or(f64::NAN)),
            Type::String => {
                let text = value
                    .as_string()
                    .map(|text| text.to_string())
                    .transpose()
                    // Not valid UTF-8: a lone surrogate; JSON.stringify escapes it.
                    .map_err(|_| Stop::NeedsStringify)?
                    .unwrap_or_default();
                self.count(string_len(&text))?;
                return Ok(Some(Value::String(text)));
            }
            Type::Array => return self.array(value, depth).map(Some),
            Type::Object => return self.object(value, depth),
            _ => return Err(Stop::NeedsStringify),
        };
        match &json {
            Value::Number(number) if number.is_f64() => {
                self.count(1)?;
                self.float_slack += MAX_NUMBER_LEN - 1;
            }
            Value::Number(number) => self.count(number_len(number))?,
            Value::Bool(false) => self.count(5)?,
            _ => self.count(4)?,
        }
        Ok(Some(json))
    }

    /// Arrays and ordinary objects only, each without a `toJSON` (own or inherited).
    fn check_container(&self, object: &Object<'_>, depth: usize) -> Result<(), Stop> {
        if depth == MAX_NESTING {
            return Err(Stop::NeedsStringify);
        }
        if !object
            .get::<_, JsValue>(PredefinedAtom::ToJSON)?
            .is_undefined()
        {
            return Err(Stop::NeedsStringify);
        }
        Ok(())
    }

    fn array(&mut self, value: &JsValue<'_>, depth: usize) -> Result<Value, Stop> {
        let Some(array) = value.as_array() else {
            return Err(Stop::NeedsStringify);
        };
        self.check_container(array.as_object(), depth)?;
        // Not `Array::len`, which panics on lengths beyond `i32::MAX` (up to 2^32 - 1 is legal).
        let length: f64 = array.as_object().get(PredefinedAtom::Length)?;
        let length = if length >= 0.0 { length as usize } else { 0 };
        self.count(2 + length.saturating_sub(1))?;
        let mut items = Vec::with_capacity(length.min(1024));
        for index in 0..length {
            let item: JsValue = array.get(index)?;
            match self.value(&item, depth + 1)? {
                Some(json) => items.push(json),
                None => {
                    self.count(4)?;
                    items.push(Value::Null);
                }
            }
        }
        Ok(Value::Array(items))
    }

    fn object(&mut self, value: &JsValue<'_>, depth: usize) -> Result<Option<Value>, Stop> {
        let Some(object) = value.as_object().filter(|_| is_ordinary_object(value)) else {
            return Err(Stop::NeedsStringify);
        };
        self.check_container(object, depth)?;
        self.count(2)?;
        let mut map = Map::new();
        for member in object.props::<String, JsValue>() {
            let (key, item) = member?;
            if let Some(json) = self.value(&item, depth + 1)? {
                self.count(string_len(&key) + 1 + usize::from(!map.is_empty()))?;
                map.insert(key, json);
            }
        }
        Ok(Some(Value::Object(map)))
    }
}

/// A JS number as `JSON.stringify` then `serde_json` would give it back: non-finite numbers
/// are `null`; integral values in integer range (including `-0`) are integers.
pub(crate) fn number_value(number: f64) -> Value {
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if !number.is_finite() {
        return Value::Null;
    }
    if number.fract() == 0.0 {
        if (0.0..TWO_POW_64).contains(&number) {
            return Value::from(number as u64);
        }
        if (-TWO_POW_63..0.0).contains(&number) {
            return Value::from(number as i64);
        }
    }
    Number::from_f64(number).map_or(Value::Null, Value::Number)
}

/// Length of a string's JSON text as `serde_json` writes it (quotes included).
pub(crate) fn string_len(text: &str) -> usize {
    let needs_escape = |byte: &u8| *byte < 0x20 || *byte == b'"' || *byte == b'\\';
    if !text.as_bytes().iter().any(needs_escape) {
        return text.len() + 2;
    }
    let escapes: usize = text
        .bytes()
        .filter(needs_escape)
        .map(|byte| match byte {
            b'"' | b'\\' | b'\x08' | b'\x0c' | b'\n' | b'\r' | b'\t' => 1,
            _ => 5,
        })
        .sum();
    text.len() + 2 + escapes
}

pub(crate) fn number_len(number: &Number) -> usize {
    fn digits(mut n: u64) -> usize {
        let mut count = 1;
        while n >= 10 {
            n /= 10;
            count += 1;
        }
        count
    }
    match (number.as_u64(), number.as_i64()) {
        (Some(unsigned), _) => digits(unsigned),
        (None, Some(signed)) => 1 + digits(signed.unsigned_abs()),
        (None, None) => exact_len(&Value::Number(number.clone())),
    }
}

/// Exact length of `value`'s compact JSON text.
fn exact_len(value: &Value) -> usize {
    struct Counter(usize);
    impl io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing to a counter cannot fail, and a Value always serializes.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalar_sizes_are_the_exact_compact_json_length() {
        let strings = [
            "",
            "plain",
            "quote \" backslash \\ newline \n bell \u{7} del \u{7f} é",
        ];
        for text in strings {
            assert_eq!(
                string_len(text),
                serde_json::to_string(text).unwrap().len(),
                "{text:?}"
            );
        }
        let numbers = [
            json!(0),
            json!(10),
            json!(-12345),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1.5e-300),
            json!(0.1),
        ];
        for number in numbers {
            let Value::Number(n) = &number else {
                unreachable!()
            };
            assert_eq!(number_len(n), number.to_string().len(), "{number}");
        }
    }

    #[test]
    fn numbers_come_back_as_json_text_would_give_them() {
        assert_eq!(number_value(3.0), json!(3));
        assert_eq!(number_value(-0.0), json!(0));
        assert_eq!(number_value(-7.0), json!(-7));
        assert_eq!(number_value(0.1), json!(0.1));
        assert_eq!(number_value(f64::INFINITY), Value::Null);
        assert_eq!(number_value(f64::NAN), Value::Null);
        assert_eq!(number_value(1e20), json!(1e20));
        assert_eq!(
            number_value(9_007_199_254_740_993.0),
            json!(9_007_199_254_740_992u64)
        );
        for number in [3.0, -0.0, -7.0, 0.1, 1e20, 1e21, 2.5e-8, 123456789.125] {
            let text = serde_json::to_string(&number_value(number)).unwrap();
            let reparsed: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(reparsed, number_value(number), "{number}");
        }
    }
}
