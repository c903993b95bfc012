//! Reading AICL text: a byte-level parser that is also a serde `Deserializer`.
//!
//! Strings without escapes are borrowed from the input, line and column are only computed when
//! an error is reported, and scalars are parsed in place. Every `Deserialize` type, [`Value`]
//! included, is read through the same code.
//!
//! [`Value`]: crate::Value

mod duplicate;
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
use duplicate::{KeyCheck, SeenKey};

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
        if de.read_string(key_start).ok()?.as_str() == wanted {
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

impl<'de> Text<'de, '_> {
    #[inline(always)]
    fn as_str(&self) -> &str {
        match self {
            Text::Borrowed(text) | Text::Copied(text) => text,
        }
    }

    /// The string, borrowed from the input when it can be, else copied out of the scratch buffer.
    #[inline(always)]
    fn into_cow(self) -> Cow<'de, str> {
        match self {
            Text::Borrowed(text) => Cow::Borrowed(text),
            Text::Copied(text) => Cow::Owned(text.to_owned()),
        }
    }
}

/// The AICL deserializer: reads one value from text. Most code wants [`from_str`] instead.
pub struct Deserializer<'de> {
    text: &'de str,
    bytes: &'de [u8],
    pos: usize,
    depth: usize,
    options: ParseOptions,
    scratch: String,
    /// The keys of the dictionaries being read (strict duplicate check).
    keys: Vec<SeenKey>,
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
        // Fast path: `true]` or `false]`, the only strict spellings.
        let rest = &self.bytes[self.pos..];
        if rest.starts_with(b"true]") {
            self.pos += 5;
            return Ok(true);
        }
        if rest.starts_with(b"false]") {
            self.pos += 6;
            return Ok(false);
        }
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
    /// `fields` are the target struct's field names (empty if the target is not a struct).
    #[inline]
    fn read_value<V, F>(
        &mut self,
        visitor: V,
        fields: &'static [&'static str],
        on_tensor: F,
    ) -> Result<V::Value>
    where
        V: Visitor<'de>,
        F: FnOnce(TensorDeserializer, V) -> Result<V::Value>,
    {
        let (tag, start) = self.open()?;
        match tag {
            Tag::Str => self.visit_string(start, visitor),
            Tag::Int => self.visit_int(start, visitor),
            Tag::Float => self.visit_float(start, visitor),
            Tag::Bool => self.visit_bool(start, visitor),
            Tag::List => self.visit_list(start, visitor),
            Tag::Dict => self.visit_dict(start, fields, visitor),
            Tag::Tensor => {
                let tensor = self.read_tensor(start)?;
                on_tensor(TensorDeserializer::new(tensor), visitor)
                    .map_err(|error| error.with_position(self.position(start)))
            }
        }
    }

    /// The fast path of the typed `deserialize_*` methods on compact text: reads `opening`
    /// (`[s:`, `[i:`, …) if it comes next and returns its offset; else reads nothing, and the
    /// caller goes through [`Self::read_value`] (whitespace, another type, errors).
    #[inline(always)]
    fn open_exactly(&mut self, opening: [u8; 3]) -> Option<usize> {
        let start = self.pos;
        let word = self.bytes.get(start..)?.first_chunk::<4>()?;
        let [a, b, c] = opening;
        if u32::from_le_bytes(*word) & 0x00FF_FFFF == u32::from_le_bytes([a, b, c, 0]) {
            self.pos = start + 3;
            Some(start)
        } else {
            None
        }
    }

    /// The visitor's errors get the value's position (unless they have one).
    #[inline(always)]
    fn at_value<T>(&self, start: usize, value: Result<T>) -> Result<T> {
        value.map_err(|error| error.with_position(self.position(start)))
    }

    /// The rest of a string opened at `start`, to the visitor.
    #[inline(always)]
    fn visit_string<V: Visitor<'de>>(&mut self, start: usize, visitor: V) -> Result<V::Value> {
        let value = match self.read_string(start)? {
            Text::Borrowed(text) => visitor.visit_borrowed_str(text),
            Text::Copied(text) => visitor.visit_str(text),
        };
        self.at_value(start, value)
    }

    #[inline(always)]
    fn visit_int<V: Visitor<'de>>(&mut self, start: usize, visitor: V) -> Result<V::Value> {
        let value = visitor.visit_i64(self.read_int(start)?);
        self.at_value(start, value)
    }

    #[inline(always)]
    fn visit_float<V: Visitor<'de>>(&mut self, start: usize, visitor: V) -> Result<V::Value> {
        let value = visitor.visit_f64(self.read_float(start)?);
        self.at_value(start, value)
    }

    #[inline(always)]
    fn visit_bool<V: Visitor<'de>>(&mut self, start: usize, visitor: V) -> Result<V::Value> {
        let value = visitor.visit_bool(self.read_bool(start)?);
        self.at_value(start, value)
    }

    #[inline(always)]
    fn visit_list<V: Visitor<'de>>(&mut self, start: usize, visitor: V) -> Result<V::Value> {
        self.enter(start)?;
        let value = visitor.visit_seq(ListAccess {
            de: self,
            start,
            first: true,
        });
        let value = match value {
            Ok(value) => self.close(Tag::List, start).map(|()| value),
            Err(error) => Err(error),
        };
        self.at_value(start, value)
    }

    /// The entries of a dictionary opened at `start`, to the visitor; `fields` as in
    /// [`Self::read_value`].
    #[inline(always)]
    fn visit_dict<V: Visitor<'de>>(
        &mut self,
        start: usize,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.enter(start)?;
        let keys_before = self.keys.len();
        let value = visitor.visit_map(DictAccess {
            de: self,
            start,
            first: true,
            key_start: start,
            key_check: KeyCheck::new(fields, keys_before),
        });
        self.keys.truncate(keys_before);
        let value = match value {
            Ok(value) => self.close(Tag::Dict, start).map(|()| value),
            Err(error) => Err(error),
        };
        self.at_value(start, value)
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
        let name = self.read_string(key_start)?.into_cow();
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

