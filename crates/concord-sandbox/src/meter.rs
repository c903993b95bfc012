//! Measuring a JSON value against the sandbox's input and output caps: the length of its
//! compact JSON text and its nesting, counted value by value as the input builder
//! ([`crate::convert::to_js`]) counts them, so that [`crate::check_input`] and
//! [`crate::check_output`] refuse exactly what the sandbox refuses.

use serde_json::Value;

use crate::convert::{number_len, string_len, MAX_NESTING, MAX_NUMBER_LEN};
use crate::error::SandboxError;
use crate::limits::Limits;

/// Which cap a value is over.
#[derive(Debug)]
pub(crate) enum Over {
    /// Its compact JSON text passes the size limit.
    Size,
    /// Its arrays and objects nest deeper than [`MAX_NESTING`].
    Nesting,
}

impl Over {
    /// The error of an input over a cap.
    pub(crate) fn input_error(self, limits: &Limits) -> SandboxError {
        match self {
            Over::Size => SandboxError::InputTooLarge {
                limit: limits.input_bytes,
            },
            Over::Nesting => SandboxError::InputTooDeep { limit: MAX_NESTING },
        }
    }
}

/// The accounting of a value passed in, value by value as [`crate::convert::to_js`] builds it (and as
/// [`crate::check_input`] and [`crate::check_output`] measure a value without building
/// it): the length of its compact JSON text so far, stopping as soon as it passes the
/// limit, and (for inputs) its nesting.
pub(crate) struct Meter {
    limit: usize,
    size: usize,
    /// Whether nesting is limited (inputs).
    nesting: bool,
}

impl Meter {
    /// A meter for text of at most `limit` bytes, `before` of them already used.
    pub(crate) fn new(limit: usize, before: usize, nesting: bool) -> Self {
        Self {
            limit,
            size: before,
            nesting,
        }
    }

    /// Whether the text counted so far fits.
    fn fits(&self) -> Result<(), Over> {
        if self.size > self.limit {
            Err(Over::Size)
        } else {
            Ok(())
        }
    }

    fn count(&mut self, bytes: usize) -> Result<(), Over> {
        self.size += bytes;
        self.fits()
    }

    /// Counts `value` itself at `depth`: a scalar's whole text, or an array's or object's
    /// brackets and separators once its nesting is checked (its members are counted as
    /// they come, each key with [`Meter::key`]).
    pub(crate) fn enter(&mut self, value: &Value, depth: usize) -> Result<(), Over> {
        let bytes = match value {
            Value::Null => 4,
            Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(number) => number_len(number),
            Value::String(text) => string_len(text),
            Value::Array(items) => {
                self.container(depth)?;
                2 + items.len().saturating_sub(1)
            }
            Value::Object(map) => {
                self.container(depth)?;
                2 + map.len().saturating_sub(1)
            }
        };
        self.count(bytes)
    }

    /// Counts an object member's key and its colon.
    pub(crate) fn key(&mut self, key: &str) -> Result<(), Over> {
        self.count(string_len(key) + 1)
    }

    /// Counts all of `value` at `depth`, member by member.
    fn value(&mut self, value: &Value, depth: usize) -> Result<(), Over> {
        self.enter(value, depth)?;
        match value {
            Value::Array(items) => items
                .iter()
                .try_for_each(|item| self.value(item, depth + 1)),
            Value::Object(map) => map.iter().try_for_each(|(key, item)| {
                self.key(key)?;
                self.value(item, depth + 1)
            }),
            _ => Ok(()),
        }
    }

    fn container(&self, depth: usize) -> Result<(), Over> {
        if self.nesting && depth >= MAX_NESTING {
            Err(Over::Nesting)
        } else {
            Ok(())
        }
    }
}

/// Whether `value`, `depth` levels deep after `before` bytes of text, fits `limit` bytes
/// (and, with `nesting`, the nesting limit): at once when [`upper_bound`] fits, else counted
/// by the [`Meter`] the sandbox counts its input with.
pub(crate) fn measure(
    value: &Value,
    before: usize,
    depth: usize,
    limit: usize,
    nesting: bool,
) -> Result<(), Over> {
    if upper_bound(value, depth, nesting).is_some_and(|size| before + size <= limit) {
        return Ok(());
    }
    let mut meter = Meter::new(limit, before, nesting);
    meter.fits()?;
    meter.value(value, depth)
}

/// Longest compact JSON text of one byte of a string: a control character (`\u001f`).
const MAX_ESCAPED_BYTE_LEN: usize = 6;

/// A bound on `value`'s compact JSON length that costs one pass over its structure and
/// nothing per character (a number counts as the longest a number can be, a string as if
/// every byte had to be escaped), or `None` when it nests too deep (with `nesting`): when
/// the bound fits, so does the value, and the exact count is not needed.
fn upper_bound(value: &Value, depth: usize, nesting: bool) -> Option<usize> {
    let container = |depth: usize| !(nesting && depth >= MAX_NESTING);
    let string = |text: &str| 2 + MAX_ESCAPED_BYTE_LEN * text.len();
    match value {
        Value::Null | Value::Bool(_) => Some(5),
        Value::Number(_) => Some(MAX_NUMBER_LEN),
        Value::String(text) => Some(string(text)),
        Value::Array(items) => {
            if !container(depth) {
                return None;
            }
            items
                .iter()
                .try_fold(2 + items.len().saturating_sub(1), |size, item| {
                    Some(size + upper_bound(item, depth + 1, nesting)?)
                })
        }
        Value::Object(map) => {
            if !container(depth) {
                return None;
            }
            map.iter()
                .try_fold(2 + map.len().saturating_sub(1), |size, (key, item)| {
                    Some(size + string(key) + 1 + upper_bound(item, depth + 1, nesting)?)
                })
        }
    }
}
