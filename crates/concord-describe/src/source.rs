//! Reading JSON text with positions.
//!
//! serde_json parses fast but forgets where things were and silently keeps the last of two
//! equal keys. This module is a strict RFC 8259 scanner that reports exactly where text
//! breaks (the trailing comma itself, the place a comma is missing), recovers from those two
//! mistakes so one pass reports them all, finds duplicate keys, and later finds the line and
//! column of any JSON pointer without keeping a position for every value.
//!
//! The scanner is iterative (no recursion), so nesting depth costs heap, not stack, and is
//! bounded by a limit.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};

use crate::pointer;
use concord_proto::{TextLocator, TextPosition};

use crate::problem::{Problem, ProblemKind};

/// At most this many recoverable syntax errors are recorded before giving up.
const MAX_RECOVERED: usize = 20;

/// A JSON document read from text, with its duplicate keys.
pub(crate) struct Parsed {
    pub value: Value,
    /// Members whose key repeats an earlier key of the same object: pointer and key position.
    pub duplicates: Vec<(String, TextPosition)>,
}

/// Parses `text` as one JSON value. On failure, returns every syntax problem found (at least one).
pub(crate) fn parse(text: &str, max_depth: usize) -> Result<Parsed, Vec<Problem>> {
    let mut builder = TreeBuilder::default();
    let errors = Scanner::new(text, max_depth).run(&mut builder);
    if !errors.is_empty() {
        return Err(errors);
    }
    match builder.root {
        Some(value) => Ok(Parsed {
            value,
            duplicates: builder.duplicates,
        }),
        None => Err(vec![Problem::new(
            ProblemKind::Syntax,
            String::new(),
            "no JSON value in the text".into(),
        )]),
    }
}

/// Finds the text position of each pointer in `pointers` (or of its nearest present ancestor).
///
/// `text` must be text that [`parse`] accepted.
pub(crate) fn locate(text: &str, pointers: &[&str]) -> HashMap<String, TextPosition> {
    let mut trie = Trie::default();
    let mut slots = 0;
    for pointer in pointers {
        let segments = pointer::segments(pointer);
        // Every ancestor is wanted too, for pointers to absent terms.
        for len in 0..=segments.len() {
            trie.insert(&segments[..len], &mut slots);
        }
    }
    let mut locator = Locator {
        root: &trie,
        containers: Vec::new(),
        found: vec![None; slots],
    };
    // The text was accepted before, so the scanner reports nothing here.
    let _ = Scanner::new(text, usize::MAX).run(&mut locator);
    let found = locator.found;
    let mut positions = HashMap::new();
    for pointer in pointers {
        let segments = pointer::segments(pointer);
        let position = (0..=segments.len())
            .rev()
            .find_map(|len| trie.slot(&segments[..len]).and_then(|slot| found[slot]));
        if let Some(position) = position {
            positions.insert((*pointer).to_owned(), position);
        }
    }
    positions
}

/// Receives what the scanner reads, in document order.
trait Sink {
    fn begin_object(&mut self, at: TextPosition);
    fn begin_array(&mut self, at: TextPosition);
    fn key(&mut self, key: String, at: TextPosition);
    fn scalar(&mut self, value: Value, at: TextPosition);
    fn end(&mut self);
    /// Pointer to the innermost value being read, for syntax problems.
    fn pointer(&self) -> String;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Container {
    Object,
    Array,
}

struct Frame {
    container: Container,
    /// True once the first member or element has started.
    started: bool,
    /// Where the container opened, for "unterminated" messages.
    opened_at: TextPosition,
}

/// A syntax problem that ends the scan.
struct Fatal;

struct Scanner<'t> {
    text: &'t str,
    bytes: &'t [u8],
    index: usize,
    locator: TextLocator<'t>,
    max_depth: usize,
    stack: Vec<Frame>,
    /// Where the last complete value ended (for "missing comma" errors).
    last_end: TextPosition,
    errors: Vec<Problem>,
}