/// The entries of a dictionary, and (strict mode) the duplicate-key check.
struct DictAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    start: usize,
    first: bool,
    /// Where the key being read starts.
    key_start: usize,
    key_check: KeyCheck<'de>,
}

impl<'de> DictAccess<'_, 'de> {
    /// Reads the separator, the next key and its colon (and checks for a duplicate in strict
    /// mode); `None` at the end of the dictionary. Inlined into each `next_key_seed`: the
    /// uncommon paths are calls.
    #[inline(always)]
    fn read_key(&mut self) -> Result<Option<Cow<'de, str>>> {
        let pos = self.de.pos;
        // Compact text: `,[s:` after the previous value, `[s:` first.
        let key_start = match self.de.bytes.get(pos..pos + 4) {
            Some(&[b',', b'[', b's', b':']) if !self.first => pos + 1,
            Some(&[b'[', b's', b':', _]) if self.first => {
                self.first = false;
                pos
            }
            _ => match self.read_key_opening()? {
                Some(key_start) => key_start,
                None => return Ok(None),
            },
        };
        self.key_start = key_start;
        let body = key_start + 3;
        if let Some(key) = self.read_expected_field(body) {
            return Ok(Some(Cow::Borrowed(key)));
        }
        self.de.pos = body;
        let key = self.de.read_string(key_start)?.into_cow();
        if self.de.options.is_strict() {
            // The raw (escaped) text lies between the `[s:` and the `]`.
            let raw = (key_start + 3, self.de.pos - 1);
            let de = &mut *self.de;
            if self
                .key_check
                .is_duplicate(&mut de.keys, de.text, &key, raw)
            {
                let key = key.into_owned();
                return Err(de.error(ErrorKind::DuplicateKey { key }, key_start));
            }
        }
        self.de.read_colon(self.start)?;
        Ok(Some(key))
    }

    /// Typed structs: reads the key whose text starts at `body` and its `]:` if it is the
    /// field that follows the last one read and new in this dictionary (which is most keys),
    /// and returns the field's name. The next position is known from the field's length, so
    /// parsing goes on while the scan that proves the key holds no `[`, `]` or `\` completes.
    #[inline(always)]
    fn read_expected_field(&mut self, body: usize) -> Option<&'static str> {
        let field = self.key_check.expected_field()?;
        let bytes = self.de.bytes;
        let end = body + field.len();
        let whole = matches!(bytes.get(end..end + 2), Some(&[b']', b':']))
            && duplicate::same_key(bytes.get(body..end)?, field.as_bytes())
            && special::find(&bytes[body..]) == Some(field.len());
        if !whole || !self.key_check.take_expected_field() {
            return None;
        }
        self.de.pos = end + 2;
        Some(field)
    }

    /// The separator and the `[s:` of the next key in any layout (whitespace, comments, a
    /// trailing comma), or the errors; where the key starts, `None` at the end of the
    /// dictionary.
    fn read_key_opening(&mut self) -> Result<Option<usize>> {
        if !next_entry(self.de, Tag::Dict, self.start, &mut self.first)? {
            return Ok(None);
        }
        let key_start = self.de.pos;
        match self.de.open()? {
            (Tag::Str, _) => Ok(Some(key_start)),
            (other, _) => Err(self.de.error(
                ErrorKind::NonStringKey {
                    tag: other.letter(),
                },
                key_start,
            )),
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
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        de::Deserializer::deserialize_struct(&mut *self.de, "", fields, visitor)
    }
}

/// `deserialize_<integer>` methods: `[i:` read directly, anything else through `deserialize_any`
/// (the visitor converts the `i64` or refuses it).
macro_rules! integer_fast_paths {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            match self.open_exactly(*b"[i:") {
                Some(start) => self.visit_int(start, visitor),
                None => self.deserialize_any(visitor),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.read_value(visitor, &[], |tensor, visitor| {
            de::Deserializer::deserialize_any(tensor, visitor)
        })
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.open_exactly(*b"[s:") {
            Some(start) => self.visit_string(start, visitor),
            None => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.open_exactly(*b"[b:") {
            Some(start) => self.visit_bool(start, visitor),
            None => self.deserialize_any(visitor),
        }
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.open_exactly(*b"[f:") {
            Some(start) => self.visit_float(start, visitor),
            None => self.deserialize_any(visitor),
        }
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_f64(visitor)
    }

    integer_fast_paths! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
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
            self.read_value(visitor, &[], |tensor, visitor| {
                de::Deserializer::deserialize_newtype_struct(tensor, name, visitor)
            })
        } else {
            visitor.visit_newtype_struct(self)
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if let Some(start) = self.open_exactly(*b"[l:") {
            return self.visit_list(start, visitor);
        }
        self.read_value(visitor, &[], |tensor, visitor| {
            de::Deserializer::deserialize_seq(tensor, visitor)
        })
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.read_value(visitor, &[], |tensor, visitor| {
            de::Deserializer::deserialize_byte_buf(tensor, visitor)
        })
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        if let Some(start) = self.open_exactly(*b"[d:") {
            return self.visit_dict(start, fields, visitor);
        }
        self.read_value(visitor, fields, |tensor, visitor| {
            de::Deserializer::deserialize_any(tensor, visitor)
        })
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
                let name = self.read_string(start)?.into_cow();
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
        char tuple tuple_struct map identifier ignored_any
    }
}
