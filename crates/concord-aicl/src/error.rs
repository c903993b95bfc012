//! Errors: what went wrong, where in the text, and which AICL error code answers it.

use std::fmt;

pub use concord_text::TextPosition;

/// The error codes of the AICL whitepaper (§4.1), which an agent sends back in an `error` message.
///
/// Codes the whitepaper does not list are kept as [`ErrorCode::Other`] so that a peer's
/// newer codes survive a round trip.
///
/// ```
/// use concord_aicl::ErrorCode;
///
/// assert_eq!(ErrorCode::MissingField.code(), 2001);
/// assert_eq!(ErrorCode::from_code(1001), ErrorCode::InvalidTensor);
/// assert_eq!(ErrorCode::from_code(5003), ErrorCode::Other(5003));
/// assert_eq!(ErrorCode::InvalidTensor.name(), "INVALID_TENSOR");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// 1000 `PROTOCOL_ERROR`: the text is not AICL, or the header is missing or invalid.
    ProtocolError,
    /// 1001 `INVALID_TENSOR`: a tensor's dtype, shape or data is wrong.
    InvalidTensor,
    /// 2001 `MISSING_FIELD`: a field the message type requires is absent.
    MissingField,
    /// 3001 `TOOL_UNAVAILABLE`: the requested tool is not available.
    ToolUnavailable,
    /// 4001 `DATA_FORMAT_ERROR`: data does not have the shape or type that was required.
    DataFormatError,
    /// A code the whitepaper does not define (for example the `500x` family it mentions).
    Other(i64),
}

impl ErrorCode {
    /// The numeric code, as carried in `[s:code]:[i:…]`.
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ProtocolError => 1000,
            ErrorCode::InvalidTensor => 1001,
            ErrorCode::MissingField => 2001,
            ErrorCode::ToolUnavailable => 3001,
            ErrorCode::DataFormatError => 4001,
            ErrorCode::Other(code) => code,
        }
    }

    /// The code for a number received from a peer; unknown numbers are accepted as [`ErrorCode::Other`].
    pub fn from_code(code: i64) -> Self {
        match code {
            1000 => ErrorCode::ProtocolError,
            1001 => ErrorCode::InvalidTensor,
            2001 => ErrorCode::MissingField,
            3001 => ErrorCode::ToolUnavailable,
            4001 => ErrorCode::DataFormatError,
            other => ErrorCode::Other(other),
        }
    }

    /// The whitepaper's name for the code, used as the `reason` of an error message.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::ProtocolError => "PROTOCOL_ERROR",
            ErrorCode::InvalidTensor => "INVALID_TENSOR",
            ErrorCode::MissingField => "MISSING_FIELD",
            ErrorCode::ToolUnavailable => "TOOL_UNAVAILABLE",
            ErrorCode::DataFormatError => "DATA_FORMAT_ERROR",
            ErrorCode::Other(_) => "UNKNOWN_ERROR",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code(), self.name())
    }
}

/// A place in AICL text: the line and column ([`TextPosition`], the column in characters)
/// and, beside it, the 0-based byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    /// Line and column, both starting at 1, the column counted in Unicode scalar values.
    pub text: TextPosition,
    /// Byte offset from the start of the input, starting at 0.
    pub offset: usize,
}

