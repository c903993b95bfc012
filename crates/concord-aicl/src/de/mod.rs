//! Reading AICL text: a byte-level parser that is also a serde `Deserializer`.
//!
//! Strings without escapes are borrowed from the input, line and column are only computed when
//! an error is reported, and scalars are parsed in place. Every `Deserialize` type, [`Value`]
//! included, is read through the same code.
//!
//! [`Value`]: crate::Value

mod key;
mod options;
mod scan;

use std::borrow::Cow;

use serde::de::value::CowStrDeserializer;
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use serde::Deserialize;

use crate::error::{Error, ErrorKind, Position, Result};
use crate::special;
use crate::tensor::serde_impl::{TensorDeserializer, TENSOR_TOKEN};
use crate::tensor::Tensor;

pub(crate) use key::KeyDeserializer;
pub use options::{Mode, ParseOptions};

/// Parses a value from strict AICL text (see [`from_str_with`] for options).
///
/// ```
/// use concord_aicl::Value;
///
/// let value: Value = concord_aicl::from_str("[d:[s:name]:[s:iPhone],[s:price]:[f:899.99]]")?;
/// assert_eq!(value.get("price"), Some(&Value::Float(899.99)));
/// # Ok::<(), concord_aicl::Error>(())
/// ```
pub fn from_str<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T> {
    from_str_with(text, &ParseOptions::strict())
}

/// Parses a value from AICL text with the given mode and limits.
pub fn from_str_with<'a, T: Deserialize<'a>>(text: &'a str, options: &ParseOptions) -> Result<T> {
    if text.len() > options.max_size {
        return Err(Error::new(ErrorKind::SizeLimit {
            size: text.len(),
            limit: options.max_size,
        }));
    }
    let mut deserializer = Deserializer::new(text, options.clone());
    let value = T::deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Parses a value from strict AICL bytes, which must be UTF-8.
pub fn from_slice<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T> {
    from_slice_with(bytes, &ParseOptions::strict())
}

/// Parses a value from AICL bytes with the given mode and limits.
pub fn from_slice_with<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    options: &ParseOptions,
) -> Result<T> {
    if bytes.len() > options.max_size {
        return Err(Error::new(ErrorKind::SizeLimit {
            size: bytes.len(),
            limit: options.max_size,
        }));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|error| Error::at(ErrorKind::InvalidUtf8, bytes, error.valid_up_to()))?;
    from_str_with(text, options)
}

/// Byte offset of the key `wanted` in the top-level dictionary of `text` (text that already
/// parsed), to give message-level errors a position.
pub(crate) fn locate_top_level_key(
    text: &str,
    options: &ParseOptions,
    wanted: &str,
) -> Option<usize> {
    let mut de = Deserializer::new(text, options.clone());
    let (Tag::Dict, start) = de.open().ok()? else {
        return None;
    };
    de.depth = 1;
    let mut first = true;
    while next_entry(&mut de, Tag::Dict, start, &mut first).ok()? {
        let key_start = de.pos;
        let (Tag::Str, _) = de.open().ok()? else {
            return None;
        };
        let found = match de.read_string(key_start).ok()? {
            Text::Borrowed(key) => key == wanted,
            Text::Copied(key) => key == wanted,
        };
        if found {
            return Some(key_start);
        }
        de.read_colon(start).ok()?;
        de::IgnoredAny::deserialize(&mut de).ok()?;
    }
    None
}

/// The value tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
    Tensor,
}

impl Tag {
    fn from_byte(byte: u8) -> Option<Tag> {
        Some(match byte {
            b's' => Tag::Str,
            b'i' => Tag::Int,
            b'f' => Tag::Float,
            b'b' => Tag::Bool,
            b'l' => Tag::List,
            b'd' => Tag::Dict,
            b't' => Tag::Tensor,
            _ => return None,
        })
    }

