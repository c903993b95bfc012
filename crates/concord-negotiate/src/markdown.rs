//! Markdown for protocol and test-case documents, read with a CommonMark parser
//! (`pulldown-cmark`) the way other tools read it: headings (ATX and setext), code
//! blocks, YAML front matter, and JSON values embedded in prose (fenced or bare).

use std::ops::Range;

use concord_proto::{json_error_offset, TextPosition};
use pulldown_cmark::{Event, MetadataBlockKind, Options, Parser, Tag, TagEnd};
use serde_json::Value;

/// One heading and the text under it (up to the next heading of any level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section<'a> {
    /// Heading level (1 for `#`); 0 for text before the first heading.
    pub level: usize,
    /// Heading text, trimmed, without `#` marks or a trailing colon.
    pub title: &'a str,
    /// Body text (between this heading and the next).
    pub body: &'a str,
    /// Byte offset of `body` in the document.
    pub body_offset: usize,
}

fn options() -> Options {
    Options::ENABLE_YAML_STYLE_METADATA_BLOCKS | Options::ENABLE_TABLES
}

/// The document's YAML front matter (`---` … `---` at its very start), as text.
pub(crate) fn front_matter(text: &str) -> Option<&str> {
    let mut in_block = false;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::MetadataBlock(MetadataBlockKind::YamlStyle)) => in_block = true,
            Event::Text(_) if in_block => return text.get(range),
            Event::End(TagEnd::MetadataBlock(_)) => return None,
            _ if !in_block => return None,
            _ => {}
        }
    }
    None
}

/// A top-level `key: value` of YAML front matter, unquoted (block scalars `|`/`>` read
/// to the end of their indented lines).
pub(crate) fn front_matter_value(front_matter: &str, wanted: &str) -> Option<String> {
    let mut lines = front_matter.lines().peekable();
    while let Some(line) = lines.next() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if line.starts_with([' ', '\t']) || name.trim() != wanted {
            continue;
        }
        let value = value.trim();
        if value == "|" || value == ">" || value.starts_with("|-") || value.starts_with(">-") {
            let mut block = Vec::new();
            while let Some(next) = lines.peek() {
                if !next.starts_with([' ', '\t']) && !next.trim().is_empty() {
                    break;
                }
                block.push(next.trim());
                lines.next();
            }
            let joiner = if value.starts_with('>') { " " } else { "\n" };
            return Some(block.join(joiner).trim().to_owned());
        }
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        return (!unquoted.is_empty()).then(|| unquoted.to_owned());
    }
    None
}

/// Splits a document into sections at every heading the CommonMark parser finds (ATX
/// `#`…`######` and setext underlines). Headings inside code blocks are not headings; the
/// front matter belongs to no section.
pub(crate) fn sections(text: &str) -> Vec<Section<'_>> {
    let mut headings: Vec<(usize, Range<usize>)> = Vec::new();
    let mut body_start = 0;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => headings.push((level as usize, range)),
            Event::End(TagEnd::MetadataBlock(_)) => body_start = range.end,
            _ => {}
        }
    }
    let mut sections = Vec::new();
    let first = headings
        .first()
        .map_or(text.len(), |(_, range)| range.start);
    sections.push(Section {
        level: 0,
        title: "",
        body: text.get(body_start..first).unwrap_or(""),
        body_offset: body_start,
    });
    for (index, (level, range)) in headings.iter().enumerate() {
        let end = headings
            .get(index + 1)
            .map_or(text.len(), |(_, next)| next.start);
        let start = range.end.min(end);
        sections.push(Section {
            level: *level,
            title: heading_title(text.get(range.clone()).unwrap_or("")),
            body: text.get(start..end).unwrap_or(""),
            body_offset: start,
        });
    }
    sections.retain(|section| section.level > 0 || !section.body.trim().is_empty());
    sections
}

/// The title of a heading's source text: `## Title ##` or `Title\n=====`.
fn heading_title(source: &str) -> &str {
    let line = source.trim_start().lines().next().unwrap_or("");
    heading(line.trim()).map_or(line.trim(), |(_, title)| title)
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
    /// Byte offset in the searched text where the parser stopped (on a character boundary).
    pub offset: usize,
    pub message: String,
}

impl JsonFault {
    /// Where the fault is in `document`, when the searched text began at byte
    /// `searched_from` of it.
    pub(crate) fn position_in(&self, document: &str, searched_from: usize) -> TextPosition {
        TextPosition::locate(document, searched_from + self.offset)
    }
}

/// The first JSON object or array in `text` (and `null`): the first `{`/`[` that starts a
/// value, else a bare `null` line. Trailing prose after the value is ignored.
pub(crate) fn first_json(text: &str) -> Option<Result<EmbeddedJson, JsonFault>> {
    let start = text.find(['{', '[']).or_else(|| null_line(text))?;
    value_at(text, start)
}

/// The JSON value starting at byte `start` of `text`.
fn value_at(text: &str, start: usize) -> Option<Result<EmbeddedJson, JsonFault>> {
    let mut stream = serde_json::Deserializer::from_str(text.get(start..)?).into_iter::<Value>();
    Some(match stream.next()? {
        Ok(value) => Ok(EmbeddedJson {
            value,
            start,
            end: start + stream.byte_offset(),
        }),
        Err(error) => Err(JsonFault {
            start,
            offset: fault_offset(text, start, &error),
            message: without_position(&error),
        }),
    })
}

