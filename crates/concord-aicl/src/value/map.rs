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
    entries: Entries,
}

/// Up to this many entries a dictionary is a list searched in order: comparing a few keys
/// costs less than hashing one, and messages' dictionaries are mostly this small.
const SMALL: usize = 16;

/// How a [`Map`] holds its entries.
#[derive(Clone)]
enum Entries {
    /// At most [`SMALL`] entries, keys distinct.
    Small(Vec<(String, Value)>),
    /// More entries, indexed by hash.
    Large(IndexMap<String, Value>),
}

impl Default for Entries {
    fn default() -> Self {
        Entries::Small(Vec::new())
    }
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
        let entries = if capacity <= SMALL {
            Entries::Small(Vec::with_capacity(capacity))
        } else {
            Entries::Large(IndexMap::with_capacity(capacity))
        };
        Map { entries }
    }

    /// The dictionary of `entries` in their order; of two equal keys the later value wins, in
    /// the earlier one's place (as if inserted one by one). Keeps the list's allocation when
    /// it is small.
    pub(crate) fn from_entries(mut entries: Vec<(String, Value)>) -> Self {
        if entries.len() > SMALL {
            return Map {
                entries: Entries::Large(entries.into_iter().collect()),
            };
        }
        let mut kept = 0;
        for read in 0..entries.len() {
            let (before, rest) = entries.split_at_mut(read);
            let entry = &mut rest[0];
            match before[..kept].iter_mut().find(|(key, _)| *key == entry.0) {
                Some(earlier) => std::mem::swap(&mut earlier.1, &mut entry.1),
                None => {
                    entries.swap(kept, read);
                    kept += 1;
                }
            }
        }
        entries.truncate(kept);
        // A list that grew by doubling gives back its spare room (in place).
        entries.shrink_to_fit();
        Map {
            entries: Entries::Small(entries),
        }
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.entries {
            Entries::Small(list) => list.len(),
            Entries::Large(map) => map.len(),
        }
    }

    /// Whether there are no entries.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value under `key`.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&Value> {
        match &self.entries {
            Entries::Small(list) => list.iter().find(|(k, _)| k == key).map(|(_, value)| value),
            Entries::Large(map) => map.get(key),
        }
    }

    /// The value under `key`, mutably.
    #[inline]
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        match &mut self.entries {
            Entries::Small(list) => list
                .iter_mut()
                .find(|(k, _)| k == key)
                .map(|(_, value)| value),
            Entries::Large(map) => map.get_mut(key),
        }
    }

    /// The entry at `index` in order.
    #[inline]
    pub fn get_index(&self, index: usize) -> Option<(&str, &Value)> {
        let (key, value) = match &self.entries {
            Entries::Small(list) => list.get(index).map(|(key, value)| (key, value)),
            Entries::Large(map) => map.get_index(index),
        }?;
        Some((key.as_str(), value))
    }

    /// Where `key` is in the order.
    #[inline]
    pub fn index_of(&self, key: &str) -> Option<usize> {
        match &self.entries {
            Entries::Small(list) => list.iter().position(|(k, _)| k == key),
            Entries::Large(map) => map.get_index_of(key),
        }
    }

    /// Whether `key` is present.
    #[inline]
    pub fn contains_key(&self, key: &str) -> bool {
        self.index_of(key).is_some()
    }

    /// Sets `key` to `value`. A new key goes last; an existing key keeps its place and its old
    /// value is returned.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        let list = match &mut self.entries {
            Entries::Large(map) => return map.insert(key, value),
            Entries::Small(list) => list,
        };
        if let Some((_, old)) = list.iter_mut().find(|(k, _)| *k == key) {
            return Some(std::mem::replace(old, value));
        }
        if list.len() < SMALL {
            list.push((key, value));
        } else {
            let mut map: IndexMap<String, Value> = IndexMap::with_capacity(2 * SMALL);
            map.extend(list.drain(..));
            map.insert(key, value);
            self.entries = Entries::Large(map);
        }
        None
    }

    /// Removes `key`, keeping the order of the others.
    #[inline]
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        match &mut self.entries {
            Entries::Small(list) => {
                let index = list.iter().position(|(k, _)| k == key)?;
                Some(list.remove(index).1)
            }
            Entries::Large(map) => map.shift_remove(key),
        }
    }

    /// The entries in order.
    #[inline]
    pub fn iter(&self) -> Iter<'_> {
        Iter(match &self.entries {
            Entries::Small(list) => IterRepr::Small(list.iter()),
            Entries::Large(map) => IterRepr::Large(map.iter()),
        })
    }

    /// The entries in order, values mutable.
    #[inline]
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&str, &mut Value)> {
        let (small, large) = match &mut self.entries {
            Entries::Small(list) => (Some(list.iter_mut().map(|(k, v)| (&*k, v))), None),
            Entries::Large(map) => (None, Some(map.iter_mut())),
        };
        small
            .into_iter()
            .flatten()
            .chain(large.into_iter().flatten())
            .map(|(key, value)| (key.as_str(), value))
    }

    /// The keys in order.
    #[inline]
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|(key, _)| key)
    }

    /// The values in order.
    #[inline]
    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.iter().map(|(_, value)| value)
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
        Map::from_entries(entries.into_iter().collect())
    }
}

impl Extend<(String, Value)> for Map {
    #[inline]
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, entries: I) {
        for (key, value) in entries {
            self.insert(key, value);
        }
    }
}