    fn letter(self) -> char {
        match self {
            Tag::Str => 's',
            Tag::Int => 'i',
            Tag::Float => 'f',
            Tag::Bool => 'b',
            Tag::List => 'l',
            Tag::Dict => 'd',
            Tag::Tensor => 't',
        }
    }
}

/// A string read from the input: borrowed when it had no escapes, else in the scratch buffer.
enum Text<'de, 's> {
    Borrowed(&'de str),
    Copied(&'s str),
}

/// The AICL deserializer: reads one value from text. Most code wants [`from_str`] instead.
pub struct Deserializer<'de> {
    text: &'de str,
    bytes: &'de [u8],
    pos: usize,
    depth: usize,
    options: ParseOptions,
    scratch: String,
    /// Where the raw text of each key of the dictionaries being read is (strict duplicate check).
    keys: Vec<(usize, usize)>,
}

impl<'de> Deserializer<'de> {
    /// A deserializer over `text`. The size limit is the caller's to check (see [`from_str_with`]).
    pub fn new(text: &'de str, options: ParseOptions) -> Self {
        let bytes = text.as_bytes();
        let pos = if options.is_strict() {
            0
        } else {
            scan::lenient_start(bytes)
        };
        Deserializer {
            text,
            bytes,
            pos,
            depth: 0,
            options,
            scratch: String::new(),
            keys: Vec::new(),
        }
    }

    /// Checks what follows the value: only whitespace in strict mode, anything in lenient mode.
    pub fn end(&mut self) -> Result<()> {
        if self.options.is_strict() {
            self.skip_whitespace();
            if self.pos < self.bytes.len() {
                return Err(self.error(ErrorKind::TrailingText, self.pos));
            }
        }
        Ok(())
    }

    #[cold]
    fn error(&self, kind: ErrorKind, offset: usize) -> Error {
        Error::at(kind, self.bytes, offset)
    }

    fn position(&self, offset: usize) -> Position {
        Position::locate(self.bytes, offset)
    }

    #[cold]
    fn unclosed(&self, tag: Tag, start: usize) -> Error {
        self.error(
            ErrorKind::Unclosed {
                tag: tag.letter(),
                opened: self.position(start),
            },
            self.bytes.len(),
        )
    }

