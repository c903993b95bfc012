//! [`Value`] as a serde `Serialize`, and [`to_value`]: any `Serialize` type into a [`Value`].

use serde::ser::{self, Serialize, SerializeMap, Serializer};

use super::{Map, Value};
use crate::error::{Error, ErrorKind, Result};
use crate::ser::forward;
use crate::ser::key::KeySerializer;
use crate::tensor::serde_impl::{capture, TENSOR_TOKEN};

impl Serialize for Value {
    #[inline]
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::String(text) => serializer.serialize_str(text),
            Value::Int(value) => serializer.serialize_i64(*value),
            Value::Float(value) => serializer.serialize_f64(*value),
            Value::Bool(value) => serializer.serialize_bool(*value),
            Value::List(items) => items.serialize(serializer),
            Value::Dict(map) => map.serialize(serializer),
            Value::Tensor(tensor) => tensor.serialize(serializer),
        }
    }
}

impl Serialize for Map {
    #[inline]
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut entries = serializer.serialize_map(Some(self.len()))?;
        for (key, value) in self {
            entries.serialize_entry(key, value)?;
        }
        entries.end()
    }
}

/// Converts any `Serialize` value into a [`Value`], by the data model of [`crate::to_string`].
///
/// ```
/// use concord_aicl::{to_value, Value};
///
/// #[derive(serde::Serialize)]
/// struct Query { query: String, limit: Option<u32>, page: Option<u32> }
///
/// let value = to_value(&Query { query: "price".into(), limit: Some(10), page: None })?;
/// assert_eq!(value.to_string(), "[d:[s:query]:[s:price],[s:limit]:[i:10]]");
/// # Ok::<(), concord_aicl::Error>(())
/// ```
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Result<Value> {
    value
        .serialize(ValueSerializer { in_entry: false })?
        .ok_or_else(Error::no_null)
}

/// Builds a [`Value`]; yields `None` only for a `None` in an entry, which is then left out.
struct ValueSerializer {
    in_entry: bool,
}

type Built = Option<Value>;

impl Serializer for ValueSerializer {
    type Ok = Built;
    type Error = Error;
    type SerializeSeq = ListBuilder;
    type SerializeTuple = ListBuilder;
    type SerializeTupleStruct = ListBuilder;
    type SerializeTupleVariant = ListBuilder;
    type SerializeMap = DictBuilder;
    type SerializeStruct = DictBuilder;
    type SerializeStructVariant = DictBuilder;

    forward::serializer_aliases!();

    fn serialize_bool(self, value: bool) -> Result<Built> {
        Ok(Some(Value::Bool(value)))
    }

    fn serialize_i64(self, value: i64) -> Result<Built> {
        Ok(Some(Value::Int(value)))
    }

    fn serialize_f32(self, value: f32) -> Result<Built> {
        Ok(Some(Value::from(value)))
    }

    fn serialize_f64(self, value: f64) -> Result<Built> {
        Ok(Some(Value::Float(value)))
    }

    fn serialize_str(self, value: &str) -> Result<Built> {
        Ok(Some(Value::String(value.to_owned())))
    }

    fn serialize_bytes(self, value: &[u8]) -> Result<Built> {
        let tensor = crate::Tensor::from_vec(vec![value.len()], value.to_vec())?;
        Ok(Some(Value::Tensor(tensor)))
    }

    fn serialize_none(self) -> Result<Built> {
        if self.in_entry {
            Ok(None)
        } else {
            Err(Error::no_null())
        }
    }

    fn serialize_unit(self) -> Result<Built> {
        Ok(Some(Value::List(Vec::new())))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<Built> {
        if name == TENSOR_TOKEN {
            Ok(Some(Value::Tensor(capture(value)?)))
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
    ) -> Result<Built> {
        Ok(Some(variant_dict(variant, to_value(value)?)))
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<ListBuilder> {
        Ok(ListBuilder {
            items: Vec::with_capacity(len.unwrap_or(0).min(4096)),
            variant: None,
        })
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<ListBuilder> {
        Ok(ListBuilder {
            items: Vec::with_capacity(len),
            variant: Some(variant),
        })
    }

    fn serialize_map(self, len: Option<usize>) -> Result<DictBuilder> {
        Ok(DictBuilder {
            map: Map::with_capacity(len.unwrap_or(0).min(4096)),
            key: None,
            variant: None,
        })
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<DictBuilder> {
        Ok(DictBuilder {
            map: Map::with_capacity(len),
            key: None,
            variant: Some(variant),
        })
    }
}

fn variant_dict(variant: &str, inner: Value) -> Value {
    let mut map = Map::with_capacity(1);
    map.insert(variant.to_owned(), inner);
    Value::Dict(map)
}

fn wrap(value: Value, variant: Option<&'static str>) -> Built {
    Some(match variant {
        Some(variant) => variant_dict(variant, value),
        None => value,
    })
}

/// Collects list items.
struct ListBuilder {
    items: Vec<Value>,
    variant: Option<&'static str>,
}

impl ListBuilder {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.items.push(to_value(value)?);
        Ok(())
    }

    fn finish(self) -> Result<Built> {
        Ok(wrap(Value::List(self.items), self.variant))
    }
}

forward::list_impls!(ListBuilder => Built);

/// Collects dictionary entries, leaving out `None` values.
struct DictBuilder {
    map: Map,
    key: Option<String>,
    variant: Option<&'static str>,
}

impl DictBuilder {
    fn insert<T: Serialize + ?Sized>(&mut self, key: String, value: &T) -> Result<()> {
        if let Some(value) = value.serialize(ValueSerializer { in_entry: true })? {
            self.map.insert(key, value);
        }
        Ok(())
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        self.insert(key.to_owned(), value)
    }

    fn finish(self) -> Result<Built> {
        Ok(wrap(Value::Dict(self.map), self.variant))
    }
}

impl ser::SerializeMap for DictBuilder {
    type Ok = Built;
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        let mut text = String::new();
        key.serialize(KeySerializer::plain(&mut text))?;
        self.key = Some(text);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let key = self.key.take().ok_or_else(|| {
            Error::new(ErrorKind::Custom(
                "serialize_value called before serialize_key".to_owned(),
            ))
        })?;
        self.insert(key, value)
    }

    fn end(self) -> Result<Built> {
        self.finish()
    }
}

forward::struct_impls!(DictBuilder => Built);