impl<'t> Scanner<'t> {
    fn new(text: &'t str, max_depth: usize) -> Self {
        Self {
            text,
            bytes: text.as_bytes(),
            index: 0,
            locator: TextLocator::new(text),
            max_depth,
            stack: Vec::new(),
            last_end: TextPosition::START,
            errors: Vec::new(),
        }
    }

    /// Scans the whole text, feeding `sink`; returns the syntax problems found.
    fn run(mut self, sink: &mut dyn Sink) -> Vec<Problem> {
        if self.bytes.starts_with("\u{feff}".as_bytes()) {
            let at = self.here();
            self.error(
                sink,
                ProblemKind::Syntax,
                at,
                "the text starts with a byte order mark (U+FEFF); JSON text must not".into(),
            );
            return self.errors;
        }
        if self.scan(sink).is_ok() {
            self.skip_whitespace();
            if let Some(byte) = self.peek() {
                let at = self.here();
                let found = self.describe(byte);
                self.error(
                    sink,
                    ProblemKind::Syntax,
                    at,
                    format!("unexpected {found} after the end of the JSON value"),
                );
            }
        }
        self.errors
    }

    fn scan(&mut self, sink: &mut dyn Sink) -> Result<(), Fatal> {
        self.value(sink)?;
        while let Some(frame) = self.stack.last() {
            let (container, started, opened_at) = (frame.container, frame.started, frame.opened_at);
            self.skip_whitespace();
            let close = match container {
                Container::Object => b'}',
                Container::Array => b']',
            };
            if !started {
                if self.peek() == Some(close) {
                    self.bump();
                    self.close(sink);
                } else {
                    self.mark_started();
                    self.element(container, sink)?;
                }
                continue;
            }
            match self.peek() {
                Some(b',') => {
                    let comma_at = self.here();
                    self.bump();
                    self.skip_whitespace();
                    if self.peek() == Some(close) {
                        let what = if container == Container::Object {
                            "`}`"
                        } else {
                            "`]`"
                        };
                        self.recoverable(sink, comma_at, format!("trailing comma before {what}"))?;
                        self.bump();
                        self.close(sink);
                    } else {
                        self.element(container, sink)?;
                    }
                }
                Some(byte) if byte == close => {
                    self.bump();
                    self.close(sink);
                }
                Some(byte) if self.starts_element(container, byte) => {
                    let next_at = self.here();
                    let what = match container {
                        Container::Object => "between object members",
                        Container::Array => "between array elements",
                    };
                    let at = self.last_end;
                    self.recoverable(
                        sink,
                        at,
                        format!(
                            "missing `,` {what} (the next one starts at line {}, column {})",
                            next_at.line, next_at.column
                        ),
                    )?;
                    self.element(container, sink)?;
                }
                Some(byte) => {
                    let at = self.here();
                    let found = self.describe(byte);
                    let expected = match container {
                        Container::Object => "`,` or `}` after an object member",
                        Container::Array => "`,` or `]` after an array element",
                    };
                    return Err(self.fatal(
                        sink,
                        at,
                        format!("expected {expected}, found {found}"),
                    ));
                }
                None => {
                    let at = self.here();
                    let what = match container {
                        Container::Object => "object",
                        Container::Array => "array",
                    };
                    return Err(self.fatal(
                        sink,
                        at,
                        format!(
                            "unterminated {what} (opened at line {}, column {})",
                            opened_at.line, opened_at.column
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn starts_element(&self, container: Container, byte: u8) -> bool {
        match container {
            Container::Object => byte == b'"',
            Container::Array => matches!(
                byte,
                b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n'
            ),
        }
    }

    fn mark_started(&mut self) {
        if let Some(frame) = self.stack.last_mut() {
            frame.started = true;
        }
    }

    /// An object member (`"key": value`) or an array element.
    fn element(&mut self, container: Container, sink: &mut dyn Sink) -> Result<(), Fatal> {
        if container == Container::Object {
            self.skip_whitespace();
            let at = self.here();
            match self.peek() {
                Some(b'"') => {}
                Some(byte) => {
                    let found = self.describe(byte);
                    return Err(self.fatal(
                        sink,
                        at,
                        format!("expected a string key, found {found}"),
                    ));
                }
                None => {
                    return Err(self.fatal(
                        sink,
                        at,
                        "expected a string key, found the end of the text".into(),
                    ))
                }
            }
            let key = self.string(sink)?;
            sink.key(key, at);
            self.skip_whitespace();
            if self.peek() == Some(b':') {
                self.bump();
            } else {
                let at = self.here();
                let found = self
                    .peek()
                    .map_or_else(|| "the end of the text".to_owned(), |b| self.describe(b));
                return Err(self.fatal(
                    sink,
                    at,
                    format!("expected `:` after the key, found {found}"),
                ));
            }
        }
        self.value(sink)
    }

    fn value(&mut self, sink: &mut dyn Sink) -> Result<(), Fatal> {
        self.skip_whitespace();
        let at = self.here();
        let Some(byte) = self.peek() else {
            return Err(self.fatal(
                sink,
                at,
                "expected a JSON value, found the end of the text".into(),
            ));
        };
        match byte {
            b'{' | b'[' => {
                if self.stack.len() >= self.max_depth {
                    let message = format!(
                        "arrays and objects nest deeper than {} levels",
                        self.max_depth
                    );
                    self.errors
                        .push(self.problem(sink, ProblemKind::TooDeep, at, message));
                    return Err(Fatal);
                }
                self.bump();
                let container = if byte == b'{' {
                    sink.begin_object(at);
                    Container::Object
                } else {
                    sink.begin_array(at);
                    Container::Array
                };
                self.stack.push(Frame {
                    container,
                    started: false,
                    opened_at: at,
                });
                return Ok(());
            }
            b'"' => {
                let text = self.string(sink)?;
                sink.scalar(Value::String(text), at);
            }
            b'-' | b'0'..=b'9' => {
                let number = self.number(sink)?;
                sink.scalar(Value::Number(number), at);
            }
            b't' => self.literal(sink, "true", Value::Bool(true), at)?,
            b'f' => self.literal(sink, "false", Value::Bool(false), at)?,
            b'n' => self.literal(sink, "null", Value::Null, at)?,
            _ => {
                let found = self.describe(byte);
                return Err(self.fatal(sink, at, format!("expected a JSON value, found {found}")));
            }
        }
        self.last_end = self.here();
        Ok(())
    }

    fn close(&mut self, sink: &mut dyn Sink) {
        self.stack.pop();
        sink.end();
        self.last_end = self.here();
    }

    fn literal(
        &mut self,
        sink: &mut dyn Sink,
        word: &str,
        value: Value,
        at: TextPosition,
    ) -> Result<(), Fatal> {
        if self.bytes.get(self.index..self.index + word.len()) == Some(word.as_bytes()) {
            self.index += word.len();
            sink.scalar(value, at);
            Ok(())
        } else {
            Err(self.fatal(sink, at, format!("invalid literal: expected `{word}`")))
        }
    }

    /// Reads a string starting at the opening quote; returns its decoded text.
    fn string(&mut self, sink: &mut dyn Sink) -> Result<String, Fatal> {
        let opened_at = self.here();
        self.bump(); // the opening quote
        let mut text = String::new();
        loop {
            let run_start = self.index;
            while let Some(&byte) = self.bytes.get(self.index) {
                if byte == b'"' || byte == b'\\' || byte < 0x20 {
                    break;
                }
                self.index += 1;
            }
            text.push_str(self.text.get(run_start..self.index).unwrap_or_default());
            match self.peek() {
                Some(b'"') => {
                    self.bump();
                    return Ok(text);
                }
                Some(b'\\') => self.escape(sink, &mut text)?,
                Some(byte) => {
                    let at = self.here();
                    return Err(self.fatal(
                        sink,
                        at,
                        format!("control character U+{byte:04X} in a string; write it as an escape such as \\n or \\u{byte:04x}"),
                    ));
                }
                None => {
                    let at = self.here();
                    return Err(self.fatal(
                        sink,
                        at,
                        format!(
                            "unterminated string (opened at line {}, column {})",
                            opened_at.line, opened_at.column
                        ),
                    ));
                }
            }
        }
    }

    fn escape(&mut self, sink: &mut dyn Sink, text: &mut String) -> Result<(), Fatal> {
        let at = self.here();
        self.bump(); // the backslash
        let decoded = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.bump();
                let unit = self.hex4(sink, at)?;
                let scalar = match unit {
                    0xD800..=0xDBFF => {
                        if self.bytes.get(self.index..self.index + 2) != Some(b"\\u") {
                            return Err(self.fatal(sink, at, format!("unpaired surrogate \\u{unit:04x}: a low surrogate escape must follow")));
                        }
                        self.index += 2;
                        let low = self.hex4(sink, at)?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(self.fatal(sink, at, format!("unpaired surrogate \\u{unit:04x}: \\u{low:04x} is not a low surrogate")));
                        }
                        0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
                    }
                    0xDC00..=0xDFFF => {
                        return Err(self.fatal(
                            sink,
                            at,
                            format!("unpaired low surrogate \\u{unit:04x}"),
                        ));
                    }
                    other => u32::from(other),
                };
                match char::from_u32(scalar) {
                    Some(c) => text.push(c),
                    None => {
                        return Err(self.fatal(
                            sink,
                            at,
                            format!("\\u escape names no character (U+{scalar:X})"),
                        ))
                    }
                }
                return Ok(());
            }
            Some(byte) => {
                let found = self.describe(byte);
                return Err(self.fatal(
                    sink,
                    at,
                    format!("invalid escape: backslash followed by {found}"),
                ));
            }
            None => {
                return Err(self.fatal(
                    sink,
                    at,
                    "unterminated escape at the end of the text".into(),
                ))
            }
        };
        self.bump();
        text.push(decoded);
        Ok(())
    }

    fn hex4(&mut self, sink: &mut dyn Sink, escape_at: TextPosition) -> Result<u16, Fatal> {
        let digits = self
            .text
            .get(self.index..self.index + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
        match digits.and_then(|d| u16::from_str_radix(d, 16).ok()) {
            Some(unit) => {
                self.index += 4;
                Ok(unit)
            }
            None => Err(self.fatal(
                sink,
                escape_at,
                "\\u must be followed by four hex digits".into(),
            )),
        }
    }

    fn number(&mut self, sink: &mut dyn Sink) -> Result<Number, Fatal> {
        let start = self.index;
        let at = self.here();
        let negative = self.peek() == Some(b'-');
        if negative {
            self.bump();
        }
        match self.peek() {
            Some(b'0') => {
                self.bump();
                if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    return Err(self.fatal(sink, at, "numbers must not have leading zeros".into()));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.fatal(sink, at, "expected a digit after `-`".into())),
        }
        let mut integral = true;
        if self.peek() == Some(b'.') {
            integral = false;
            self.bump();
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.fatal(
                    sink,
                    at,
                    "expected a digit after the decimal point".into(),
                ));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            integral = false;
            self.bump();
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.bump();
            }
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.fatal(sink, at, "expected a digit in the exponent".into()));
            }
            self.digits();
        }
        let literal = self.text.get(start..self.index).unwrap_or_default();
        if integral {
            let exact = if negative {
                literal.parse::<i64>().ok().map(Number::from)
            } else {
                literal.parse::<u64>().ok().map(Number::from)
            };
            if let Some(number) = exact {
                return Ok(number);
            }
        }
        match literal.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(number) => Ok(number),
            None => Err(self.fatal(
                sink,
                at,
                format!("number {literal} is out of range for a 64-bit float"),
            )),
        }
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.bump();
        }
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.bump();
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.index).copied()
    }

    fn bump(&mut self) {
        self.index += 1;
    }

    fn here(&mut self) -> TextPosition {
        self.locator.locate(self.index)
    }

    /// Names the character starting at the current index for messages.
    fn describe(&self, byte: u8) -> String {
        let c = self
            .text
            .get(self.index..)
            .and_then(|rest| rest.chars().next())
            .unwrap_or(char::from(byte));
        if c.is_control() || c.is_whitespace() {
            format!("U+{:04X}", u32::from(c))
        } else {
            format!("`{c}`")
        }
    }

    fn problem(
        &self,
        sink: &dyn Sink,
        kind: ProblemKind,
        at: TextPosition,
        message: String,
    ) -> Problem {
        let mut problem = Problem::new(kind, sink.pointer(), message);
        problem.position = Some(at);
        problem
    }

    fn error(&mut self, sink: &dyn Sink, kind: ProblemKind, at: TextPosition, message: String) {
        let problem = self.problem(sink, kind, at, message);
        self.errors.push(problem);
    }

    fn fatal(&mut self, sink: &dyn Sink, at: TextPosition, message: String) -> Fatal {
        self.error(sink, ProblemKind::Syntax, at, message);
        Fatal
    }

    /// Records a mistake the scanner can read past; gives up after [`MAX_RECOVERED`].
    fn recoverable(
        &mut self,
        sink: &dyn Sink,
        at: TextPosition,
        message: String,
    ) -> Result<(), Fatal> {
        self.error(sink, ProblemKind::Syntax, at, message);
        if self.errors.len() >= MAX_RECOVERED {
            Err(Fatal)
        } else {
            Ok(())
        }
    }
}

