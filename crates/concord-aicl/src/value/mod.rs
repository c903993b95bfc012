//! [`Value`]: any AICL value, like `serde_json::Value`.

mod de;
mod map;
mod ser;

use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::tensor::Tensor;

pub use de::from_value;
pub use map::{IntoIter, Iter, Map};
pub use ser::to_value;

/// Any AICL value.
///
/// `Display` writes compact AICL (`{:#}` writes pretty AICL) and `FromStr` parses strict AICL.
///
/// ```
/// use concord_aicl::Value;
///
/// let value: Value = "[d:[s:tool]:[s:web_scraper],[s:params]:[d:[s:extract]:[l:[s:title],[s:price]]]]".parse()?;
/// assert_eq!(value.get("tool").and_then(Value::as_str), Some("web_scraper"));
/// let extract = value.get("params").and_then(|params| params.get("extract"));
/// assert_eq!(extract.and_then(Value::as_list).map(Vec::len), Some(2));
/// assert_eq!(value.to_string().parse::<Value>()?, value);
/// # Ok::<(), concord_aicl::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `[s:…]`: UTF-8 text.
    String(String),
    /// `[i:…]`: a signed 64-bit integer.
    Int(i64),
    /// `[f:…]`: an IEEE 754 double (including `inf`, `-inf`, `nan`).
    Float(f64),
    /// `[b:true]` or `[b:false]`.
    Bool(bool),
    /// `[l:…]`: a list.
    List(Vec<Value>),
    /// `[d:…]`: a dictionary with string keys in order.
    Dict(Map),
    /// `[t:dtype:shape:data]`: a tensor.
    Tensor(Tensor),
}

impl Value {
    /// The name of the value's type, as used in error messages: `string`, `int`, `float`,
    /// `bool`, `list`, `dict` or `tensor`.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Bool(_) => "bool",
            Value::List(_) => "list",
            Value::Dict(_) => "dict",
            Value::Tensor(_) => "tensor",
        }
    }

    /// The text of a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) => Some(text),
            _ => None,
        }
    }

    /// The number of an int.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(value) => Some(*value),
            _ => None,
        }
    }

    /// The number of a float.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(value) => Some(*value),
            _ => None,
        }
    }

    /// The value of a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(value) => Some(*value),
            _ => None,
        }
    }

    /// The items of a list.
    pub fn as_list(&self) -> Option<&Vec<Value>> {
        match self {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    /// The items of a list, mutably.
    pub fn as_list_mut(&mut self) -> Option<&mut Vec<Value>> {
        match self {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    /// The entries of a dictionary.
    pub fn as_dict(&self) -> Option<&Map> {
        match self {
            Value::Dict(map) => Some(map),
            _ => None,
        }
    }

    /// The entries of a dictionary, mutably.
    pub fn as_dict_mut(&mut self) -> Option<&mut Map> {
        match self {
            Value::Dict(map) => Some(map),
            _ => None,
        }
    }

    /// The tensor.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(tensor) => Some(tensor),
            _ => None,
        }
    }

    /// The value under `key`, if this is a dictionary that has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_dict().and_then(|map| map.get(key))
    }

    /// The value under `key`, mutably, if this is a dictionary that has it.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.as_dict_mut().and_then(|map| map.get_mut(key))
    }
}

impl fmt::Display for Value {
    /// Compact AICL; with `{:#}`, pretty AICL.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::new();
        crate::ser::write_value(&mut text, self, f.alternate());
        f.write_str(&text)
    }
}

impl FromStr for Value {
    type Err = Error;

    /// Parses strict AICL.
    fn from_str(text: &str) -> Result<Self, Error> {
        crate::from_str(text)
    }
}

macro_rules! from_integer {
    ($($ty:ty),*) => {$(
        impl From<$ty> for Value {
            fn from(value: $ty) -> Self {
                Value::Int(value.into())
            }
        }
    )*};
}

from_integer!(i8, i16, i32, i64, u8, u16, u32);

impl From<f64> for Value {
    fn from(value: f64) -> Self {
        Value::Float(value)
    }
}

impl From<f32> for Value {
    /// The `f64` written with the same shortest digits as the `f32` (`0.1f32` becomes `0.1`,
    /// not `0.10000000149011612`), so that converting and writing agree with writing directly.
    fn from(value: f32) -> Self {
        Value::Float(f32_as_f64(value))
    }
}

/// The `f64` nearest the shortest decimal that reads back as `value` (non-finite values as is).
pub(crate) fn f32_as_f64(value: f32) -> f64 {
    if !value.is_finite() {
        return value.into();
    }
    zmij::Buffer::new()
        .format_finite(value)
        .parse()
        .unwrap_or(value.into())
}

impl From<bool> for Value {
    fn from(value: bool) -> Self {
        Value::Bool(value)
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Value::String(value)
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Value::String(value.to_owned())
    }
}

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Self {
        Value::List(items)
    }
}

impl From<Map> for Value {
    fn from(map: Map) -> Self {
        Value::Dict(map)
    }
}

impl From<Tensor> for Value {
    fn from(tensor: Tensor) -> Self {
        Value::Tensor(tensor)
    }
}

impl FromIterator<Value> for Value {
    fn from_iter<I: IntoIterator<Item = Value>>(items: I) -> Self {
        Value::List(items.into_iter().collect())
    }
}

impl FromIterator<(String, Value)> for Value {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(entries: I) -> Self {
        Value::Dict(entries.into_iter().collect())
    }
}
