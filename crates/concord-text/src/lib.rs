//! Places in text: the one position type every error that points into text carries, and
//! the one locator that turns a byte offset into it.
//!
//! The model is serde_json's `line()`/`column()`: both count from 1, a line ends at `\n`.
//! The column counts characters (Unicode scalar values), not bytes, so it is what an
//! editor shows; [`TextPosition::of_json_error`] converts serde_json's byte column.
//!
//! A leaf crate (no Concord dependency), so that every crate, the sans-IO cores and the
//! leaf codecs included, reports a place in text with the same type;
//! `concord_proto::text` re-exports it.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

use std::fmt;

use serde::Serialize;

/// A place in a text: 1-based line and 1-based column, the column counted in characters.
///
/// Displayed as `line 3, column 7`; [`TextPosition::short`] gives `3:7`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TextPosition {
    /// Line number, starting at 1.
    pub line: usize,
    /// Column number in Unicode scalar values, starting at 1.
    pub column: usize,
}

impl TextPosition {
    /// The start of a text: line 1, column 1.
    pub const START: TextPosition = TextPosition { line: 1, column: 1 };

    /// The position of byte `offset` of `text` (clamped to its end). An offset inside a
    /// character is that character's position. `text` may be bytes that are not all UTF-8:
    /// the column then counts each byte that does not continue a character.
    ///
    /// ```
    /// use concord_text::TextPosition;
    /// let position = TextPosition::locate("ab\n名前: x", 9);
    /// assert_eq!(position, TextPosition { line: 2, column: 3 });
    /// ```
    pub fn locate<T: AsRef<[u8]> + ?Sized>(text: &T, offset: usize) -> TextPosition {
        TextLocator::new(text).locate(offset)
    }

    /// Where serde_json's `error` lies in `text`, the text it was reading, or `None` for an
    /// error that does not come from reading text (serde_json reports line 0 then).
    ///
    /// ```
    /// use concord_text::TextPosition;
    /// let text = "{\"名\": tru}";
    /// let error = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
    /// // serde_json says column 12 (bytes); the character is the 10th of the line.
    /// assert_eq!(error.column(), 12);
    /// assert_eq!(
    ///     TextPosition::of_json_error(text, &error),
    ///     Some(TextPosition { line: 1, column: 10 })
    /// );
    /// ```
    pub fn of_json_error<T: AsRef<[u8]> + ?Sized>(
        text: &T,
        error: &serde_json::Error,
    ) -> Option<TextPosition> {
        json_error_offset(text, error).map(|offset| TextPosition::locate(text, offset))
    }

    /// `line:column`, the compact form reports use.
    pub fn short(self) -> impl fmt::Display {
        Short(self)
    }
}

impl fmt::Display for TextPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

struct Short(TextPosition);

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.0.line, self.0.column)
    }
}

/// The byte offset in `text`, the text serde_json was reading, of the byte where it found
/// `error`, or `None` for an error that does not come from reading text (serde_json reports
/// line 0 then). The offset may fall inside a character (serde_json counts columns in bytes).
///
/// ```
/// let text = "[1,\n 2 x]";
/// let error = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
/// assert_eq!(concord_text::json_error_offset(text, &error), Some(7));
/// ```
pub fn json_error_offset<T: AsRef<[u8]> + ?Sized>(
    text: &T,
    error: &serde_json::Error,
) -> Option<usize> {
    let text = text.as_ref();
    if error.line() == 0 {
        return None;
    }
    let line_start = if error.line() == 1 {
        0
    } else {
        text.iter()
            .enumerate()
            .filter(|&(_, &byte)| byte == b'\n')
            .nth(error.line() - 2)
            .map_or(text.len(), |(newline, _)| newline + 1)
    };
    // serde_json's column is the count of bytes of the line read so far, the last one being
    // the byte it stopped at.
    Some((line_start + error.column().saturating_sub(1)).min(text.len()))
}

/// Turns byte offsets of one text into [`TextPosition`]s, moving forwards from the last
/// offset asked for, so that locating offsets in increasing order costs one pass over the
/// text in all (an earlier offset starts over from the beginning).
#[derive(Clone, Debug)]
pub struct TextLocator<'a> {
    bytes: &'a [u8],
    offset: usize,
    at: TextPosition,
}

impl<'a> TextLocator<'a> {
    /// A locator over `text` (a `str`, or bytes read as UTF-8 where they are), at its start.
    pub fn new<T: AsRef<[u8]> + ?Sized>(text: &'a T) -> Self {
        TextLocator {
            bytes: text.as_ref(),
            offset: 0,
            at: TextPosition::START,
        }
    }

    /// The position of byte `offset` (clamped to the end of the text).
    pub fn locate(&mut self, offset: usize) -> TextPosition {
        let offset = offset.min(self.bytes.len());
        if offset < self.offset {
            self.offset = 0;
            self.at = TextPosition::START;
        }
        for &byte in &self.bytes[self.offset..offset] {
            if byte == b'\n' {
                self.at.line += 1;
                self.at.column = 1;
            } else if byte & 0xC0 != 0x80 {
                // Count characters, not bytes: skip UTF-8 continuation bytes.
                self.at.column += 1;
            }
        }
        self.offset = offset;
        self.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_characters_count_from_one() {
        let text = "ab\nc名d\n\nx";
        let at = |offset| TextPosition::locate(text, offset);
        assert_eq!(at(0), TextPosition { line: 1, column: 1 });
        assert_eq!(at(2), TextPosition { line: 1, column: 3 });
        assert_eq!(at(3), TextPosition { line: 2, column: 1 });
        // 名 is three bytes: d at byte 7 is the third character of line 2.
        assert_eq!(at(7), TextPosition { line: 2, column: 3 });
        assert_eq!(at(9), TextPosition { line: 3, column: 1 });
        assert_eq!(at(10), TextPosition { line: 4, column: 1 });
        assert_eq!(at(1000), TextPosition { line: 4, column: 2 });
    }

    #[test]
    fn the_locator_agrees_going_forwards_and_back() {
        let text = "é\n{\n  \"k\": 1,\n}\n";
        let mut locator = TextLocator::new(text);
        for offset in (0..=text.len()).chain((0..=text.len()).rev()) {
            let expected = TextPosition::locate(text, offset);
            assert_eq!(locator.locate(offset), expected, "offset {offset}");
        }
    }

    #[test]
    fn json_errors_are_located_in_characters_on_their_line() {
        for text in [
            "{\"a\": tru}",
            "[1,\n 2,\n \"é\" x]",
            "\n\n{",
            "{\"名前\":\n\t[1,,]}",
        ] {
            let error = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
            let position = TextPosition::of_json_error(text, &error).unwrap();
            assert_eq!(position.line, error.line(), "{text:?}");
            let line = text.lines().nth(error.line() - 1).unwrap_or("");
            let chars_before = line
                .bytes()
                .take(error.column().saturating_sub(1))
                .filter(|byte| byte & 0xC0 != 0x80)
                .count();
            assert_eq!(position.column, chars_before + 1, "{text:?}");
        }
    }

    #[test]
    fn errors_not_from_text_have_no_position() {
        let error = serde_json::from_value::<u8>(serde_json::json!("x")).unwrap_err();
        assert_eq!(TextPosition::of_json_error("", &error), None);
    }

    #[test]
    fn a_position_displays_long_and_short() {
        let position = TextPosition { line: 3, column: 2 };
        assert_eq!(position.to_string(), "line 3, column 2");
        assert_eq!(position.short().to_string(), "3:2");
    }
}
