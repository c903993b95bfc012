//! Map keys: AICL keys are strings; integers, booleans and chars are written as their text.

use serde::ser::{Impossible, Serialize, Serializer};

use super::{forward, write};
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

/// Integers and booleans are written as their text.
macro_rules! text_key {
    ($($method:ident($ty:ty);)*) => {$(
        fn $method(self, value: $ty) -> Result<()> {
            self.write(itoa::Buffer::new().format(value))
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

    fn serialize_bool(self, value: bool) -> Result<()> {
        self.write(if value { "true" } else { "false" })
    }

    text_key! {
        serialize_i8(i8); serialize_i16(i16); serialize_i32(i32); serialize_i64(i64);
        serialize_i128(i128); serialize_u8(u8); serialize_u16(u16); serialize_u32(u32);
        serialize_u64(u64); serialize_u128(u128);
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<()> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }

    forward::refuse! { key_must_be_string;
        serialize_f32(f32) -> () => "a float";
        serialize_f64(f64) -> () => "a float";
        serialize_bytes(&[u8]) -> () => "bytes";
        serialize_none() -> () => "None";
        serialize_some<T>(&T) -> () => "an option";
        serialize_unit() -> () => "()";
        serialize_unit_struct(&'static str) -> () => "a unit struct";
        serialize_newtype_variant<T>(&'static str, u32, &'static str, &T) -> ()
            => "an enum variant with data";
        serialize_seq(Option<usize>) -> Self::SerializeSeq => "a list";
        serialize_tuple(usize) -> Self::SerializeTuple => "a tuple";
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct
            => "a tuple struct";
        serialize_tuple_variant(&'static str, u32, &'static str, usize)
            -> Self::SerializeTupleVariant => "an enum variant with data";
        serialize_map(Option<usize>) -> Self::SerializeMap => "a map";
        serialize_struct(&'static str, usize) -> Self::SerializeStruct => "a struct";
        serialize_struct_variant(&'static str, u32, &'static str, usize)
            -> Self::SerializeStructVariant => "an enum variant with data";
    }
}