    #[cold]
    fn expected(&self, expected: &'static str, offset: usize) -> Error {
        if offset >= self.bytes.len() {
            return self.error(ErrorKind::UnexpectedEnd { expected }, offset);
        }
        self.error(
            ErrorKind::Expected {
                expected,
                found: scan::quote(self.text, offset),
            },
            offset,
        )
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skips whitespace, and in lenient mode `#` comments.
    #[inline(always)]
    fn skip_whitespace(&mut self) {
        // Compact text has none: every token byte sorts above `#` and all whitespace below.
        if self.bytes.get(self.pos).is_some_and(|&byte| byte > b'#') {
            return;
        }
        loop {
            match self.bytes.get(self.pos) {
                Some(b' ' | b'\n' | b'\r' | b'\t') => self.pos += 1,
                Some(b'#') if !self.options.is_strict() => {
                    self.pos = memchr::memchr(b'\n', &self.bytes[self.pos..])
                        .map_or(self.bytes.len(), |newline| self.pos + newline);
                }
                _ => return,
            }
        }
    }

    /// Reads `[x:` and returns the tag and the offset of the `[`.
    #[inline(always)]
    fn open(&mut self) -> Result<(Tag, usize)> {
        self.skip_whitespace();
        let start = self.pos;
        match self.bytes.get(start..start + 3) {
            Some(&[b'[', tag, b':']) => match Tag::from_byte(tag) {
                Some(tag) => {
                    self.pos += 3;
                    Ok((tag, start))
                }
                None => Err(self.unknown_tag(start)),
            },
            _ if self.peek() == Some(b'[') => Err(self.unknown_tag(start)),
            _ => Err(self.expected("a value `[x:…]`", start)),
        }
    }

    #[cold]
    fn unknown_tag(&self, start: usize) -> Error {
        let rest = &self.text[start + 1..];
        let tag: String = rest
            .chars()
            .take_while(|c| !matches!(c, ':' | ']' | '[') && !c.is_whitespace())
            .take(16)
            .collect();
        if tag.is_empty() && rest.is_empty() {
            return self.error(
                ErrorKind::UnexpectedEnd {
                    expected: "a type tag after `[`",
                },
                start + 1,
            );
        }
        self.error(ErrorKind::UnknownTag { tag }, start)
    }

    /// Reads the body of a string after `[s:`, through its `]`. Its raw (escaped) text is
    /// what lies between the `[s:` and `self.pos - 1`.
    #[inline(always)]
    fn read_string(&mut self, start: usize) -> Result<Text<'de, '_>> {
        let body = self.pos;
        let end = match special::find(&self.bytes[body..]) {
            Some(index) if self.bytes[body + index] == b']' => body + index,
            Some(index) => return self.read_escaped_string(start, body, body + index),
            None => return Err(self.unclosed(Tag::Str, start)),
        };
        self.pos = end + 1;
        Ok(Text::Borrowed(&self.text[body..end]))
    }

    /// The slow path of [`Self::read_string`]: escapes, or (lenient) literal brackets.
    #[cold]
    fn read_escaped_string(
        &mut self,
        start: usize,
        body: usize,
        mut special: usize,
    ) -> Result<Text<'de, '_>> {
        let strict = self.options.is_strict();
        self.scratch.clear();
        let mut copied = body;
        let mut open_brackets = 0usize;
        loop {
            self.scratch.push_str(&self.text[copied..special]);
            match self.bytes[special] {
                b'\\' => match self.bytes.get(special + 1) {
                    Some(&escaped @ (b'[' | b']' | b'\\')) => {
                        self.scratch.push(char::from(escaped));
                        copied = special + 2;
                    }
                    Some(_) if !strict => {
                        self.scratch.push('\\');
                        copied = special + 1;
                    }
                    Some(_) => {
                        let found = self.text[special + 1..].chars().next().unwrap_or('\\');
                        return Err(self.error(ErrorKind::BadEscape { found }, special));
                    }
                    None => return Err(self.unclosed(Tag::Str, start)),
                },
                b'[' if strict => return Err(self.error(ErrorKind::UnescapedBracket, special)),
                b'[' => {
                    open_brackets += 1;
                    self.scratch.push('[');
                    copied = special + 1;
                }
                _ if open_brackets > 0 => {
                    open_brackets -= 1;
                    self.scratch.push(']');
                    copied = special + 1;
                }
                _ => {
                    self.pos = special + 1;
                    return Ok(Text::Copied(&self.scratch));
                }
            }
            special = match special::find(&self.bytes[copied..]) {
                Some(index) => copied + index,
                None => return Err(self.unclosed(Tag::Str, start)),
            };
        }
    }

    /// The text of a scalar after its tag, through the closing `]` (which is consumed).
    #[inline(always)]
    fn scalar_body(&mut self, tag: Tag, start: usize) -> Result<(&'de str, usize)> {
        let body = self.pos;
        let end = match self.bytes[body..].iter().position(|&byte| byte == b']') {
            Some(length) => body + length,
            None => return Err(self.unclosed(tag, start)),
        };
        self.pos = end + 1;
        let text = &self.text[body..end];
        if self.options.is_strict() {
            Ok((text, body))
        } else {
            let trimmed = text.trim_start();
            Ok((trimmed.trim_end(), body + (text.len() - trimmed.len())))
        }
    }

    #[inline]
    fn read_int(&mut self, start: usize) -> Result<i64> {
        if self.options.is_strict() {
            // Fast path: `-?[1-9][0-9]{0,16}]` or `0]`, which cannot overflow.
            let bytes = &self.bytes[self.pos..];
            let negative = bytes.first() == Some(&b'-');
            let digits = usize::from(negative);
            let mut end = digits;
            let mut magnitude: i64 = 0;
            while let Some(&byte) = bytes.get(end) {
                if !byte.is_ascii_digit() || end - digits == 17 {
                    break;
                }
                magnitude = magnitude * 10 + i64::from(byte - b'0');
                end += 1;
            }
            let count = end - digits;
            if count > 0 && bytes.get(end) == Some(&b']') && (count == 1 || bytes[digits] != b'0') {
                self.pos += end + 1;
                return Ok(if negative { -magnitude } else { magnitude });
            }
        }
        let (text, body) = self.scalar_body(Tag::Int, start)?;
        scan::parse_int(text, self.options.is_strict()).map_err(|kind| self.error(kind, body))
    }

    #[inline]
    fn read_float(&mut self, start: usize) -> Result<f64> {
        if self.options.is_strict() {
            // Fast path: a short decimal directly followed by `]`.
            if let (scan::StrictFloat::Exact(value), read) =
                scan::strict_float_prefix(&self.bytes[self.pos..])
            {
                if self.bytes.get(self.pos + read) == Some(&b']') {
                    self.pos += read + 1;
                    return Ok(value);
                }
            }
        }
        let (text, body) = self.scalar_body(Tag::Float, start)?;
        scan::parse_float(text, self.options.is_strict()).map_err(|kind| self.error(kind, body))
    }

    #[inline]
    fn read_bool(&mut self, start: usize) -> Result<bool> {
        let (text, body) = self.scalar_body(Tag::Bool, start)?;
        scan::parse_bool(text, self.options.is_strict()).map_err(|kind| self.error(kind, body))
    }

    /// Reads `dtype:shape:data]` after `[t:`.
    fn read_tensor(&mut self, start: usize) -> Result<Tensor> {
        let strict = self.options.is_strict();
        let end = memchr::memchr(b']', &self.bytes[self.pos..])
            .map(|length| self.pos + length)
            .ok_or_else(|| self.unclosed(Tag::Tensor, start))?;
        let inner = &self.text[self.pos..end];
        let tensor = scan::parse_tensor(inner, strict, &mut self.scratch)
            .map_err(|(kind, offset)| self.error(kind, self.pos + offset))?;
        self.pos = end + 1;
        Ok(tensor)
    }

    /// Counts one more level of nesting.
    fn enter(&mut self, start: usize) -> Result<()> {
        self.depth += 1;
        if self.depth > self.options.max_depth {
            return Err(self.error(
                ErrorKind::DepthLimit {
                    limit: self.options.max_depth,
                },
                start,
            ));
        }
        Ok(())
    }

    /// Reads the `]` that closes a list or dictionary opened at `start`.
    fn close(&mut self, tag: Tag, start: usize) -> Result<()> {
        self.skip_whitespace();
        match self.peek() {
            Some(b']') => {
                self.pos += 1;
                self.depth -= 1;
                Ok(())
            }
            None => Err(self.unclosed(tag, start)),
            Some(_) => Err(self.expected("`]`", self.pos)),
        }
    }

    /// Reads a value, handing a tensor to `on_tensor` and anything else to the visitor.
    #[inline]
    fn read_value<V, F>(&mut self, visitor: V, on_tensor: F) -> Result<V::Value>
    where
        V: Visitor<'de>,
        F: FnOnce(TensorDeserializer, V) -> Result<V::Value>,
    {
        let (tag, start) = self.open()?;
        let value = match tag {
            Tag::Str => match self.read_string(start)? {
                Text::Borrowed(text) => visitor.visit_borrowed_str(text),
                Text::Copied(text) => visitor.visit_str(text),
            },
            Tag::Int => visitor.visit_i64(self.read_int(start)?),
            Tag::Float => visitor.visit_f64(self.read_float(start)?),
            Tag::Bool => visitor.visit_bool(self.read_bool(start)?),
            Tag::List => {
                self.enter(start)?;
                let value = visitor.visit_seq(ListAccess {
                    de: self,
                    start,
                    first: true,
                });
                match value {
                    Ok(value) => self.close(Tag::List, start).map(|()| value),
                    Err(error) => Err(error),
                }
            }
            Tag::Dict => {
                self.enter(start)?;
                let keys_before = self.keys.len();
                let value = visitor.visit_map(DictAccess {
                    de: self,
                    start,
                    first: true,
                    keys_before,
                    key_start: start,
                    key_bits: 0,
                    large: None,
                });
                self.keys.truncate(keys_before);
                match value {
                    Ok(value) => self.close(Tag::Dict, start).map(|()| value),
                    Err(error) => Err(error),
                }
            }
            Tag::Tensor => {
                let tensor = self.read_tensor(start)?;
                on_tensor(TensorDeserializer::new(tensor), visitor)
            }
        };
        value.map_err(|error| error.with_position(self.position(start)))
    }

    /// Reads `[s:name]:` (the key of a single-entry dictionary holding an enum variant).
    fn read_variant_name(&mut self, start: usize) -> Result<Cow<'de, str>> {
        self.skip_whitespace();
        let key_start = self.pos;
        match self.open() {
            Ok((Tag::Str, _)) => {}
            Ok((other, _)) => {
                return Err(self.error(
                    ErrorKind::NonStringKey {
                        tag: other.letter(),
                    },
                    key_start,
                ))
            }
            Err(_) if self.peek().is_none() => return Err(self.unclosed(Tag::Dict, start)),
            Err(error) => return Err(error),
        }
        let name = match self.read_string(key_start)? {
            Text::Borrowed(text) => Cow::Borrowed(text),
            Text::Copied(text) => Cow::Owned(text.to_owned()),
        };
        self.read_colon(start)?;
        Ok(name)
    }

