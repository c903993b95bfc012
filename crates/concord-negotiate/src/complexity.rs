//! How complex a JSON Schema from a peer may be before anything compiles, inlines or reads
//! it: one walk, with no recursion a deep document could overflow, that stops at the first
//! limit it finds over.
//!
//! A small document can still hold an expensive schema (a huge `enum`, thousands of
//! properties, hundreds of `anyOf` branches, long `pattern` regexes, `$ref`s that expand
//! many times): [`check_complexity`] refuses it, naming where and which limit.
//!
//! ```
//! use concord_negotiate::complexity::{check_complexity, Limit, SchemaLimits};
//! use serde_json::json;
//!
//! let limits = SchemaLimits { max_enum_values: 3, ..SchemaLimits::default() };
//! let small = json!({"type": "string", "enum": ["a", "b"]});
//! assert!(check_complexity(&small, &limits).is_ok());
//! let large = json!({"properties": {"kind": {"enum": ["a", "b", "c", "d"]}}});
//! let error = check_complexity(&large, &limits).unwrap_err();
//! assert_eq!(error.pointer, "/properties/kind/enum");
//! assert_eq!((error.over, error.count, error.limit), (Limit::EnumValues, 4, 3));
//! ```

use serde_json::Value;

/// Default [`SchemaLimits::max_depth`].
pub const DEFAULT_MAX_DEPTH: usize = 32;
/// Default [`SchemaLimits::max_nodes`].
pub const DEFAULT_MAX_NODES: usize = 5_000;
/// Default [`SchemaLimits::max_values`].
pub const DEFAULT_MAX_VALUES: usize = 20_000;
/// Default [`SchemaLimits::max_enum_values`].
pub const DEFAULT_MAX_ENUM_VALUES: usize = 1_024;
/// Default [`SchemaLimits::max_members`].
pub const DEFAULT_MAX_MEMBERS: usize = 256;
/// Default [`SchemaLimits::max_branches`].
pub const DEFAULT_MAX_BRANCHES: usize = 64;
/// Default [`SchemaLimits::max_pattern_len`].
pub const DEFAULT_MAX_PATTERN_LEN: usize = 1_024;
/// Default [`SchemaLimits::max_pattern_total`].
pub const DEFAULT_MAX_PATTERN_TOTAL: usize = 16 * 1_024;

/// How complex one JSON Schema from a peer may be. Every limit is inclusive: a count equal
/// to it passes. The defaults ([`SchemaLimits::default`]) admit any schema a protocol for
/// one action plausibly needs, and keep compiling one to a few hundred kilobytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SchemaLimits {
    /// How deeply objects and arrays may nest (the root object is depth 1). Default 32.
    pub max_depth: usize,
    /// How many objects and arrays the schema may hold in all. Default 5,000.
    pub max_nodes: usize,
    /// How many JSON values (objects, arrays and scalars) the schema may hold in all, also
    /// after its local `$ref`s are inlined: this bounds reference fan-out. Default 20,000.
    pub max_values: usize,
    /// How many values one `enum` (or a `const` array) may list. Default 1,024.
    pub max_enum_values: usize,
    /// How many members one object may have (so how many `properties`, `$defs`…), and how
    /// many names one `required` may list. Default 256.
    pub max_members: usize,
    /// How many branches one `anyOf`, `oneOf` or `allOf` may have. Default 64.
    pub max_branches: usize,
    /// How long (in bytes) one regular expression may be: a `pattern`, or a key of
    /// `patternProperties`. Default 1,024.
    pub max_pattern_len: usize,
    /// How long (in bytes) all of a schema's regular expressions may be together.
    /// Default 16,384.
    pub max_pattern_total: usize,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        Self {
            max_depth: DEFAULT_MAX_DEPTH,
            max_nodes: DEFAULT_MAX_NODES,
            max_values: DEFAULT_MAX_VALUES,
            max_enum_values: DEFAULT_MAX_ENUM_VALUES,
            max_members: DEFAULT_MAX_MEMBERS,
            max_branches: DEFAULT_MAX_BRANCHES,
            max_pattern_len: DEFAULT_MAX_PATTERN_LEN,
            max_pattern_total: DEFAULT_MAX_PATTERN_TOTAL,
        }
    }
}

/// Which of the [`SchemaLimits`] a schema is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`SchemaLimits::max_depth`].
    Depth,
    /// [`SchemaLimits::max_nodes`].
    Nodes,
    /// [`SchemaLimits::max_values`], as written.
    Values,
    /// [`SchemaLimits::max_values`], once local `$ref`s are inlined.
    InlinedValues,
    /// [`SchemaLimits::max_enum_values`].
    EnumValues,
    /// [`SchemaLimits::max_members`].
    Members,
    /// [`SchemaLimits::max_branches`].
    Branches,
    /// [`SchemaLimits::max_pattern_len`].
    PatternLength,
    /// [`SchemaLimits::max_pattern_total`].
    PatternTotal,
}

