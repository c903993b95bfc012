//! Just enough markdown for protocol and test-case documents: headings, sections, and
//! JSON values embedded in prose (fenced or bare).

use serde_json::Value;

/// One heading and the lines under it (up to the next heading of any level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section<'a> {
    /// Heading level (1 for `#`); 0 for text before the first heading.
    pub level: usize,
    /// Heading text, trimmed, without a trailing colon.
    pub title: &'a str,
    /// Body text (between this heading and the next).
    pub body: &'a str,
    /// Byte offset of `body` in the document.
    pub body_offset: usize,
}

/// Splits a document into sections at every ATX heading (`#`…`######`). Headings inside
/// code fences are not headings. Leading indentation before `#` is tolerated.
pub(crate) fn sections(text: &str) -> Vec<Section<'_>> {
    let mut sections = Vec::new();
    let mut current = (0usize, "", 0usize); // level, title, body start
    let mut in_fence = false;
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        } else if !in_fence {
            if let Some((level, title)) = heading(trimmed) {
                sections.push(Section {
                    level: current.0,
                    title: current.1,
                    body: &text[current.2..offset],
                    body_offset: current.2,
                });
                current = (level, title, offset + line.len());
            }
        }
        offset += line.len();
    }
    sections.push(Section {
        level: current.0,
        title: current.1,
        body: &text[current.2..],
        body_offset: current.2,
    });
    sections.retain(|section| section.level > 0 || !section.body.trim().is_empty());
    sections
}

/// An ATX heading's level and title, when the trimmed `line` is one.
pub(crate) fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.bytes().take_while(|b| *b == b'#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &line[level..];
    if !rest.is_empty() && !rest.starts_with(' ') && !rest.starts_with('\t') {
        return None;
    }
    let title = rest
        .trim()
        .trim_end_matches(['#', ' '])
        .trim_end_matches([':', '：'])
        .trim();
    Some((level, title))
}

/// Normalises a heading or label for matching: lowercase, spaces and `*_` removed,
/// trailing colons and digits dropped (`测试用例1` → `测试用例`).
pub(crate) fn normalise(title: &str) -> String {
    title
        .chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '*' | '_' | '`'))
        .flat_map(char::to_lowercase)
        .collect::<String>()
        .trim_end_matches([':', '：'])
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .trim_end_matches(['#', '-', '.'])
        .to_owned()
}

/// A JSON value found in prose: the value and the byte range it occupied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EmbeddedJson {
    pub value: Value,
    pub start: usize,
    pub end: usize,
}

/// Where JSON in prose failed to parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsonFault {
    /// Byte offset in the searched text where the value started.
    pub start: usize,
    /// 1-based line and column inside the value.
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl JsonFault {
    /// 1-based line and column of the fault in `document`, when the searched text began at
    /// byte `searched_from` of it.
    pub(crate) fn position_in(&self, document: &str, searched_from: usize) -> (usize, usize) {
        let (line, column) = line_column(document, searched_from + self.start);
        if self.line == 1 {
            (line, column + self.column - 1)
        } else {
            (line + self.line - 1, self.column)
        }
    }
}

/// The first JSON object or array in `text` (and `null`): inside a ```json fence if there
/// is one, else the first `{`/`[` that starts a value, else a bare `null` line. Trailing
/// prose after the value is ignored.
pub(crate) fn first_json(text: &str) -> Option<Result<EmbeddedJson, JsonFault>> {
    let start = text.find(['{', '[']).or_else(|| null_line(text))?;
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    Some(match stream.next() {
        Some(Ok(value)) => Ok(EmbeddedJson {
            value,
            start,
            end: start + stream.byte_offset(),
        }),
        Some(Err(error)) => Err(JsonFault {
            start,
            line: error.line(),
            column: error.column(),
            message: without_position(&error),
        }),
        None => return None,
    })
}

/// serde_json's message without its " at line L column C" suffix (we report our own position).
fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) => message.to_owned(),
        None => text,
    }
}

fn null_line(text: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim() == "null" {
            return Some(offset + line.find('n').unwrap_or(0));
        }
        offset += line.len();
    }
    None
}

/// 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |last| last.chars().count())
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_sections_and_ignores_headings_in_fences() {
        let text = "intro\n# Requirement:\nget it\n## Request\n```\n# not a heading\n```\n#nope\n";
        let found = sections(text);
        let titles: Vec<_> = found.iter().map(|s| (s.level, s.title)).collect();
        assert_eq!(titles, vec![(0, ""), (1, "Requirement"), (2, "Request")]);
        assert_eq!(found[1].body, "get it\n");
        assert!(found[2].body.contains("# not a heading"));
        assert!(found[2].body.contains("#nope"));
    }

    #[test]
    fn finds_bare_and_fenced_json() {
        let text = "The schema:\n```json\n{\"a\": [1, 2]}\n```\nafter";
        let found = first_json(text).unwrap().unwrap();
        assert_eq!(found.value, serde_json::json!({"a": [1, 2]}));
        assert_eq!(&text[found.start..found.end], "{\"a\": [1, 2]}");
        let fault = first_json("x {\"a\": }").unwrap().unwrap_err();
        assert_eq!((fault.start, fault.line), (2, 1));
        assert_eq!(first_json("  null\n").unwrap().unwrap().value, Value::Null);
        assert!(first_json("no json here").is_none());
    }

    #[test]
    fn normalises_labels() {
        assert_eq!(normalise("**测试请求数据**："), "测试请求数据");
        assert_eq!(normalise("Test Case 12"), "testcase");
        assert_eq!(normalise("Request message:"), "requestmessage");
    }
}
