//! How tensors travel through serde.
//!
//! A tensor serializes as a newtype struct named [`TENSOR_TOKEN`] around a struct
//! `{dtype, shape, data}`. Formats that ignore newtype names see that struct: human-readable
//! ones (JSON, YAML) get `data` as an array of numbers, which is the JSON bridge form; compact
//! ones (bincode, CBOR) get the raw little-endian bytes. AICL's own serializers recognise the
//! token and write `[t:…]` from the raw bytes.
//!
//! Reading goes the other way: [`TensorDeserializer`] presents a parsed tensor as a map with
//! the same three fields (data as numbers to generic visitors, as bytes when asked for bytes),
//! and answers the probe [`TENSOR_KEY_PROBE`] so that [`crate::Value`] can take the tensor whole.

use std::fmt;

use half::{bf16, f16};
use serde::de::value::{
    BoolDeserializer, BorrowedStrDeserializer, F32Deserializer, F64Deserializer, I16Deserializer,
    I32Deserializer, I64Deserializer, I8Deserializer, SeqDeserializer, U16Deserializer,
    U32Deserializer, U64Deserializer, U8Deserializer,
};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::ser::{Impossible, SerializeSeq, SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

use super::element::sealed::Sealed;
use super::{DType, Scalar, Tensor};
use crate::error::{Error, ErrorKind, Result};
use crate::ser::forward;

/// Newtype-struct name that marks a tensor.
pub(crate) const TENSOR_TOKEN: &str = "$concord_aicl::private::Tensor";

/// Newtype-struct name a [`crate::Value`] uses to ask a map key "are you a tensor's first field?".
pub(crate) const TENSOR_KEY_PROBE: &str = "$concord_aicl::private::TensorKey";

const FIELDS: &[&str] = &["dtype", "shape", "data"];

impl Serialize for DType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for DType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DTypeVisitor;

        impl Visitor<'_> for DTypeVisitor {
            type Value = DType;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tensor dtype name such as `float32`")
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<DType, E> {
                DType::from_name(name).ok_or_else(|| {
                    E::custom(ErrorKind::UnknownDType {
                        name: name.to_owned(),
                    })
                })
            }
        }

        deserializer.deserialize_str(DTypeVisitor)
    }
}

impl Serialize for Tensor {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_newtype_struct(TENSOR_TOKEN, &Repr(self))
    }
}

/// The `{dtype, shape, data}` struct inside the token.
struct Repr<'a>(&'a Tensor);

impl Serialize for Repr<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let readable = serializer.is_human_readable();
        let mut fields = serializer.serialize_struct("Tensor", 3)?;
        fields.serialize_field("dtype", &self.0.dtype)?;
        fields.serialize_field("shape", &self.0.shape)?;
        if readable {
            fields.serialize_field("data", &Elements(self.0))?;
        } else {
            fields.serialize_field("data", &Bytes(&self.0.data))?;
        }
        fields.end()
    }
}

/// Raw bytes, serialized with `serialize_bytes`.
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// The elements as a flat sequence of numbers (floats as `f32` up to float32, else `f64`).
struct Elements<'a>(&'a Tensor);

impl Serialize for Elements<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let tensor = self.0;
        let mut seq = serializer.serialize_seq(Some(tensor.len()))?;
        let chunks = tensor.data.chunks_exact(tensor.dtype.itemsize());
        macro_rules! each {
            ($ty:ty, $convert:expr) => {
                for chunk in chunks {
                    seq.serialize_element(&$convert(<$ty>::get_le(chunk)))?;
                }
            };
        }
        match tensor.dtype {
            DType::Bool => each!(bool, std::convert::identity),
            DType::Int8 => each!(i8, std::convert::identity),
            DType::UInt8 => each!(u8, std::convert::identity),
            DType::Int16 => each!(i16, std::convert::identity),
            DType::UInt16 => each!(u16, std::convert::identity),
            DType::Int32 => each!(i32, std::convert::identity),
            DType::UInt32 => each!(u32, std::convert::identity),
            DType::Int64 => each!(i64, std::convert::identity),
            DType::UInt64 => each!(u64, std::convert::identity),
            DType::Float16 => each!(f16, f16::to_f32),
            DType::BFloat16 => each!(bf16, bf16::to_f32),
            DType::Float32 => each!(f32, std::convert::identity),
            DType::Float64 => each!(f64, std::convert::identity),
        }
        seq.end()
    }
}

