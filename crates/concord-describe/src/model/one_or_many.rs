//! TD terms that may be one value or an array of values.

use serde::{Deserialize, Serialize};

/// A term written either as one value or as an array (`"op": "readproperty"` or
/// `"op": ["readproperty", "writeproperty"]`). The written form is kept, so documents
/// round-trip unchanged.
///
/// ```
/// use concord_describe::OneOrMany;
///
/// let one: OneOrMany<String> = serde_json::from_str(r#""basic_sc""#)?;
/// let many: OneOrMany<String> = serde_json::from_str(r#"["basic_sc", "psk_sc"]"#)?;
/// assert_eq!(one.as_slice(), ["basic_sc"]);
/// assert_eq!(many.as_slice().len(), 2);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// A single value.
    One(T),
    /// An array of values.
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// The values, one or many, as a slice.
    pub fn as_slice(&self) -> &[T] {
        match self {
            OneOrMany::One(value) => std::slice::from_ref(value),
            OneOrMany::Many(values) => values,
        }
    }

    /// Iterates over the values.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.as_slice().iter()
    }
}