/// Borrowing iterator over a [`Map`], in order.
#[derive(Clone, Debug)]
pub struct Iter<'a>(IterRepr<'a>);

#[derive(Clone, Debug)]
enum IterRepr<'a> {
    Small(std::slice::Iter<'a, (String, Value)>),
    Large(indexmap::map::Iter<'a, String, Value>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a Value);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (key, value) = match &mut self.0 {
            IterRepr::Small(entries) => entries.next().map(|(key, value)| (key, value)),
            IterRepr::Large(entries) => entries.next(),
        }?;
        Some((key.as_str(), value))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IterRepr::Small(entries) => entries.size_hint(),
            IterRepr::Large(entries) => entries.size_hint(),
        }
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
pub struct IntoIter(IntoIterRepr);

#[derive(Debug)]
enum IntoIterRepr {
    Small(std::vec::IntoIter<(String, Value)>),
    Large(indexmap::map::IntoIter<String, Value>),
}

impl Iterator for IntoIter {
    type Item = (String, Value);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IntoIterRepr::Small(entries) => entries.next(),
            IntoIterRepr::Large(entries) => entries.next(),
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IntoIterRepr::Small(entries) => entries.size_hint(),
            IntoIterRepr::Large(entries) => entries.size_hint(),
        }
    }
}

impl ExactSizeIterator for IntoIter {}

impl IntoIterator for Map {
    type Item = (String, Value);
    type IntoIter = IntoIter;

    #[inline]
    fn into_iter(self) -> IntoIter {
        IntoIter(match self.entries {
            Entries::Small(list) => IntoIterRepr::Small(list.into_iter()),
            Entries::Large(map) => IntoIterRepr::Large(map.into_iter()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, i64),
        Remove(u8),
        Extend(Vec<(u8, i64)>),
    }

    fn key(k: u8) -> String {
        format!("k{k}")
    }

    fn op() -> impl Strategy<Value = Op> {
        // 40 keys: maps cross the small/large boundary (16) both ways.
        prop_oneof![
            4 => (0u8..40, any::<i64>()).prop_map(|(k, v)| Op::Insert(k, v)),
            1 => (0u8..40).prop_map(Op::Remove),
            1 => proptest::collection::vec((0u8..40, any::<i64>()), 0..24).prop_map(Op::Extend),
        ]
    }

    /// Everything a map shows, from both sides of the boundary, agrees with `IndexMap`.
    fn assert_same(map: &Map, model: &IndexMap<String, Value>) {
        assert_eq!(map.len(), model.len());
        assert_eq!(map.is_empty(), model.is_empty());
        let entries: Vec<(&str, &Value)> = map.iter().collect();
        let expected: Vec<(&str, &Value)> = model.iter().map(|(k, v)| (k.as_str(), v)).collect();
        assert_eq!(entries, expected);
        assert_eq!(map.iter().len(), model.len());
        for k in 0..41 {
            let key = key(k);
            assert_eq!(map.get(&key), model.get(&key));
            assert_eq!(map.index_of(&key), model.get_index_of(&key));
            assert_eq!(map.contains_key(&key), model.contains_key(&key));
        }
        for index in 0..=model.len() {
            assert_eq!(
                map.get_index(index),
                model.get_index(index).map(|(k, v)| (k.as_str(), v))
            );
        }
        let rebuilt: Map = map.clone().into_iter().collect();
        assert_eq!(&rebuilt, map);
    }

    proptest! {
        #[test]
        fn behaves_like_an_index_map(ops in proptest::collection::vec(op(), 0..80)) {
            let mut map = Map::new();
            let mut model: IndexMap<String, Value> = IndexMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        prop_assert_eq!(map.insert(key(k), Value::Int(v)), model.insert(key(k), Value::Int(v)));
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(map.remove(&key(k)), model.shift_remove(&key(k)));
                    }
                    Op::Extend(entries) => {
                        let entries: Vec<(String, Value)> = entries.into_iter().map(|(k, v)| (key(k), Value::Int(v))).collect();
                        map.extend(entries.clone());
                        model.extend(entries);
                    }
                }
                assert_same(&map, &model);
            }
            for (_, value) in map.iter_mut() {
                *value = Value::Bool(true);
            }
            prop_assert!(map.values().all(|value| *value == Value::Bool(true)));
            prop_assert_eq!(map.keys().collect::<Vec<_>>(), model.keys().map(String::as_str).collect::<Vec<_>>());
        }

        #[test]
        fn from_entries_is_inserting_in_order(entries in proptest::collection::vec((0u8..24, any::<i64>()), 0..40)) {
            let entries: Vec<(String, Value)> = entries.into_iter().map(|(k, v)| (key(k), Value::Int(v))).collect();
            let map = Map::from_entries(entries.clone());
            let model: IndexMap<String, Value> = entries.into_iter().collect();
            assert_same(&map, &model);
        }
    }

    #[test]
    fn equality_ignores_the_representation() {
        let entries: Vec<(String, Value)> = (0..20)
            .map(|i| (key(i), Value::Int(i64::from(i))))
            .collect();
        let large = Map::from_entries(entries.clone());
        let mut shrunk = large.clone();
        for i in 10..20 {
            shrunk.remove(&key(i));
        }
        let small = Map::from_entries(entries[..10].to_vec());
        assert!(matches!(large.entries, Entries::Large(_)));
        assert!(matches!(shrunk.entries, Entries::Large(_)));
        assert!(matches!(small.entries, Entries::Small(_)));
        assert_eq!(shrunk, small);
        assert_ne!(large, small);
    }
}
