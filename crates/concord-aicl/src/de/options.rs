//! Parser settings: strict or lenient, and the limits.

/// How forgiving the parser is.
///
/// **Strict** (the default, for messages between programs) accepts exactly the grammar of
/// SPEC-NOTES §4: nothing but whitespace around the value, only `\[`, `\]`, `\\` as escapes
/// and no unescaped `[` in strings, duplicate dictionary keys rejected, scalars without
/// surrounding spaces, integers without `+` or leading zeros, no trailing commas.
///
/// **Lenient** (for text an LLM wrote) additionally:
/// - ignores text before the first value and after it (prose, a code fence around it);
/// - skips `#` comments that run to the end of the line, between values;
/// - accepts a trailing comma before `]`;
/// - lets a later duplicate key replace the earlier one;
/// - keeps an unknown escape as written (`\n` stays a backslash and an `n`) and keeps balanced
///   unescaped brackets inside strings (`[s:see [1]]` is `see [1]`);
/// - trims spaces around integers, floats, booleans, dtypes, shapes and inside tensor data,
///   and accepts `+`, leading zeros, `True`/`FALSE`, `Infinity`, `.5`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Exactly the grammar; for program-to-program messages.
    #[default]
    Strict,
    /// Forgiving; for text written by a model or a person.
    Lenient,
}

/// Parser settings: [`Mode`] and limits.
///
/// ```
/// use concord_aicl::{ParseOptions, Value};
///
/// let options = ParseOptions::lenient().with_max_depth(8);
/// let value: Value = concord_aicl::from_str_with("```aicl\n[l:[i:1],[i:2],]\n```", &options)?;
/// assert_eq!(value, Value::List(vec![Value::Int(1), Value::Int(2)]));
/// # Ok::<(), concord_aicl::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParseOptions {
    /// Strict or lenient.
    pub mode: Mode,
    /// Longest accepted input in bytes, checked before parsing (default 10 MiB).
    pub max_size: usize,
    /// Deepest accepted nesting of lists and dictionaries (default 128).
    pub max_depth: usize,
}

impl ParseOptions {
    /// The default size limit: 10 MiB (whitepaper §9.2: "no more than 10 MB per message").
    pub const DEFAULT_MAX_SIZE: usize = 10 * 1024 * 1024;
    /// The default nesting limit.
    pub const DEFAULT_MAX_DEPTH: usize = 128;

    /// Strict mode with the default limits.
    pub fn strict() -> Self {
        ParseOptions {
            mode: Mode::Strict,
            max_size: Self::DEFAULT_MAX_SIZE,
            max_depth: Self::DEFAULT_MAX_DEPTH,
        }
    }

    /// Lenient mode with the default limits.
    pub fn lenient() -> Self {
        ParseOptions {
            mode: Mode::Lenient,
            ..Self::strict()
        }
    }

    /// The same options with another size limit in bytes.
    pub fn with_max_size(mut self, bytes: usize) -> Self {
        self.max_size = bytes;
        self
    }

    /// The same options with another nesting limit.
    pub fn with_max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth;
        self
    }

    pub(crate) fn is_strict(&self) -> bool {
        self.mode == Mode::Strict
    }
}

impl Default for ParseOptions {
    fn default() -> Self {
        Self::strict()
    }
}