/// Builds the `serde_json::Value` and notes duplicate keys.
#[derive(Default)]
struct TreeBuilder {
    stack: Vec<Partial>,
    root: Option<Value>,
    duplicates: Vec<(String, TextPosition)>,
}

enum Partial {
    Object {
        map: Map<String, Value>,
        /// The key being read, or after its value, the last key read.
        key: Option<(String, TextPosition)>,
    },
    Array(Vec<Value>),
}

impl TreeBuilder {
    fn attach(&mut self, value: Value) {
        if let Some(Partial::Object {
            map,
            key: Some((key, at)),
        }) = self.stack.last()
        {
            if map.contains_key(key) {
                let at = *at;
                self.duplicates.push((self.pointer(), at));
            }
        }
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Partial::Array(items)) => items.push(value),
            Some(Partial::Object { map, key }) => {
                // The key stays as the last member's, for syntax problems between members.
                if let Some((key, _)) = key {
                    map.insert(key.clone(), value);
                }
            }
        }
    }

    /// Pointer to the innermost container.
    fn container_pointer(&self) -> String {
        let mut pointer = String::new();
        for (depth, partial) in self.stack.iter().enumerate() {
            if depth + 1 == self.stack.len() {
                break;
            }
            match partial {
                Partial::Object {
                    key: Some((key, _)),
                    ..
                } => {
                    pointer.push('/');
                    pointer.push_str(&pointer::escape(key));
                }
                Partial::Array(items) => {
                    pointer.push('/');
                    pointer.push_str(&items.len().to_string());
                }
                Partial::Object { key: None, .. } => {}
            }
        }
        pointer
    }
}

