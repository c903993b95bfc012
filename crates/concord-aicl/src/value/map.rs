//! [`Map`]: an AICL dictionary, string keys in insertion order.

use std::fmt;

use indexmap::IndexMap;

use super::Value;

/// An AICL dictionary: string keys in the order they were inserted (or written).
///
/// Equality compares order too: `[d:[s:a]:…,[s:b]:…]` and `[d:[s:b]:…,[s:a]:…]` are different
/// texts, and for instance have different canonical forms for signing.
///
/// ```
/// use concord_aicl::{Map, Value};
///
/// let mut map = Map::new();
/// map.insert("name".into(), Value::from("iPhone"));
/// map.insert("price".into(), Value::from(899.99));
/// assert_eq!(map.keys().collect::<Vec<_>>(), ["name", "price"]);
/// assert_eq!(map.get("price"), Some(&Value::Float(899.99)));
/// ```
#[derive(Clone, Default)]
pub struct Map {
    entries: IndexMap<String, Value>,
}

impl Map {
    /// An empty dictionary.
    #[inline]
    pub fn new() -> Self {
        Map::default()
    }

    /// An empty dictionary with room for `capacity` entries.
    #[inline]
    pub fn with_capacity(capacity: usize) -> Self {
        Map {
            entries: IndexMap::with_capacity(capacity),
        }
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value under `key`.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.get(key)
    }

    /// The value under `key`, mutably.
    #[inline]
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.entries.get_mut(key)
    }

    /// The entry at `index` in order.
    #[inline]
    pub fn get_index(&self, index: usize) -> Option<(&str, &Value)> {
        self.entries
            .get_index(index)
            .map(|(key, value)| (key.as_str(), value))
    }

    /// Where `key` is in the order.
    #[inline]
    pub fn index_of(&self, key: &str) -> Option<usize> {
        self.entries.get_index_of(key)
    }

    /// Whether `key` is present.
    #[inline]
    pub fn contains_key(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// Sets `key` to `value`. A new key goes last; an existing key keeps its place and its old
    /// value is returned.
    #[inline]
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        self.entries.insert(key, value)
    }

    /// Removes `key`, keeping the order of the others.
    #[inline]
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.entries.shift_remove(key)
    }

    /// The entries in order.
    #[inline]
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.entries.iter())
    }

    /// The entries in order, values mutable.
    #[inline]
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&str, &mut Value)> {
        self.entries
            .iter_mut()
            .map(|(key, value)| (key.as_str(), value))
    }

    /// The keys in order.
    #[inline]
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The values in order.
    #[inline]
    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.entries.values()
    }
}

impl PartialEq for Map {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for Map {
    #[inline]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl FromIterator<(String, Value)> for Map {
    #[inline]
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(entries: I) -> Self {
        Map {
            entries: entries.into_iter().collect(),
        }
    }
}

impl Extend<(String, Value)> for Map {
    #[inline]
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, entries: I) {
        self.entries.extend(entries);
    }
}

/// Borrowing iterator over a [`Map`], in order.
#[derive(Clone, Debug)]
pub struct Iter<'a>(indexmap::map::Iter<'a, String, Value>);

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a Value);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(key, value)| (key.as_str(), value))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Map {
    type Item = (&'a str, &'a Value);
    type IntoIter = Iter<'a>;

    #[inline]
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Owning iterator over a [`Map`], in order.
#[derive(Debug)]
pub struct IntoIter(indexmap::map::IntoIter<String, Value>);

impl Iterator for IntoIter {
    type Item = (String, Value);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for IntoIter {}

impl IntoIterator for Map {
    type Item = (String, Value);
    type IntoIter = IntoIter;

    #[inline]
    fn into_iter(self) -> IntoIter {
        IntoIter(self.entries.into_iter())
    }
}