impl Limit {
    /// The [`SchemaLimits`] field this limit is set by.
    pub fn field(self) -> &'static str {
        match self {
            Self::Depth => "max_depth",
            Self::Nodes => "max_nodes",
            Self::Values | Self::InlinedValues => "max_values",
            Self::EnumValues => "max_enum_values",
            Self::Members => "max_members",
            Self::Branches => "max_branches",
            Self::PatternLength => "max_pattern_len",
            Self::PatternTotal => "max_pattern_total",
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Depth => "levels of nesting",
            Self::Nodes => "objects and arrays in all",
            Self::Values => "JSON values in all",
            Self::InlinedValues => "JSON values once its `$ref`s are inlined",
            Self::EnumValues => "enum values",
            Self::Members => "object members",
            Self::Branches => "anyOf/oneOf/allOf branches",
            Self::PatternLength => "bytes of regular expression",
            Self::PatternTotal => "bytes of regular expressions in all",
        })
    }
}

/// A schema over one of the [`SchemaLimits`]: where, which limit, how many and the limit.
/// For running totals (nodes, values, pattern bytes in all) the pointer is where the total
/// went over and the count is the total reached there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "at {}: {count} {over}, over the limit of {limit} ({})",
    display_pointer(pointer),
    over.field()
)]
#[non_exhaustive]
pub struct SchemaTooComplex {
    /// JSON pointer into the schema (empty for its root).
    pub pointer: String,
    /// The limit that was over.
    pub over: Limit,
    /// The count found.
    pub count: usize,
    /// The limit it is over.
    pub limit: usize,
}

fn display_pointer(pointer: &str) -> &str {
    if pointer.is_empty() {
        "/"
    } else {
        pointer
    }
}

impl SchemaTooComplex {
    /// A schema over `over` at `pointer`, with `count` against `limit`.
    pub(crate) fn new(pointer: String, over: Limit, count: usize, limit: usize) -> Self {
        Self {
            pointer,
            over,
            count,
            limit,
        }
    }
}

/// One step of a JSON pointer.
#[derive(Clone, Copy)]
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// The path walked so far, as a tree of segments: each node its parent's index.
struct Paths<'a> {
    nodes: Vec<(usize, Segment<'a>)>,
}

/// The index of the root path (no segment).
const ROOT: usize = usize::MAX;

impl<'a> Paths<'a> {
    fn push(&mut self, parent: usize, segment: Segment<'a>) -> usize {
        self.nodes.push((parent, segment));
        self.nodes.len() - 1
    }

    /// The JSON pointer of path `at` (RFC 6901: `~` as `~0`, `/` as `~1`).
    fn pointer(&self, mut at: usize) -> String {
        let mut segments = Vec::new();
        while let Some((parent, segment)) = self.nodes.get(at) {
            segments.push(*segment);
            at = *parent;
        }
        let mut pointer = String::new();
        for segment in segments.iter().rev() {
            pointer.push('/');
            match segment {
                Segment::Key(key) => pointer.push_str(&key.replace('~', "~0").replace('/', "~1")),
                Segment::Index(index) => pointer.push_str(&index.to_string()),
            }
        }
        pointer
    }
}