impl Sink for TreeBuilder {
    fn begin_object(&mut self, _at: TextPosition) {
        self.stack.push(Partial::Object {
            map: Map::new(),
            key: None,
        });
    }

    fn begin_array(&mut self, _at: TextPosition) {
        self.stack.push(Partial::Array(Vec::new()));
    }

    fn key(&mut self, key: String, at: TextPosition) {
        if let Some(Partial::Object { key: slot, .. }) = self.stack.last_mut() {
            *slot = Some((key, at));
        }
    }

    fn scalar(&mut self, value: Value, _at: TextPosition) {
        self.attach(value);
    }

    fn end(&mut self) {
        let value = match self.stack.pop() {
            Some(Partial::Object { map, .. }) => Value::Object(map),
            Some(Partial::Array(items)) => Value::Array(items),
            None => return,
        };
        self.attach(value);
    }

    fn pointer(&self) -> String {
        let mut pointer = self.container_pointer();
        match self.stack.last() {
            Some(Partial::Object {
                key: Some((key, _)),
                ..
            }) => {
                pointer.push('/');
                pointer.push_str(&pointer::escape(key));
            }
            Some(Partial::Array(items)) => {
                pointer.push('/');
                pointer.push_str(&items.len().to_string());
            }
            _ => {}
        }
        pointer
    }
}