    #[inline(always)]
    fn read_colon(&mut self, start: usize) -> Result<()> {
        if self.peek() == Some(b':') {
            self.pos += 1;
            return Ok(());
        }
        self.skip_whitespace();
        match self.peek() {
            Some(b':') => {
                self.pos += 1;
                Ok(())
            }
            None => Err(self.unclosed(Tag::Dict, start)),
            Some(_) => Err(self.expected("`:` after the key", self.pos)),
        }
    }
}

/// Separator handling shared by lists and dictionaries: `Ok(true)` when another entry follows.
#[inline(always)]
fn next_entry(de: &mut Deserializer<'_>, tag: Tag, start: usize, first: &mut bool) -> Result<bool> {
    de.skip_whitespace();
    match de.peek() {
        Some(b']') => return Ok(false),
        None => return Err(de.unclosed(tag, start)),
        Some(_) if *first => {
            *first = false;
            return Ok(true);
        }
        Some(b',') => de.pos += 1,
        Some(_) => return Err(de.expected("`,` or `]`", de.pos)),
    }
    de.skip_whitespace();
    match de.peek() {
        Some(b']') if !de.options.is_strict() => Ok(false),
        Some(b']') => Err(de.expected("a value after `,`", de.pos)),
        None => Err(de.unclosed(tag, start)),
        Some(_) => Ok(true),
    }
}

struct ListAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    start: usize,
    first: bool,
}