impl Position {
    /// The position of byte `offset` in `text` (clamped to the end of the text).
    pub(crate) fn locate(text: &[u8], offset: usize) -> Position {
        let offset = offset.min(text.len());
        Position {
            text: TextPosition::locate(text, offset),
            offset,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (byte {})", self.text, self.offset)
    }
}

/// What was wrong, without the position (see [`Error`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input ended inside a value that was opened earlier.
    #[error("unclosed `[{tag}:` opened at {opened}")]
    Unclosed {
        /// The tag of the value left open (`d`, `l`, `s`, …).
        tag: char,
        /// Where it was opened.
        opened: Position,
    },
    /// The input ended where a value was expected.
    #[error("unexpected end of input, expected {expected}")]
    UnexpectedEnd {
        /// What the parser was looking for.
        expected: &'static str,
    },
    /// Something other than what the grammar allows at this point.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What the grammar allows here.
        expected: &'static str,
        /// A short quote of what was there instead.
        found: String,
    },
    /// A value tag other than `s`, `i`, `f`, `b`, `l`, `d`, `t`.
    #[error("unknown type tag `{tag}` (expected one of s, i, f, b, l, d, t)")]
    UnknownTag {
        /// The tag as written.
        tag: String,
    },
    /// `[i:…]` holding something that is not a decimal integer.
    #[error("invalid integer `{text}`")]
    BadInt {
        /// The text between `[i:` and `]`.
        text: String,
    },
    /// `[i:…]` holding an integer outside the signed 64-bit range.
    #[error("integer `{text}` does not fit in 64 bits")]
    IntOverflow {
        /// The text between `[i:` and `]`.
        text: String,
    },
    /// `[f:…]` holding something that is not a decimal float, `inf`, `-inf` or `nan`.
    #[error("invalid float `{text}`")]
    BadFloat {
        /// The text between `[f:` and `]`.
        text: String,
    },
    /// `[b:…]` holding something other than `true` or `false`.
    #[error("invalid boolean `{text}` (expected `true` or `false`)")]
    BadBool {
        /// The text between `[b:` and `]`.
        text: String,
    },
    /// A backslash in a string not followed by `[`, `]` or `\` (strict mode).
    #[error("invalid escape `\\{found}` in string (only `\\[`, `\\]` and `\\\\` exist)")]
    BadEscape {
        /// The character after the backslash.
        found: char,
    },
    /// A `[` inside a string that is not escaped (strict mode).
    #[error("unescaped `[` in string (write `\\[`)")]
    UnescapedBracket,
    /// A dictionary key that is not a string.
    #[error("dictionary key must be a string `[s:…]`, found `[{tag}:`")]
    NonStringKey {
        /// The tag of the value in key position.
        tag: char,
    },
    /// The same key twice in one dictionary (strict mode).
    #[error("duplicate dictionary key `{key}`")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
    /// Text after the end of the value (strict mode).
    #[error("unexpected text after the end of the value")]
    TrailingText,
    /// More nested lists and dictionaries than the limit allows.
    #[error("nesting deeper than the limit of {limit}")]
    DepthLimit {
        /// The configured depth limit.
        limit: usize,
    },
    /// Input longer than the size limit; rejected before parsing.
    #[error("message of {size} bytes exceeds the limit of {limit} bytes")]
    SizeLimit {
        /// The size of the input in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },
    /// Input bytes that are not UTF-8.
    #[error("input is not valid UTF-8")]
    InvalidUtf8,
    /// A tensor dtype outside the list of SPEC-NOTES §4.
    #[error("unknown tensor dtype `{name}`")]
    UnknownDType {
        /// The dtype as written.
        name: String,
    },
    /// A tensor shape that is not a comma-separated list of dimensions.
    #[error("invalid tensor shape `{text}`")]
    BadShape {
        /// The shape as written.
        text: String,
    },
    /// A character outside the RFC 1924 base85 alphabet in tensor data.
    #[error("invalid base85 character {found:?} in tensor data")]
    BadBase85Char {
        /// The offending character.
        found: char,
    },
    /// A base85 group whose value does not fit in 32 bits.
    #[error("base85 overflow in the group of tensor data starting at character {group_start}")]
    Base85Overflow {
        /// Index of the group's first character within the tensor data.
        group_start: usize,
    },
    /// Tensor data whose length does not match its shape and dtype.
    #[error("tensor data has {actual} base85 characters but dtype {dtype} with shape [{shape}] needs {expected} bytes ({expected_chars} characters)")]
    TensorLength {
        /// The dtype name.
        dtype: &'static str,
        /// The shape, comma-separated.
        shape: String,
        /// Bytes the shape needs.
        expected: usize,
        /// Base85 characters those bytes take.
        expected_chars: usize,
        /// Base85 characters found.
        actual: usize,
    },
    /// A tensor element or buffer that is not valid for its dtype.
    #[error("invalid tensor: {reason}")]
    BadTensor {
        /// What is wrong with it.
        reason: String,
    },
    /// A message whose top-level value is not a dictionary.
    #[error("an AICL message must be a dictionary `[d:…]`, found {found}")]
    NotAMessage {
        /// The kind of value found.
        found: &'static str,
    },
    /// A header field (`protocol`, `session_id`, `msg_type`) missing, invalid or out of place.
    #[error("message header `{field}`: {reason}")]
    BadHeader {
        /// The header field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A `protocol_negotiate` offer with no version in common with ours.
    #[error("no common protocol version: we support {ours:?}, the peer offers {theirs:?}")]
    NoCommonVersion {
        /// The versions we support.
        ours: Vec<String>,
        /// The versions offered.
        theirs: Vec<String>,
    },
    /// A field the message type requires is absent.
    #[error("field `{field}` is required in {msg_type}")]
    MissingField {
        /// The message type.
        msg_type: String,
        /// The missing field (or alternatives, e.g. `data` or `content`).
        field: String,
    },
    /// A message field of the wrong type or with an invalid value.
    #[error("field `{field}`: {reason}")]
    BadField {
        /// The field name.
        field: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// A value that has no representation in the target format (JSON bridge, serializer).
    #[error("{path}: {reason}")]
    NotRepresentable {
        /// Where in the value, as a JSON-pointer-like path (`/items/3/price`, empty for the root).
        path: String,
        /// Why it cannot be represented.
        reason: String,
    },
    /// A message from serde: a type mismatch or a custom error of a `Deserialize`/`Serialize` impl.
    #[error("{0}")]
    Custom(String),
}

impl ErrorKind {
    /// The AICL error code an agent should answer this error with.
    pub fn code(&self) -> ErrorCode {
        match self {
            ErrorKind::UnknownDType { .. }
            | ErrorKind::BadShape { .. }
            | ErrorKind::BadBase85Char { .. }
            | ErrorKind::Base85Overflow { .. }
            | ErrorKind::TensorLength { .. }
            | ErrorKind::BadTensor { .. } => ErrorCode::InvalidTensor,
            ErrorKind::MissingField { .. } => ErrorCode::MissingField,
            ErrorKind::BadField { .. }
            | ErrorKind::NotRepresentable { .. }
            | ErrorKind::Custom(_) => ErrorCode::DataFormatError,
            _ => ErrorCode::ProtocolError,
        }
    }
}

/// An AICL error: its [`ErrorKind`], its [`ErrorCode`] and, for errors in text, its [`Position`].
///
/// ```
/// use concord_aicl::{ErrorCode, Value};
///
/// let error = concord_aicl::from_str::<Value>("[l:\n  [i:12x]\n]").unwrap_err();
/// assert_eq!(error.code(), ErrorCode::ProtocolError);
/// let position = error.position().unwrap();
/// assert_eq!((position.text.line, position.text.column, position.offset), (2, 6, 9));
/// assert_eq!(error.to_string(), "invalid integer `12x` at line 2, column 6 (byte 9)");
/// ```
#[derive(Clone, PartialEq)]
pub struct Error {
    inner: Box<Inner>,
}

#[derive(Clone, Debug, PartialEq)]
struct Inner {
    kind: ErrorKind,
    position: Option<Position>,
}

impl Error {
    /// An error without a position (for values that did not come from text).
    pub fn new(kind: ErrorKind) -> Self {
        Error {
            inner: Box::new(Inner {
                kind,
                position: None,
            }),
        }
    }

    /// An error at byte `offset` of `text`.
    pub(crate) fn at(kind: ErrorKind, text: &[u8], offset: usize) -> Self {
        Error::new(kind).with_position(Position::locate(text, offset))
    }

    /// Sets the position unless one is already known.
    pub(crate) fn with_position(mut self, position: Position) -> Self {
        if self.inner.position.is_none() {
            self.inner.position = Some(position);
        }
        self
    }

    /// `None` outside a struct field or map value: AICL has no null.
    pub(crate) fn no_null() -> Self {
        Error::new(ErrorKind::NotRepresentable {
            path: String::new(),
            reason: "AICL has no null: `None` can only be a struct field or map value, which is left out"
                .to_owned(),
        })
    }

    /// An integer outside the signed 64-bit range of `[i:]`.
    pub(crate) fn int_out_of_range(value: impl fmt::Display) -> Self {
        Error::new(ErrorKind::NotRepresentable {
            path: String::new(),
            reason: int_out_of_range_reason(value),
        })
    }

    /// What was wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.inner.kind
    }

    /// The AICL error code to answer with (see [`crate::Message::error_reply`]).
    pub fn code(&self) -> ErrorCode {
        self.inner.kind.code()
    }

    /// Where in the text, for errors found while parsing.
    pub fn position(&self) -> Option<Position> {
        self.inner.position
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner.position {
            Some(position) => write!(f, "{} at {position}", self.inner.kind),
            None => fmt::Display::fmt(&self.inner.kind, f),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("code", &self.code().code())
            .field("kind", &self.inner.kind)
            .field("position", &self.inner.position)
            .finish()
    }
}

impl std::error::Error for Error {}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error::new(kind)
    }
}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Error::new(ErrorKind::Custom(message.to_string()))
    }
}

impl serde::ser::Error for Error {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Error::new(ErrorKind::Custom(message.to_string()))
    }
}

/// Why an integer has no `[i:]` form.
pub(crate) fn int_out_of_range_reason(value: impl fmt::Display) -> String {
    format!("integer {value} is outside the AICL int range (signed 64-bit)")
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_counts_lines_and_characters() {
        let text = "[d:\n  [s:名字]:[i:x]".as_bytes();
        let offset = text.len() - 3;
        let position = Position::locate(text, offset);
        assert_eq!(position.text.line, 2);
        assert_eq!(position.text.column, 12);
        assert_eq!(position.offset, offset);
    }

    #[test]
    fn every_whitepaper_code_round_trips() {
        for code in [1000, 1001, 2001, 3001, 4001, 5003, -1] {
            assert_eq!(ErrorCode::from_code(code).code(), code);
        }
    }
}
