//! Dictionary keys as serde sees them: strings that may stand for integers or booleans.

use std::borrow::Cow;

use serde::de::{self, IntoDeserializer, Visitor};

use crate::error::{Error, Result};

/// Deserializes one dictionary key. Keys are always strings in AICL; like serde_json,
/// a map with integer or boolean keys (`HashMap<u32, _>`) reads them back from their text.
pub(crate) struct KeyDeserializer<'de> {
    key: Cow<'de, str>,
}

impl<'de> KeyDeserializer<'de> {
    pub(crate) fn new(key: Cow<'de, str>) -> Self {
        KeyDeserializer { key }
    }

    fn parse<T: std::str::FromStr>(&self, what: &str) -> Result<T> {
        self.key.parse().map_err(|_| {
            de::Error::custom(format_args!("dictionary key `{}` is not {what}", self.key))
        })
    }
}

macro_rules! parsed_key {
    ($($method:ident => $ty:ty, $visit:ident, $what:literal;)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            let value: $ty = self.parse($what)?;
            visitor.$visit(value)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for KeyDeserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.key {
            Cow::Borrowed(key) => visitor.visit_borrowed_str(key),
            Cow::Owned(key) => visitor.visit_string(key),
        }
    }

    parsed_key! {
        deserialize_bool => bool, visit_bool, "a boolean";
        deserialize_i8 => i8, visit_i8, "an i8";
        deserialize_i16 => i16, visit_i16, "an i16";
        deserialize_i32 => i32, visit_i32, "an i32";
        deserialize_i64 => i64, visit_i64, "an i64";
        deserialize_i128 => i128, visit_i128, "an i128";
        deserialize_u8 => u8, visit_u8, "a u8";
        deserialize_u16 => u16, visit_u16, "a u16";
        deserialize_u32 => u32, visit_u32, "a u32";
        deserialize_u64 => u64, visit_u64, "a u64";
        deserialize_u128 => u128, visit_u128, "a u128";
        deserialize_f32 => f32, visit_f32, "an f32";
        deserialize_f64 => f64, visit_f64, "an f64";
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_enum(self.key.into_deserializer())
    }

    serde::forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}