/// Takes the tensor out of a value serialized under [`TENSOR_TOKEN`] (AICL's serializers use this).
pub(crate) fn capture<T: Serialize + ?Sized>(value: &T) -> Result<Tensor> {
    let Captured::Struct(fields) = value.serialize(Capture)? else {
        return Err(not_a_tensor("a value that is not a struct"));
    };
    let (mut dtype, mut shape, mut data) = (None, None, None);
    for (name, field) in fields {
        match (name, field) {
            ("dtype", Captured::Str(name)) => dtype = Some(name.parse::<DType>()?),
            ("shape", Captured::Seq(dims)) => {
                shape = Some(
                    dims.into_iter()
                        .map(|dim| match dim {
                            Captured::UInt(dim) => usize::try_from(dim)
                                .map_err(|_| not_a_tensor("a dimension beyond usize")),
                            _ => Err(not_a_tensor("a shape that is not a list of integers")),
                        })
                        .collect::<Result<Vec<usize>>>()?,
                )
            }
            ("data", Captured::Bytes(bytes)) => data = Some(bytes),
            (name, _) => return Err(not_a_tensor(&format!("an unexpected field `{name}`"))),
        }
    }
    match (dtype, shape, data) {
        (Some(dtype), Some(shape), Some(data)) => Tensor::new(dtype, shape, data),
        _ => Err(not_a_tensor("a struct without dtype, shape and data")),
    }
}

fn not_a_tensor(what: &str) -> Error {
    Error::new(ErrorKind::BadTensor {
        reason: format!("serialized under the tensor token, found {what}"),
    })
}