/// The pointers the locator looks for, as a trie of unescaped segments.
#[derive(Default)]
struct Trie {
    slot: Option<usize>,
    children: HashMap<String, Trie>,
}

impl Trie {
    fn insert(&mut self, segments: &[String], slots: &mut usize) {
        let mut node = self;
        for segment in segments {
            node = node.children.entry(segment.clone()).or_default();
        }
        if node.slot.is_none() {
            node.slot = Some(*slots);
            *slots += 1;
        }
    }

    fn slot(&self, segments: &[String]) -> Option<usize> {
        let mut node = self;
        for segment in segments {
            node = node.children.get(segment)?;
        }
        node.slot
    }
}

/// Records where wanted values start, following the trie so unwanted subtrees cost nothing
/// but the scan.
struct Locator<'a> {
    root: &'a Trie,
    containers: Vec<Open<'a>>,
    found: Vec<Option<TextPosition>>,
}

/// A container the locator is inside.
struct Open<'a> {
    container: Container,
    /// Its trie node; None when nothing inside it is wanted.
    node: Option<&'a Trie>,
    /// Elements started so far (arrays).
    count: usize,
    /// Trie node of the member whose key was just read (objects).
    member: Option<&'a Trie>,
}

impl<'a> Locator<'a> {
    /// The trie node of the value starting now.
    fn next_node(&mut self) -> Option<&'a Trie> {
        let Some(open) = self.containers.last_mut() else {
            return Some(self.root);
        };
        match open.container {
            Container::Object => open.member.take(),
            Container::Array => {
                let index = open.count;
                open.count += 1;
                open.node.and_then(|n| n.children.get(&index.to_string()))
            }
        }
    }

    fn start(&mut self, at: TextPosition) -> Option<&'a Trie> {
        let node = self.next_node();
        if let Some(slot) = node.and_then(|n| n.slot) {
            if let Some(found) = self.found.get_mut(slot) {
                *found = Some(at);
            }
        }
        node
    }

    fn open(&mut self, container: Container, at: TextPosition) {
        let node = self.start(at);
        self.containers.push(Open {
            container,
            node,
            count: 0,
            member: None,
        });
    }
}

impl Sink for Locator<'_> {
    fn begin_object(&mut self, at: TextPosition) {
        self.open(Container::Object, at);
    }

    fn begin_array(&mut self, at: TextPosition) {
        self.open(Container::Array, at);
    }

    fn key(&mut self, key: String, _at: TextPosition) {
        if let Some(open) = self.containers.last_mut() {
            open.member = open.node.and_then(|n| n.children.get(&key));
        }
    }

    fn scalar(&mut self, _value: Value, at: TextPosition) {
        self.start(at);
    }

    fn end(&mut self) {
        self.containers.pop();
    }

    fn pointer(&self) -> String {
        String::new()
    }
}
