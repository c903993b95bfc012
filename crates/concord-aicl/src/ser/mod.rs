//! Writing AICL text: a serde `Serializer`, compact or pretty.
//!
//! The data model, in serde terms: integers are `[i:]` (a `u64` above `i64::MAX` is an error),
//! floats `[f:]`, strings and chars `[s:]`, bytes a `uint8` tensor, sequences and tuples `[l:]`,
//! maps and structs `[d:]` (keys must be strings; integer and boolean keys are written as text),
//! `()` the empty list, unit variants their name, other variants a one-entry dictionary
//! `[d:[s:Variant]:…]`. AICL has no null: `None` as a struct field or map value leaves the entry
//! out, and `None` anywhere else is an error.

mod append;
pub(crate) mod forward;
pub(crate) mod key;
mod write;

use serde::ser::{self, Serialize};

use crate::error::{Error, Result};
use crate::tensor::serde_impl::{capture, TENSOR_TOKEN};
use crate::value::{f32_as_f64, Value};

/// Writes `value` as compact AICL text.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Product { name: String, price: f64, in_stock: bool }
///
/// let product = Product { name: "iPhone".into(), price: 899.99, in_stock: true };
/// assert_eq!(
///     concord_aicl::to_string(&product)?,
///     "[d:[s:name]:[s:iPhone],[s:price]:[f:899.99],[s:in_stock]:[b:true]]"
/// );
/// # Ok::<(), concord_aicl::Error>(())
/// ```
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    let mut out = String::with_capacity(128);
    value.serialize(&mut Serializer::new(&mut out))?;
    Ok(out)
}

/// Writes `value` as pretty AICL text: one entry per line, two-space indent, as in the whitepaper.
///
/// ```
/// use concord_aicl::Value;
///
/// let value: Value = concord_aicl::from_str("[l:[s:Apple],[i:3],[f:1.99]]")?;
/// assert_eq!(concord_aicl::to_string_pretty(&value)?, "[l:\n  [s:Apple],\n  [i:3],\n  [f:1.99]\n]");
/// # Ok::<(), concord_aicl::Error>(())
/// ```
pub fn to_string_pretty<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    let mut out = String::with_capacity(128);
    value.serialize(&mut Serializer::pretty(&mut out))?;
    Ok(out)
}

/// [`to_string`] as bytes.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    to_string(value).map(String::into_bytes)
}

/// [`to_string_pretty`] as bytes.
pub fn to_vec_pretty<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    to_string_pretty(value).map(String::into_bytes)
}

/// The AICL serializer: appends text to a `String`. Most code wants [`to_string`] instead.
pub struct Serializer<'o> {
    out: &'o mut String,
    pretty: bool,
    level: usize,
    /// The value being written is a struct field or map value, where `None` means "leave out".
    omit_none: bool,
    /// Set when such a value was `None`; the entry is then removed.
    omitted: bool,
}

impl<'o> Serializer<'o> {
    /// A compact serializer appending to `out`.
    pub fn new(out: &'o mut String) -> Self {
        Serializer {
            out,
            pretty: false,
            level: 0,
            omit_none: false,
            omitted: false,
        }
    }

    /// A pretty serializer appending to `out`.
    pub fn pretty(out: &'o mut String) -> Self {
        Serializer {
            pretty: true,
            ..Serializer::new(out)
        }
    }

    fn begin(&mut self, open: &str) {
        self.out.push_str(open);
        self.level += 1;
    }

    /// Starts an entry of the innermost container.
    #[inline(always)]
    fn entry(&mut self, first: bool) {
        if !first {
            self.out.push(',');
        }
        if self.pretty {
            self.newline();
        }
    }

    fn end(&mut self, had_entries: bool) {
        self.level -= 1;
        if self.pretty && had_entries {
            self.newline();
        }
        self.out.push(']');
    }

    fn newline(&mut self) {
        self.out.push('\n');
        for _ in 0..self.level {
            self.out.push_str("  ");
        }
    }

    /// `[d:` and the key of a one-entry dictionary holding an enum variant.
    fn begin_variant(&mut self, variant: &str) {
        self.begin("[d:");
        self.entry(true);
        write::key(self.out, variant);
    }
}

/// `[f:x]` exactly as the serializer writes it (for the parser's tests).
#[cfg(test)]
pub(crate) fn write_float_for_tests(out: &mut String, value: f64) {
    write::float(out, value);
}

/// Writes a [`Value`] directly, without serde (it cannot fail).
pub(crate) fn write_value(out: &mut String, value: &Value, pretty: bool) {
    let mut serializer = Serializer::new(out);
    serializer.pretty = pretty;
    serializer.value(value);
}

/// Writes `entries` as a dictionary directly, without serde.
pub(crate) fn write_dict<'v>(
    out: &mut String,
    entries: impl Iterator<Item = (&'v str, &'v Value)>,
    pretty: bool,
) {
    let mut serializer = Serializer::new(out);
    serializer.pretty = pretty;
    serializer.dict(entries);
}