/// What [`Capture`] recorded.
enum Captured {
    Str(String),
    UInt(u64),
    Bytes(Vec<u8>),
    Seq(Vec<Captured>),
    Struct(Vec<(&'static str, Captured)>),
}

/// A compact (not human-readable) serializer that records the few shapes a tensor's `Repr` uses.
struct Capture;

impl Serializer for Capture {
    type Ok = Captured;
    type Error = Error;
    type SerializeSeq = CaptureSeq;
    type SerializeTuple = Impossible<Captured, Error>;
    type SerializeTupleStruct = Impossible<Captured, Error>;
    type SerializeTupleVariant = Impossible<Captured, Error>;
    type SerializeMap = Impossible<Captured, Error>;
    type SerializeStruct = CaptureStruct;
    type SerializeStructVariant = Impossible<Captured, Error>;

    fn is_human_readable(&self) -> bool {
        false
    }

    fn serialize_u64(self, value: u64) -> Result<Captured> {
        Ok(Captured::UInt(value))
    }

    fn serialize_str(self, value: &str) -> Result<Captured> {
        Ok(Captured::Str(value.to_owned()))
    }

    fn serialize_bytes(self, value: &[u8]) -> Result<Captured> {
        Ok(Captured::Bytes(value.to_vec()))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Captured> {
        value.serialize(self)
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<CaptureSeq> {
        Ok(CaptureSeq(Vec::with_capacity(len.unwrap_or(0).min(64))))
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<CaptureStruct> {
        Ok(CaptureStruct(Vec::with_capacity(len)))
    }

    forward::refuse! { not_a_tensor;
        serialize_bool(bool) -> Captured => "serialize_bool";
        serialize_i8(i8) -> Captured => "serialize_i8";
        serialize_i16(i16) -> Captured => "serialize_i16";
        serialize_i32(i32) -> Captured => "serialize_i32";
        serialize_i64(i64) -> Captured => "serialize_i64";
        serialize_u8(u8) -> Captured => "serialize_u8";
        serialize_u16(u16) -> Captured => "serialize_u16";
        serialize_u32(u32) -> Captured => "serialize_u32";
        serialize_f32(f32) -> Captured => "serialize_f32";
        serialize_f64(f64) -> Captured => "serialize_f64";
        serialize_char(char) -> Captured => "serialize_char";
        serialize_none() -> Captured => "serialize_none";
        serialize_unit() -> Captured => "serialize_unit";
        serialize_unit_struct(&'static str) -> Captured => "serialize_unit_struct";
        serialize_unit_variant(&'static str, u32, &'static str) -> Captured
            => "serialize_unit_variant";
        serialize_some<T>(&T) -> Captured => "an option";
        serialize_newtype_variant<T>(&'static str, u32, &'static str, &T) -> Captured
            => "an enum variant";
        serialize_tuple(usize) -> Self::SerializeTuple => "a tuple";
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct
            => "a tuple struct";
        serialize_tuple_variant(&'static str, u32, &'static str, usize)
            -> Self::SerializeTupleVariant => "an enum variant";
        serialize_map(Option<usize>) -> Self::SerializeMap => "a map";
        serialize_struct_variant(&'static str, u32, &'static str, usize)
            -> Self::SerializeStructVariant => "an enum variant";
    }
}

struct CaptureSeq(Vec<Captured>);

impl SerializeSeq for CaptureSeq {
    type Ok = Captured;
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.0.push(value.serialize(Capture)?);
        Ok(())
    }

    fn end(self) -> Result<Captured> {
        Ok(Captured::Seq(self.0))
    }
}

struct CaptureStruct(Vec<(&'static str, Captured)>);

impl SerializeStruct for CaptureStruct {
    type Ok = Captured;
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.0.push((key, value.serialize(Capture)?));
        Ok(())
    }

    fn end(self) -> Result<Captured> {
        Ok(Captured::Struct(self.0))
    }
}

impl<'de> Deserialize<'de> for Tensor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_newtype_struct(TENSOR_TOKEN, TensorVisitor)
    }
}

struct TensorVisitor;

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Field {
    Dtype,
    Shape,
    Data,
}

impl<'de> Visitor<'de> for TensorVisitor {
    type Value = Tensor;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tensor `[t:dtype:shape:data]` or {dtype, shape, data}")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Tensor, D::Error> {
        deserializer.deserialize_struct("Tensor", FIELDS, self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tensor, A::Error> {
        let missing = |index| de::Error::invalid_length(index, &"dtype, shape and data");
        let dtype: DType = seq.next_element()?.ok_or_else(|| missing(0))?;
        let shape: Vec<usize> = seq.next_element()?.ok_or_else(|| missing(1))?;
        let data: Data = seq.next_element()?.ok_or_else(|| missing(2))?;
        data.into_tensor(dtype, shape).map_err(de::Error::custom)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tensor, A::Error> {
        let (mut dtype, mut shape, mut data) = (None, None, None);
        while let Some(field) = map.next_key()? {
            match field {
                Field::Dtype if dtype.is_none() => dtype = Some(map.next_value::<DType>()?),
                Field::Shape if shape.is_none() => shape = Some(map.next_value::<Vec<usize>>()?),
                Field::Data if data.is_none() => data = Some(map.next_value::<Data>()?),
                Field::Dtype => return Err(de::Error::duplicate_field("dtype")),
                Field::Shape => return Err(de::Error::duplicate_field("shape")),
                Field::Data => return Err(de::Error::duplicate_field("data")),
            }
        }
        let dtype = dtype.ok_or_else(|| de::Error::missing_field("dtype"))?;
        let shape = shape.ok_or_else(|| de::Error::missing_field("shape"))?;
        let data = data.ok_or_else(|| de::Error::missing_field("data"))?;
        data.into_tensor(dtype, shape).map_err(de::Error::custom)
    }
}

/// Tensor data as it arrives: raw bytes from a compact format, numbers (flat or nested) otherwise.
enum Data {
    Raw(Vec<u8>),
    Numbers(Nested),
}

/// A number, or an array of them, possibly nested.
enum Nested {
    Scalar(Scalar),
    List(Vec<Nested>),
}

impl Data {
    fn into_tensor(self, dtype: DType, shape: Vec<usize>) -> Result<Tensor> {
        match self {
            Data::Raw(bytes) => Tensor::new(dtype, shape, bytes),
            Data::Numbers(numbers) => {
                let mut scalars = Vec::new();
                flatten(numbers, &shape, &mut scalars)?;
                Tensor::from_scalars(dtype, shape, scalars)
            }
        }
    }
}

/// Accepts a scalar for a rank-0 tensor, a flat array, or arrays nested exactly as `shape`.
fn flatten(numbers: Nested, shape: &[usize], out: &mut Vec<Scalar>) -> Result<()> {
    match numbers {
        Nested::Scalar(scalar) if shape.is_empty() => {
            out.push(scalar);
            Ok(())
        }
        Nested::List(items) if items.iter().all(|item| matches!(item, Nested::Scalar(_))) => {
            out.extend(items.into_iter().filter_map(|item| match item {
                Nested::Scalar(scalar) => Some(scalar),
                Nested::List(_) => None,
            }));
            Ok(())
        }
        Nested::List(items) => nested_into(items, shape, 0, out),
        Nested::Scalar(_) => Err(Error::new(ErrorKind::BadTensor {
            reason: "data must be an array of numbers".to_owned(),
        })),
    }
}

fn nested_into(
    items: Vec<Nested>,
    shape: &[usize],
    level: usize,
    out: &mut Vec<Scalar>,
) -> Result<()> {
    let mismatch = || {
        Error::new(ErrorKind::BadTensor {
            reason: format!("nested data does not match the shape at depth {level}"),
        })
    };
    if shape.get(level) != Some(&items.len()) {
        return Err(mismatch());
    }
    let leaf = level + 1 == shape.len();
    for item in items {
        match (item, leaf) {
            (Nested::Scalar(scalar), true) => out.push(scalar),
            (Nested::List(inner), false) => nested_into(inner, shape, level + 1, out)?,
            _ => return Err(mismatch()),
        }
    }
    Ok(())
}

impl<'de> Deserialize<'de> for Data {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DataVisitor;

        impl<'de> Visitor<'de> for DataVisitor {
            type Value = Data;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("tensor data: bytes or an array of numbers")
            }

            fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Data, E> {
                Ok(Data::Raw(bytes.to_vec()))
            }

            fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<Data, E> {
                Ok(Data::Raw(bytes))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Data, A::Error> {
                NestedVisitor.visit_seq(seq).map(Data::Numbers)
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<Data, E> {
                Ok(Data::Numbers(Nested::Scalar(Scalar::Bool(value))))
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Data, E> {
                Ok(Data::Numbers(Nested::Scalar(Scalar::Int(value))))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Data, E> {
                Ok(Data::Numbers(Nested::Scalar(Scalar::UInt(value))))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Data, E> {
                Ok(Data::Numbers(Nested::Scalar(Scalar::Float(value))))
            }
        }

        deserializer.deserialize_byte_buf(DataVisitor)
    }
}

struct NestedVisitor;

impl<'de> Visitor<'de> for NestedVisitor {
    type Value = Nested;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number or an array of numbers")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Nested, E> {
        Ok(Nested::Scalar(Scalar::Bool(value)))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Nested, E> {
        Ok(Nested::Scalar(Scalar::Int(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Nested, E> {
        Ok(Nested::Scalar(Scalar::UInt(value)))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Nested, E> {
        Ok(Nested::Scalar(Scalar::Float(value)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Nested, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(NestedSeed)? {
            items.push(item);
        }
        Ok(Nested::List(items))
    }
}

struct NestedSeed;

impl<'de> DeserializeSeed<'de> for NestedSeed {
    type Value = Nested;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Nested, D::Error> {
        deserializer.deserialize_any(NestedVisitor)
    }
}

/// A parsed tensor, presented to serde.
pub(crate) struct TensorDeserializer {
    tensor: Tensor,
}

impl TensorDeserializer {
    pub(crate) fn new(tensor: Tensor) -> Self {
        TensorDeserializer { tensor }
    }
}

impl<'de> Deserializer<'de> for TensorDeserializer {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_map(TensorMapAccess::new(self.tensor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_some(self)
    }

    /// A tensor of rank 0 or 1 reads as a sequence of its elements (`Vec<f32>`, …).
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.tensor.shape.len() > 1 {
            return Err(de::Error::invalid_type(
                Unexpected::Other(&format!("tensor of rank {}", self.tensor.shape.len())),
                &visitor,
            ));
        }
        let Tensor { dtype, data, .. } = self.tensor;
        visitor.visit_seq(ElementsAccess {
            dtype,
            data,
            next: 0,
        })
    }

    /// A `uint8` tensor reads as bytes.
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.tensor.dtype != DType::UInt8 {
            return Err(de::Error::invalid_type(
                Unexpected::Other(&format!("{} tensor", self.tensor.dtype)),
                &visitor,
            ));
        }
        visitor.visit_byte_buf(self.tensor.data)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_byte_buf(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        unit unit_struct tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// The fields a [`TensorMapAccess`] yields, in order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Next {
    DtypeKey,
    DtypeValue,
    ShapeKey,
    ShapeValue,
    DataKey,
    DataValue,
    /// The first key was probed: the one value is the whole tensor.
    Whole,
    Done,
}

/// A tensor as the map `{dtype, shape, data}`.
struct TensorMapAccess {
    dtype: DType,
    shape: Vec<usize>,
    data: Vec<u8>,
    next: Next,
}

impl TensorMapAccess {
    fn new(tensor: Tensor) -> Self {
        TensorMapAccess {
            dtype: tensor.dtype,
            shape: tensor.shape,
            data: tensor.data,
            next: Next::DtypeKey,
        }
    }
}

impl<'de> MapAccess<'de> for TensorMapAccess {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let (name, after) = match self.next {
            Next::DtypeKey => {
                let mut probed = false;
                let key = seed.deserialize(FieldKey {
                    name: "dtype",
                    probed: Some(&mut probed),
                })?;
                self.next = if probed {
                    Next::Whole
                } else {
                    Next::DtypeValue
                };
                return Ok(Some(key));
            }
            Next::ShapeKey => ("shape", Next::ShapeValue),
            Next::DataKey => ("data", Next::DataValue),
            _ => return Ok(None),
        };
        self.next = after;
        seed.deserialize(FieldKey { name, probed: None }).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        match self.next {
            Next::DtypeValue => {
                self.next = Next::ShapeKey;
                seed.deserialize(BorrowedStrDeserializer::new(self.dtype.name()))
            }
            Next::ShapeValue => {
                self.next = Next::DataKey;
                let dims = std::mem::take(&mut self.shape)
                    .into_iter()
                    .map(|dim| dim as u64);
                seed.deserialize(SeqDeserializer::new(dims))
            }
            Next::DataValue => {
                self.next = Next::Done;
                seed.deserialize(DataDeserializer {
                    dtype: self.dtype,
                    data: std::mem::take(&mut self.data),
                })
            }
            Next::Whole => {
                self.next = Next::Done;
                let tensor = Tensor {
                    dtype: self.dtype,
                    shape: std::mem::take(&mut self.shape),
                    data: std::mem::take(&mut self.data),
                };
                seed.deserialize(TensorDeserializer::new(tensor))
            }
            _ => Err(de::Error::custom("tensor map read past its end")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(match self.next {
            Next::DtypeKey | Next::DtypeValue => 3,
            Next::ShapeKey | Next::ShapeValue => 2,
            Next::DataKey | Next::DataValue | Next::Whole => 1,
            Next::Done => 0,
        })
    }
}

/// A field name of a tensor map; the first one answers the [`TENSOR_KEY_PROBE`].
struct FieldKey<'a> {
    name: &'static str,
    probed: Option<&'a mut bool>,
}

impl<'de> Deserializer<'de> for FieldKey<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_borrowed_str(self.name)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        match self.probed {
            Some(probed) if name == TENSOR_KEY_PROBE => {
                *probed = true;
                visitor.visit_unit()
            }
            _ => visitor.visit_borrowed_str(self.name),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// Tensor data: numbers to generic visitors, raw bytes when bytes are asked for.
struct DataDeserializer {
    dtype: DType,
    data: Vec<u8>,
}

impl<'de> Deserializer<'de> for DataDeserializer {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_seq(ElementsAccess {
            dtype: self.dtype,
            data: self.data,
            next: 0,
        })
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_byte_buf(self.data)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_byte_buf(self.data)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// The elements of a tensor, one number at a time.
struct ElementsAccess {
    dtype: DType,
    data: Vec<u8>,
    next: usize,
}

impl<'de> SeqAccess<'de> for ElementsAccess {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let size = self.dtype.itemsize();
        let Some(bytes) = self.data.get(self.next..self.next + size) else {
            return Ok(None);
        };
        self.next += size;
        match self.dtype {
            DType::Bool => seed.deserialize(BoolDeserializer::new(bool::get_le(bytes))),
            DType::Int8 => seed.deserialize(I8Deserializer::new(i8::get_le(bytes))),
            DType::UInt8 => seed.deserialize(U8Deserializer::new(u8::get_le(bytes))),
            DType::Int16 => seed.deserialize(I16Deserializer::new(i16::get_le(bytes))),
            DType::UInt16 => seed.deserialize(U16Deserializer::new(u16::get_le(bytes))),
            DType::Int32 => seed.deserialize(I32Deserializer::new(i32::get_le(bytes))),
            DType::UInt32 => seed.deserialize(U32Deserializer::new(u32::get_le(bytes))),
            DType::Int64 => seed.deserialize(I64Deserializer::new(i64::get_le(bytes))),
            DType::UInt64 => seed.deserialize(U64Deserializer::new(u64::get_le(bytes))),
            DType::Float16 => seed.deserialize(F32Deserializer::new(f16::get_le(bytes).to_f32())),
            DType::BFloat16 => seed.deserialize(F32Deserializer::new(bf16::get_le(bytes).to_f32())),
            DType::Float32 => seed.deserialize(F32Deserializer::new(f32::get_le(bytes))),
            DType::Float64 => seed.deserialize(F64Deserializer::new(f64::get_le(bytes))),
        }
        .map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some((self.data.len() - self.next) / self.dtype.itemsize())
    }
}

/// The first key of a map, as [`crate::Value`] reads it: a string, or the sign of a tensor.
pub(crate) enum FirstKey {
    Tensor,
    Key(String),
}

/// Reads a [`FirstKey`] by probing the key deserializer with [`TENSOR_KEY_PROBE`].
pub(crate) struct FirstKeySeed;

impl<'de> DeserializeSeed<'de> for FirstKeySeed {
    type Value = FirstKey;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<FirstKey, D::Error> {
        struct FirstKeyVisitor;

        impl<'de> Visitor<'de> for FirstKeyVisitor {
            type Value = FirstKey;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }

            fn visit_unit<E: de::Error>(self) -> Result<FirstKey, E> {
                Ok(FirstKey::Tensor)
            }

            fn visit_str<E: de::Error>(self, key: &str) -> Result<FirstKey, E> {
                Ok(FirstKey::Key(key.to_owned()))
            }

            fn visit_string<E: de::Error>(self, key: String) -> Result<FirstKey, E> {
                Ok(FirstKey::Key(key))
            }

            fn visit_newtype_struct<D: Deserializer<'de>>(
                self,
                deserializer: D,
            ) -> Result<FirstKey, D::Error> {
                String::deserialize(deserializer).map(FirstKey::Key)
            }
        }

        deserializer.deserialize_newtype_struct(TENSOR_KEY_PROBE, FirstKeyVisitor)
    }
}