impl<'de> de::SeqAccess<'de> for ListAccess<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if next_entry(self.de, Tag::List, self.start, &mut self.first)? {
            seed.deserialize(&mut *self.de).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// Above this many keys a dictionary checks duplicates with a hash set instead of a scan.
const LINEAR_KEY_CHECK: usize = 16;

/// The entries of a dictionary, and (strict mode) the duplicate-key check.
struct DictAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    start: usize,
    first: bool,
    /// Where this dictionary's keys start in [`Deserializer::keys`].
    keys_before: usize,
    /// Where the key being read starts.
    key_start: usize,
    /// One bit per key seen, chosen by its fingerprint: a key whose bit is clear is new.
    key_bits: u64,
    /// The keys, once there are more than [`LINEAR_KEY_CHECK`].
    large: Option<std::collections::HashSet<&'de str>>,
}

impl<'de> DictAccess<'_, 'de> {
    /// Reads the separator, the next key and its colon (and checks for a duplicate in strict
    /// mode); `None` at the end of the dictionary. Not generic, so compiled once.
    #[inline(never)]
    fn read_key(&mut self) -> Result<Option<Cow<'de, str>>> {
        if !next_entry(self.de, Tag::Dict, self.start, &mut self.first)? {
            return Ok(None);
        }
        let key_start = self.de.pos;
        self.key_start = key_start;
        if let Some(&[b'[', b's', b':']) = self.de.bytes.get(key_start..key_start + 3) {
            self.de.pos += 3;
        } else {
            match self.de.open()? {
                (Tag::Str, _) => {}
                (other, _) => {
                    return Err(self.de.error(
                        ErrorKind::NonStringKey {
                            tag: other.letter(),
                        },
                        key_start,
                    ))
                }
            }
        }
        let key = match self.de.read_string(key_start)? {
            Text::Borrowed(text) => Cow::Borrowed(text),
            Text::Copied(text) => Cow::Owned(text.to_owned()),
        };
        if self.de.options.is_strict() {
            self.check_duplicate(&key, key_start)?;
        }
        self.de.read_colon(self.start)?;
        Ok(Some(key))
    }

    /// Strict mode: refuses the key just read (`key` decoded; its raw text lies between
    /// `key_start + 3` and `pos - 1`) if this dictionary already had it.
    #[inline(always)]
    fn check_duplicate(&mut self, key: &str, key_start: usize) -> Result<()> {
        let raw = (key_start + 3, self.de.pos - 1);
        // Most keys land on a clear bit: new, and no comparison needed.
        let bit = 1u64 << (fingerprint(key).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58);
        if self.key_bits & bit == 0 && self.large.is_none() {
            self.key_bits |= bit;
            self.de.keys.push(raw);
            if self.de.keys.len() - self.keys_before <= LINEAR_KEY_CHECK {
                return Ok(());
            }
            self.de.keys.pop();
        }
        self.check_duplicate_slow(raw, key_start)
    }

    /// A key whose bit was already set, a large dictionary (a hash set), and reporting a
    /// duplicate. In strict mode escapes are canonical: equal raw text means equal keys.
    #[cold]
    #[inline(never)]
    fn check_duplicate_slow(
        &mut self,
        (start, end): (usize, usize),
        key_start: usize,
    ) -> Result<()> {
        let de = &mut *self.de;
        let text = de.text;
        let raw = &text[start..end];
        let duplicate = match &mut self.large {
            Some(set) => !set.insert(raw),
            None => {
                let seen = &de.keys[self.keys_before..];
                let duplicate = seen.iter().any(|&(start, end)| &text[start..end] == raw);
                if !duplicate {
                    if seen.len() < LINEAR_KEY_CHECK {
                        de.keys.push((start, end));
                    } else {
                        let mut set: std::collections::HashSet<&'de str> =
                            seen.iter().map(|&(start, end)| &text[start..end]).collect();
                        set.insert(raw);
                        self.large = Some(set);
                    }
                }
                duplicate
            }
        };
        if duplicate {
            let key = match de.read_back_key(raw) {
                Cow::Borrowed(key) => key.to_owned(),
                Cow::Owned(key) => key,
            };
            return Err(de.error(ErrorKind::DuplicateKey { key }, key_start));
        }
        Ok(())
    }
}