impl Serializer<'_> {
    fn value(&mut self, value: &Value) {
        match value {
            Value::String(text) => write::string(self.out, text),
            Value::Int(number) => write::int(self.out, *number),
            Value::Float(number) => write::float(self.out, *number),
            Value::Bool(flag) => write::bool(self.out, *flag),
            Value::List(items) => {
                self.begin("[l:");
                for (index, item) in items.iter().enumerate() {
                    self.entry(index == 0);
                    self.value(item);
                }
                self.end(!items.is_empty());
            }
            Value::Dict(map) => self.dict(map.iter()),
            Value::Tensor(tensor) => write::tensor(self.out, tensor),
        }
    }

    fn dict<'v>(&mut self, entries: impl Iterator<Item = (&'v str, &'v Value)>) {
        self.begin("[d:");
        let mut first = true;
        for (key, item) in entries {
            self.entry(first);
            first = false;
            write::key(self.out, key);
            self.value(item);
        }
        self.end(!first);
    }
}

impl<'a, 'o> ser::Serializer for &'a mut Serializer<'o> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'o>;
    type SerializeTuple = Compound<'a, 'o>;
    type SerializeTupleStruct = Compound<'a, 'o>;
    type SerializeTupleVariant = Compound<'a, 'o>;
    type SerializeMap = Compound<'a, 'o>;
    type SerializeStruct = Compound<'a, 'o>;
    type SerializeStructVariant = Compound<'a, 'o>;

    forward::serializer_aliases!();

    fn serialize_bool(self, value: bool) -> Result<()> {
        write::bool(self.out, value);
        Ok(())
    }

    fn serialize_i64(self, value: i64) -> Result<()> {
        write::int(self.out, value);
        Ok(())
    }

    fn serialize_f32(self, value: f32) -> Result<()> {
        // Written as the f64 with the f32's shortest digits, so that `to_value` agrees.
        write::float(self.out, f32_as_f64(value));
        Ok(())
    }

    fn serialize_f64(self, value: f64) -> Result<()> {
        write::float(self.out, value);
        Ok(())
    }

    fn serialize_str(self, value: &str) -> Result<()> {
        write::string(self.out, value);
        Ok(())
    }

    fn serialize_bytes(self, value: &[u8]) -> Result<()> {
        write::bytes(self.out, value);
        Ok(())
    }

    fn serialize_none(self) -> Result<()> {
        if self.omit_none {
            self.omitted = true;
            Ok(())
        } else {
            Err(Error::no_null())
        }
    }

    fn serialize_unit(self) -> Result<()> {
        self.out.push_str("[l:]");
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<()> {
        if name == TENSOR_TOKEN {
            write::tensor(self.out, &capture(value)?);
            Ok(())
        } else {
            value.serialize(self)
        }
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<()> {
        self.begin_variant(variant);
        self.omit_none = false;
        value.serialize(&mut *self)?;
        self.end(true);
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a, 'o>> {
        self.begin("[l:");
        Ok(Compound::new(self, false))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, 'o>> {
        self.begin_variant(variant);
        self.begin("[l:");
        Ok(Compound::new(self, true))
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a, 'o>> {
        self.begin("[d:");
        Ok(Compound::new(self, false))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, 'o>> {
        self.begin_variant(variant);
        self.begin("[d:");
        Ok(Compound::new(self, true))
    }
}

/// An open list or dictionary.
pub struct Compound<'a, 'o> {
    ser: &'a mut Serializer<'o>,
    first: bool,
    /// Inside a one-entry variant dictionary that must be closed too.
    in_variant: bool,
    /// Where the current map entry started, to remove it if its value is `None`.
    entry_start: usize,
    entry_was_first: bool,
}

impl<'a, 'o> Compound<'a, 'o> {
    fn new(ser: &'a mut Serializer<'o>, in_variant: bool) -> Self {
        Compound {
            ser,
            first: true,
            in_variant,
            entry_start: 0,
            entry_was_first: true,
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.ser.entry(self.first);
        self.first = false;
        self.ser.omit_none = false;
        value.serialize(&mut *self.ser)
    }

    /// Starts an entry (separator and key written by `key`), remembering where it began.
    #[inline(always)]
    fn begin_entry(&mut self) {
        self.entry_start = self.ser.out.len();
        self.entry_was_first = self.first;
        self.ser.entry(self.first);
        self.first = false;
    }

    /// Writes an entry's value; a `None` removes the whole entry.
    #[inline(always)]
    fn entry_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.ser.omit_none = true;
        self.ser.omitted = false;
        let result = value.serialize(&mut *self.ser);
        self.ser.omit_none = false;
        if std::mem::take(&mut self.ser.omitted) {
            self.ser.out.truncate(self.entry_start);
            self.first = self.entry_was_first;
        }
        result
    }

    /// A struct field: its key, then its value (a `None` removes the entry).
    #[inline(always)]
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        self.begin_entry();
        write::key(self.ser.out, key);
        self.entry_value(value)
    }

    fn finish(self) -> Result<()> {
        self.ser.end(!self.first);
        if self.in_variant {
            self.ser.end(true);
        }
        Ok(())
    }
}

forward::list_impls!(Compound<'_, '_> => ());
forward::struct_impls!(Compound<'_, '_> => ());

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    #[inline]
    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<()> {
        self.begin_entry();
        key.serialize(key::KeySerializer::tagged(self.ser.out))?;
        self.entry_value(value)
    }

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.begin_entry();
        key.serialize(key::KeySerializer::tagged(self.ser.out))
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.entry_value(value)
    }

    fn end(self) -> Result<()> {
        self.finish()
    }
}