/// Checks `schema` against `limits` in one walk (an explicit stack, no recursion), before
/// anything compiles, inlines or reads it.
///
/// # Errors
/// [`SchemaTooComplex`] for the first limit found over, naming the JSON pointer, the
/// limit, the count and the limit's value.
pub fn check_complexity(schema: &Value, limits: &SchemaLimits) -> Result<(), SchemaTooComplex> {
    let mut paths = Paths { nodes: Vec::new() };
    let mut stack: Vec<(&Value, usize, usize)> = vec![(schema, 1, ROOT)];
    let (mut nodes, mut values, mut pattern_total) = (0usize, 0usize, 0usize);
    while let Some((value, depth, path)) = stack.pop() {
        values += 1;
        let over = |paths: &Paths, at: usize, over: Limit, count: usize, limit: usize| {
            Err(SchemaTooComplex::new(paths.pointer(at), over, count, limit))
        };
        let children = match value {
            Value::Object(map) => map.len(),
            Value::Array(items) => items.len(),
            _ => continue,
        };
        nodes += 1;
        if depth > limits.max_depth {
            return over(&paths, path, Limit::Depth, depth, limits.max_depth);
        }
        if nodes > limits.max_nodes {
            return over(&paths, path, Limit::Nodes, nodes, limits.max_nodes);
        }
        // Counted before the children are stacked, so the walk's memory stays bounded too.
        let pending = values + stack.len() + children;
        if pending > limits.max_values {
            return over(&paths, path, Limit::Values, pending, limits.max_values);
        }
        match value {
            Value::Object(map) => {
                if map.len() > limits.max_members {
                    return over(&paths, path, Limit::Members, map.len(), limits.max_members);
                }
                for (key, sub) in map {
                    let here = paths.push(path, Segment::Key(key));
                    let counted = match (key.as_str(), sub) {
                        ("enum" | "const", Value::Array(items)) => {
                            Some((Limit::EnumValues, items.len(), limits.max_enum_values))
                        }
                        ("anyOf" | "oneOf" | "allOf", Value::Array(items)) => {
                            Some((Limit::Branches, items.len(), limits.max_branches))
                        }
                        ("required", Value::Array(items)) => {
                            Some((Limit::Members, items.len(), limits.max_members))
                        }
                        _ => None,
                    };
                    if let Some((limit, count, max)) = counted.filter(|(_, count, max)| count > max)
                    {
                        return over(&paths, here, limit, count, max);
                    }
                    let patterns: Vec<(&str, usize)> = match (key.as_str(), sub) {
                        ("pattern", Value::String(pattern)) => vec![(pattern.as_str(), here)],
                        ("patternProperties", Value::Object(map)) => map
                            .keys()
                            .map(|pattern| {
                                (pattern.as_str(), paths.push(here, Segment::Key(pattern)))
                            })
                            .collect(),
                        _ => Vec::new(),
                    };
                    for (pattern, at) in patterns {
                        if pattern.len() > limits.max_pattern_len {
                            let (count, max) = (pattern.len(), limits.max_pattern_len);
                            return over(&paths, at, Limit::PatternLength, count, max);
                        }
                        pattern_total += pattern.len();
                        if pattern_total > limits.max_pattern_total {
                            let (count, max) = (pattern_total, limits.max_pattern_total);
                            return over(&paths, at, Limit::PatternTotal, count, max);
                        }
                    }
                    stack.push((sub, depth + 1, here));
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    let here = paths.push(path, Segment::Index(index));
                    stack.push((item, depth + 1, here));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn over(schema: &Value, limits: &SchemaLimits) -> (String, Limit, usize, usize) {
        match check_complexity(schema, limits) {
            Err(error) => (error.pointer, error.over, error.count, error.limit),
            Ok(()) => panic!("{schema} passed"),
        }
    }

    #[test]
    fn a_schema_within_the_limits_passes() {
        let schema = json!({
            "type": "object",
            "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}, "kind": {"enum": ["a", "b"]}},
            "required": ["id"],
            "anyOf": [{"required": ["id"]}, {"required": ["kind"]}]
        });
        assert_eq!(check_complexity(&schema, &SchemaLimits::default()), Ok(()));
    }

    #[test]
    fn each_limit_is_named_with_its_pointer_count_and_value() {
        let tight = SchemaLimits {
            max_depth: 3,
            max_nodes: 6,
            max_values: 30,
            max_enum_values: 2,
            max_members: 3,
            max_branches: 2,
            max_pattern_len: 4,
            max_pattern_total: 6,
        };
        let deep = json!({"properties": {"a": {"items": {}}}});
        assert_eq!(
            over(&deep, &tight),
            ("/properties/a/items".into(), Limit::Depth, 4, 3)
        );
        let enumerated = json!({"properties": {"a/b": {"enum": [1, 2, 3]}}});
        assert_eq!(
            over(&enumerated, &tight),
            ("/properties/a~1b/enum".into(), Limit::EnumValues, 3, 2)
        );
        let wide = json!({"properties": {"a": {}, "b": {}, "c": {}, "d": {}}});
        assert_eq!(
            over(&wide, &tight),
            ("/properties".into(), Limit::Members, 4, 3)
        );
        let branches = json!({"anyOf": [{}, {}, {}]});
        assert_eq!(
            over(&branches, &tight),
            ("/anyOf".into(), Limit::Branches, 3, 2)
        );
        let long = json!({"pattern": "^abcd$"});
        assert_eq!(
            over(&long, &tight),
            ("/pattern".into(), Limit::PatternLength, 6, 4)
        );
        let many = json!({"patternProperties": {"^ab": {}, "^cd": {}, "x": {}}});
        let (_, limit, count, max) = over(&many, &tight);
        assert_eq!((limit, count, max), (Limit::PatternTotal, 7, 6));
        let nodes = json!({"items": [[], [], []]});
        let few = SchemaLimits {
            max_nodes: 3,
            ..SchemaLimits::default()
        };
        assert_eq!(over(&nodes, &few), ("/items/1".into(), Limit::Nodes, 4, 3));
        let values = json!({"examples": (0..40).collect::<Vec<_>>()});
        assert_eq!(
            over(&values, &tight),
            ("/examples".into(), Limit::Values, 42, 30)
        );
    }

    #[test]
    fn a_deep_document_is_walked_without_recursion() {
        let mut schema = json!({});
        for _ in 0..100_000 {
            // Not `json!`: it would serialize (recursively) what it wraps.
            let mut wrapper = serde_json::Map::new();
            wrapper.insert("items".into(), schema);
            schema = Value::Object(wrapper);
        }
        let error = check_complexity(&schema, &SchemaLimits::default()).unwrap_err();
        assert_eq!((error.over, error.count), (Limit::Depth, 33));
        assert!(error.to_string().contains("max_depth"), "{error}");
        // Dropping a value this deep recurses in serde_json itself: unwind it by hand.
        let mut rest = Some(schema);
        while let Some(mut value) = rest.take() {
            rest = value.get_mut("items").map(Value::take);
        }
    }
}