/// Length, first and last byte of a key: most different keys of a dictionary differ here, so
/// they land on different bits of [`DictAccess::key_bits`] and need no comparison.
#[inline(always)]
fn fingerprint(key: &str) -> u64 {
    let bytes = key.as_bytes();
    let first = bytes.first().copied().unwrap_or(0);
    let last = bytes.last().copied().unwrap_or(0);
    ((bytes.len() as u64) << 16) | (u64::from(first) << 8) | u64::from(last)
}

impl Deserializer<'_> {
    /// The key a raw (strict, escaped) key text stands for, for error messages.
    fn read_back_key<'k>(&self, raw: &'k str) -> Cow<'k, str> {
        if raw.contains('\\') {
            let mut key = String::with_capacity(raw.len());
            let mut escaped = false;
            for c in raw.chars() {
                if c == '\\' && !escaped {
                    escaped = true;
                } else {
                    key.push(c);
                    escaped = false;
                }
            }
            Cow::Owned(key)
        } else {
            Cow::Borrowed(raw)
        }
    }
}

impl<'de> de::MapAccess<'de> for DictAccess<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let Some(key) = self.read_key()? else {
            return Ok(None);
        };
        let key_start = self.key_start;
        seed.deserialize(KeyDeserializer::new(key))
            .map(Some)
            .map_err(|error| error.with_position(self.de.position(key_start)))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(&mut *self.de)
    }
}

