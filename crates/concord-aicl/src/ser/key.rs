//! Map keys: AICL keys are strings; integers, booleans and chars are written as their text.

use serde::ser::{Impossible, Serialize, Serializer};

use super::write;
use crate::error::{Error, ErrorKind, Result};

/// Writes one map key: as `[s:…]:` for text, or as plain text for a [`crate::Value`] dictionary.
pub(crate) struct KeySerializer<'o> {
    out: &'o mut String,
    tagged: bool,
}

impl<'o> KeySerializer<'o> {
    /// Appends the key as `[s:…]:`, colon included.
    pub(crate) fn tagged(out: &'o mut String) -> Self {
        KeySerializer { out, tagged: true }
    }

    /// Appends the key's text as it is.
    pub(crate) fn plain(out: &'o mut String) -> Self {
        KeySerializer { out, tagged: false }
    }

    #[inline]
    fn write(self, text: &str) -> Result<()> {
        if self.tagged {
            write::key(self.out, text);
        } else {
            self.out.push_str(text);
        }
        Ok(())
    }
}

fn key_must_be_string(found: &str) -> Error {
    Error::new(ErrorKind::NotRepresentable {
        path: String::new(),
        reason: format!(
            "dictionary keys must be strings (or integers, booleans, chars written as text), found {found}"
        ),
    })
}

macro_rules! text_key {
    ($($method:ident($ty:ty);)*) => {$(
        fn $method(self, value: $ty) -> Result<()> {
            self.write(&value.to_string())
        }
    )*};
}

macro_rules! refused_key {
    ($($method:ident($($arg:ty),*) => $found:literal;)*) => {$(
        fn $method(self, $(_: $arg),*) -> Result<()> {
            Err(key_must_be_string($found))
        }
    )*};
}

impl Serializer for KeySerializer<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    #[inline]
    fn serialize_str(self, value: &str) -> Result<()> {
        self.write(value)
    }

    fn serialize_char(self, value: char) -> Result<()> {
        self.write(value.encode_utf8(&mut [0; 4]))
    }

    text_key! {
        serialize_bool(bool); serialize_i8(i8); serialize_i16(i16); serialize_i32(i32);
        serialize_i64(i64); serialize_i128(i128); serialize_u8(u8); serialize_u16(u16);
        serialize_u32(u32); serialize_u64(u64); serialize_u128(u128);
    }

    refused_key! {
        serialize_f32(f32) => "a float";
        serialize_f64(f64) => "a float";
        serialize_bytes(&[u8]) => "bytes";
        serialize_none() => "None";
        serialize_unit() => "()";
        serialize_unit_struct(&'static str) => "a unit struct";
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<()> {
        self.serialize_str(variant)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<()> {
        Err(key_must_be_string("an option"))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<()> {
        Err(key_must_be_string("an enum variant with data"))
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(key_must_be_string("a list"))
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        Err(key_must_be_string("a tuple"))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        Err(key_must_be_string("a tuple struct"))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(key_must_be_string("an enum variant with data"))
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Err(key_must_be_string("a map"))
    }

    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Err(key_must_be_string("a struct"))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(key_must_be_string("an enum variant with data"))
    }
}
