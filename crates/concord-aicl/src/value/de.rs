//! [`Value`] as a serde `Deserialize` and as a `Deserializer`, and [`from_value`].

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess,
    SeqAccess, Unexpected, VariantAccess, Visitor,
};

use super::{Map, Value};
use crate::de::KeyDeserializer;
use crate::error::{int_out_of_range_reason, Error, Result};
use crate::tensor::serde_impl::{FirstKey, FirstKeySeed, TensorDeserializer, TENSOR_TOKEN};
use crate::tensor::Tensor;

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for Map {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Map, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Dict(map) => Ok(map),
            other => Err(de::Error::invalid_type(unexpected(&other), &"a dictionary")),
        }
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an AICL value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Int(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        i64::try_from(value)
            .map(Value::Int)
            .map_err(|_| E::custom(int_out_of_range_reason(value)))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(Value::Float(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_bytes<E: de::Error>(self, value: &[u8]) -> Result<Value, E> {
        self.visit_byte_buf(value.to_vec())
    }

    fn visit_byte_buf<E: de::Error>(self, value: Vec<u8>) -> Result<Value, E> {
        Tensor::from_vec(vec![value.len()], value)
            .map(Value::Tensor)
            .map_err(E::custom)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Err(E::custom("AICL has no null value"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Err(E::custom("AICL has no null value"))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let first = match map.next_key_seed(FirstKeySeed)? {
            None => return Ok(Value::Dict(Map::new())),
            Some(FirstKey::Tensor) => return map.next_value::<Tensor>().map(Value::Tensor),
            Some(FirstKey::Key(key)) => key,
        };
        // The entries are collected in a list that becomes the map (a small one is that list;
        // a large one is built at its final size, without growing and rehashing).
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
        entries.push((first, map.next_value()?));
        while let Some(entry) = map.next_entry::<String, Value>()? {
            entries.push(entry);
        }
        // Strict AICL text has no duplicate keys; elsewhere the last one wins (in the first
        // one's place).
        Ok(Value::Dict(Map::from_entries(entries)))
    }
}

/// Describes a value for serde's type errors.
fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::String(text) => Unexpected::Str(text),
        Value::Int(value) => Unexpected::Signed(*value),
        Value::Float(value) => Unexpected::Float(*value),
        Value::Bool(value) => Unexpected::Bool(*value),
        Value::List(_) => Unexpected::Seq,
        Value::Dict(_) => Unexpected::Map,
        Value::Tensor(_) => Unexpected::Other("tensor"),
    }
}

/// Converts a [`Value`] into any `Deserialize` type.
///
/// ```
/// use concord_aicl::{from_value, Value};
///
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct Params { target_url: String, extract: Vec<String> }
///
/// let value: Value = "[d:[s:target_url]:[s:https://example.com],[s:extract]:[l:[s:title],[s:price]]]".parse()?;
/// let params: Params = from_value(value)?;
/// assert_eq!(params.extract, ["title", "price"]);
/// # Ok::<(), concord_aicl::Error>(())
/// ```
pub fn from_value<T: de::DeserializeOwned>(value: Value) -> Result<T> {
    T::deserialize(value)
}

impl IntoDeserializer<'_, Error> for Value {
    type Deserializer = Value;

    fn into_deserializer(self) -> Value {
        self
    }
}

impl<'de> Deserializer<'de> for Value {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Value::String(text) => visitor.visit_string(text),
            Value::Int(value) => visitor.visit_i64(value),
            Value::Float(value) => visitor.visit_f64(value),
            Value::Bool(value) => visitor.visit_bool(value),
            Value::List(items) => {
                let mut seq = SeqDeserializer::new(items.into_iter());
                let value = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(value)
            }
            Value::Dict(map) => {
                let entries = map.into_iter().map(|(key, value)| (DictKey(key), value));
                let mut access = MapDeserializer::new(entries);
                let value = visitor.visit_map(&mut access)?;
                access.end()?;
                Ok(value)
            }
            Value::Tensor(tensor) => TensorDeserializer::new(tensor).deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_some(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Value::List(items) if items.is_empty() => visitor.visit_unit(),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        match self {
            Value::Tensor(tensor) => {
                TensorDeserializer::new(tensor).deserialize_newtype_struct(name, visitor)
            }
            other if name == TENSOR_TOKEN => other.deserialize_any(visitor),
            other => visitor.visit_newtype_struct(other),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Value::Tensor(tensor) => TensorDeserializer::new(tensor).deserialize_seq(visitor),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Value::Tensor(tensor) => TensorDeserializer::new(tensor).deserialize_byte_buf(visitor),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self {
            Value::String(variant) => visitor.visit_enum(variant.into_deserializer()),
            Value::Dict(map) if map.len() == 1 => {
                let mut entries = map.into_iter();
                match entries.next() {
                    Some((variant, value)) => visitor.visit_enum(Variant { variant, value }),
                    None => Err(de::Error::custom("empty enum dictionary")),
                }
            }
            other => Err(de::Error::invalid_type(
                unexpected(&other),
                &"an enum variant: a string, or a dictionary of one entry",
            )),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        tuple tuple_struct map struct identifier ignored_any
    }
}

/// A dictionary key: a string that may stand for an integer or boolean key.
struct DictKey(String);

impl<'de> IntoDeserializer<'de, Error> for DictKey {
    type Deserializer = KeyDeserializer<'de>;

    fn into_deserializer(self) -> KeyDeserializer<'de> {
        KeyDeserializer::new(Cow::Owned(self.0))
    }
}

/// An enum variant held in a one-entry dictionary.
struct Variant {
    variant: String,
    value: Value,
}

impl<'de> EnumAccess<'de> for Variant {
    type Error = Error;
    type Variant = Value;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Value)> {
        let variant = seed.deserialize(KeyDeserializer::new(Cow::Owned(self.variant)))?;
        Ok((variant, self.value))
    }
}

impl<'de> VariantAccess<'de> for Value {
    type Error = Error;

    fn unit_variant(self) -> Result<()> {
        Deserialize::deserialize(self)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_map(visitor)
    }
}