/// An enum written as `[d:[s:Variant]:value]`.
struct VariantAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    name: Cow<'de, str>,
}

impl<'de> de::EnumAccess<'de> for VariantAccess<'_, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(mut self, seed: V) -> Result<(V::Value, Self)> {
        let name = std::mem::take(&mut self.name);
        let variant = seed.deserialize(KeyDeserializer::new(name))?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for VariantAccess<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<()> {
        de::Deserialize::deserialize(&mut *self.de)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        seed.deserialize(&mut *self.de)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        de::Deserializer::deserialize_seq(&mut *self.de, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        de::Deserializer::deserialize_map(&mut *self.de, visitor)
    }
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.read_value(visitor, |tensor, visitor| {
            de::Deserializer::deserialize_any(tensor, visitor)
        })
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        // AICL has no null: a value that is present is `Some`; an absent field is `None`.
        visitor.visit_some(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        // `()` is the empty list.
        self.skip_whitespace();
        if self.bytes[self.pos..].starts_with(b"[l:") {
            let start = self.pos;
            self.pos += 3;
            self.skip_whitespace();
            if self.peek() == Some(b']') {
                self.pos += 1;
                return visitor
                    .visit_unit::<Error>()
                    .map_err(|error| error.with_position(self.position(start)));
            }
            self.pos = start;
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        if name == TENSOR_TOKEN {
            self.read_value(visitor, |tensor, visitor| {
                de::Deserializer::deserialize_newtype_struct(tensor, name, visitor)
            })
        } else {
            visitor.visit_newtype_struct(self)
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.read_value(visitor, |tensor, visitor| {
            de::Deserializer::deserialize_seq(tensor, visitor)
        })
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.read_value(visitor, |tensor, visitor| {
            de::Deserializer::deserialize_byte_buf(tensor, visitor)
        })
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let (tag, start) = self.open()?;
        match tag {
            // A unit variant is its name as a string.
            Tag::Str => {
                let name = match self.read_string(start)? {
                    Text::Borrowed(text) => Cow::Borrowed(text),
                    Text::Copied(text) => Cow::Owned(text.to_owned()),
                };
                let variant: CowStrDeserializer<'de, Error> = name.into_deserializer();
                visitor
                    .visit_enum(variant)
                    .map_err(|error| error.with_position(self.position(start)))
            }
            // Any other variant is a dictionary of one entry, `[d:[s:Variant]:value]`.
            Tag::Dict => {
                self.enter(start)?;
                let name = self.read_variant_name(start)?;
                let value = visitor
                    .visit_enum(VariantAccess { de: self, name })
                    .map_err(|error| error.with_position(self.position(start)))?;
                self.skip_whitespace();
                if self.peek() == Some(b',') {
                    return Err(
                        self.expected("`]` (an enum is a dictionary of one entry)", self.pos)
                    );
                }
                self.close(Tag::Dict, start)?;
                Ok(value)
            }
            other => Err(self.error(
                ErrorKind::Custom(format!(
                    "expected an enum variant `[s:Variant]` or `[d:[s:Variant]:…]`, found `[{}:`",
                    other.letter()
                )),
                start,
            )),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        tuple tuple_struct map struct identifier ignored_any
    }
}