/// Every JSON object in `text`, in order: the content of each code block that holds JSON
/// (a block marked `json` that does not parse is a fault; blocks in other languages are
/// skipped), and each bare object in the prose between them that starts a line.
pub(crate) fn json_objects(text: &str) -> Vec<Result<EmbeddedJson, JsonFault>> {
    let mut found = Vec::new();
    let mut code_blocks: Vec<Range<usize>> = Vec::new();
    // The block's language, its range, and the range of its content.
    let mut block: Option<(String, Range<usize>, Option<Range<usize>>)> = None;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let language = match kind {
                    pulldown_cmark::CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_lowercase()
                    }
                    pulldown_cmark::CodeBlockKind::Indented => String::new(),
                };
                block = Some((language, range, None));
            }
            Event::Text(_) => {
                if let Some((_, _, content)) = &mut block {
                    let start = content
                        .as_ref()
                        .map_or(range.start, |content| content.start);
                    *content = Some(start..range.end);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                let Some((language, range, content)) = block.take() else {
                    continue;
                };
                if let Some(content) = content {
                    // Parsed within the block: a value never runs past its closing fence.
                    let body = text.get(content.clone()).unwrap_or("");
                    let offset = body.find(|c: char| !c.is_whitespace());
                    if let Some(offset) = offset.filter(|o| body[*o..].starts_with('{')) {
                        let shift = |start: usize| content.start + start;
                        match value_at(body, offset) {
                            Some(Ok(value)) if value.value.is_object() => {
                                found.push(Ok(EmbeddedJson {
                                    start: shift(value.start),
                                    end: shift(value.end),
                                    value: value.value,
                                }))
                            }
                            Some(Err(fault)) if language.starts_with("json") => {
                                found.push(Err(JsonFault {
                                    start: shift(fault.start),
                                    offset: shift(fault.offset),
                                    message: fault.message,
                                }))
                            }
                            _ => {}
                        }
                    }
                }
                code_blocks.push(range);
            }
            _ => {}
        }
    }
    // Bare objects: a `{` that starts a line outside code blocks.
    let mut offset = 0;
    let mut skip_to = 0;
    // Lines and code blocks both come in document order: one pass over each.
    let mut blocks = code_blocks.iter().peekable();
    for line in text.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        while blocks.next_if(|block| block.end <= line_start).is_some() {}
        let in_block = blocks
            .peek()
            .is_some_and(|block| block.contains(&line_start));
        if line_start < skip_to || in_block {
            continue;
        }
        let Some(brace) = line
            .find(|c: char| !c.is_whitespace())
            .filter(|i| line[*i..].starts_with('{'))
        else {
            continue;
        };
        let start = line_start + brace;
        // Text a parse already went through is not parsed again, so a hostile document of
        // many `{` lines costs one pass, not one per line.
        match value_at(text, start) {
            Some(Ok(value)) => {
                skip_to = value.end;
                found.push(Ok(value));
            }
            Some(Err(fault)) => {
                skip_to = fault.offset;
                found.push(Err(fault));
            }
            None => {}
        }
    }
    found.sort_by_key(|item| match item {
        Ok(value) => value.start,
        Err(fault) => fault.start,
    });
    found
}

/// The byte offset in `text` where parsing a value from byte `start` failed with `error`.
fn fault_offset(text: &str, start: usize, error: &serde_json::Error) -> usize {
    let tail = text.get(start..).unwrap_or("");
    let mut at = start + json_error_offset(tail, error).unwrap_or(0);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
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
    fn setext_headings_and_front_matter() {
        let text = "---\nname: weather\ndescription: >\n  Forecast\n  by city\n---\nIntro\n\nRequest\n-------\nbody\n";
        let matter = front_matter(text).unwrap();
        assert_eq!(
            front_matter_value(matter, "name").as_deref(),
            Some("weather")
        );
        assert_eq!(
            front_matter_value(matter, "description").as_deref(),
            Some("Forecast by city")
        );
        let found = sections(text);
        let titles: Vec<_> = found.iter().map(|s| (s.level, s.title)).collect();
        assert_eq!(titles, vec![(0, ""), (2, "Request")]);
        assert_eq!(found[0].body.trim(), "Intro");
        assert!(front_matter("# no front matter\n").is_none());
    }

    #[test]
    fn finds_every_object_fenced_or_bare() {
        let text = "A schema:\n```json\n{\"a\": 1}\n```\nthen bare:\n{\n  \"b\": [2]\n}\nand\n```js\n{ not: json }\n```\n```json\n{\"c\": }\n```\n";
        let found = json_objects(text);
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(
            found[0].as_ref().unwrap().value,
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            found[1].as_ref().unwrap().value,
            serde_json::json!({"b": [2]})
        );
        assert!(found[2].is_err());
    }

    #[test]
    fn a_broken_object_is_skipped_past_and_the_next_one_found() {
        let text = "{\"a\": [\n{\"inner\": 1},\n{ broken\n}\nprose\n{\"b\": 2}\n";
        let found = json_objects(text);
        let values: Vec<_> = found.iter().filter_map(|item| item.as_ref().ok()).collect();
        assert_eq!(values.len(), 1, "{found:?}");
        assert_eq!(values[0].value, serde_json::json!({"b": 2}));
        // The `{"inner": 1}` line inside the broken value was not parsed on its own.
        assert_eq!(found.len(), 2, "{found:?}");
    }

    #[test]
    fn finds_bare_and_fenced_json() {
        let text = "The schema:\n```json\n{\"a\": [1, 2]}\n```\nafter";
        let found = first_json(text).unwrap().unwrap();
        assert_eq!(found.value, serde_json::json!({"a": [1, 2]}));
        assert_eq!(&text[found.start..found.end], "{\"a\": [1, 2]}");
        let fault = first_json("x {\"a\": }").unwrap().unwrap_err();
        assert_eq!((fault.start, fault.offset), (2, 8));
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
