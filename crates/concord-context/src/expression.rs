//! Variable references (`†kind.path`) and expressions joining them with `||` and `&&`.

use std::fmt;
use std::str::FromStr;

use crate::identity::{Kind, NameError};

/// The sigil that starts a variable reference (U+2020 DAGGER).
pub const DAGGER: char = '†';

/// A reference to a value in the context: `†<kind>.<path>`.
///
/// The path is a list of segments separated by `.`: a segment names an
/// object key, or, when the value at that point is an array, an element by
/// its decimal index (`†state.items.0.name`). A reference with no path
/// (`†state`) names the whole merged value of the kind.
///
/// ```
/// use concord_context::Reference;
///
/// let reference: Reference = "†input.user.name".parse()?;
/// assert_eq!(reference.kind().as_str(), "input");
/// assert_eq!(reference.path(), ["user", "name"]);
/// assert_eq!(reference.to_string(), "†input.user.name");
/// # Ok::<(), concord_context::ExpressionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    kind: Kind,
    path: Vec<String>,
}

impl Reference {
    /// A reference to `path` inside the data of `kind`.
    ///
    /// Each segment must be non-empty and free of `.`, whitespace, `|`, `&`,
    /// `†` and control characters, so that the reference prints back to text
    /// that parses to the same reference.
    pub fn new(kind: Kind, path: Vec<String>) -> Result<Self, ExpressionError> {
        let reference = Self { kind, path };
        let text = reference.to_string();
        for (index, segment) in reference.path.iter().enumerate() {
            let at = byte_offset_of_segment(&reference, index);
            if segment.is_empty() {
                return Err(ExpressionError::new(
                    &text,
                    at,
                    ExpressionErrorKind::EmptySegment,
                ));
            }
            if let Some(ch) = segment.chars().find(|&ch| !is_segment_char(ch)) {
                return Err(ExpressionError::new(
                    &text,
                    at,
                    ExpressionErrorKind::UnexpectedChar(ch),
                ));
            }
        }
        Ok(reference)
    }

    /// Parses exactly one reference (no `||` or `&&`); surrounding whitespace is allowed.
    pub fn parse(text: &str) -> Result<Self, ExpressionError> {
        let mut expression = Expression::parse(text)?;
        if let [conjunction] = expression.alternatives.as_mut_slice() {
            if conjunction.len() == 1 {
                if let Some(reference) = conjunction.pop() {
                    return Ok(reference);
                }
            }
        }
        Err(ExpressionError::new(
            text,
            0,
            ExpressionErrorKind::NotASingleReference,
        ))
    }

    /// The kind whose data this reference reads.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// The path inside that data; empty for the whole value.
    pub fn path(&self) -> &[String] {
        &self.path
    }

    /// This reference cut to its first `len` segments (`†kind` for 0).
    pub(crate) fn prefix_text(&self, len: usize) -> String {
        let mut text = format!("{DAGGER}{}", self.kind);
        for segment in self.path.iter().take(len) {
            text.push('.');
            text.push_str(segment);
        }
        text
    }
}

fn byte_offset_of_segment(reference: &Reference, index: usize) -> usize {
    let mut at = DAGGER.len_utf8() + reference.kind.as_str().len();
    for segment in reference.path.iter().take(index) {
        at += 1 + segment.len();
    }
    at + 1
}

impl FromStr for Reference {
    type Err = ExpressionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.prefix_text(self.path.len()))
    }
}

/// References joined by `&&` (all must exist; the value is the last one's)
/// and `||` (the first alternative that resolves wins).
///
/// `&&` binds tighter than `||`, as in JavaScript: `†a && †b || †c` is
/// `(†a && †b) || †c`. There are no parentheses.
///
/// ```
/// use concord_context::Expression;
///
/// let expression: Expression = "†input.name || †state.name && †state.ready".parse()?;
/// assert_eq!(expression.alternatives().len(), 2);
/// assert_eq!(expression.alternatives()[1].len(), 2);
/// assert_eq!(expression.to_string(), "†input.name || †state.name && †state.ready");
/// # Ok::<(), concord_context::ExpressionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Expression {
    alternatives: Vec<Vec<Reference>>,
}

impl Expression {
    /// Parses an expression; whitespace around references and operators is allowed.
    pub fn parse(text: &str) -> Result<Self, ExpressionError> {
        Parser { text, at: 0 }.expression()
    }

    /// Whether a JSON string is meant as an expression: it starts with `†`.
    ///
    /// Inside JSON values (tool-call arguments), such strings are parsed and
    /// resolved; any other string is a literal.
    pub fn is_expression_text(text: &str) -> bool {
        text.starts_with(DAGGER)
    }

    /// The `||` alternatives, each a non-empty `&&` conjunction of references.
    pub fn alternatives(&self) -> &[Vec<Reference>] {
        &self.alternatives
    }

    /// Every reference, in the order written.
    pub fn references(&self) -> impl Iterator<Item = &Reference> {
        self.alternatives.iter().flatten()
    }
}

impl From<Reference> for Expression {
    fn from(reference: Reference) -> Self {
        Self {
            alternatives: vec![vec![reference]],
        }
    }
}

impl FromStr for Expression {
    type Err = ExpressionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl fmt::Display for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, conjunction) in self.alternatives.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            for (j, reference) in conjunction.iter().enumerate() {
                if j > 0 {
                    f.write_str(" && ")?;
                }
                write!(f, "{reference}")?;
            }
        }
        Ok(())
    }
}

/// Why text is not a variable expression, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid variable expression `{expression}` at byte {at}: {kind}")]
pub struct ExpressionError {
    /// The text that failed to parse.
    pub expression: String,
    /// Byte offset of the problem in that text.
    pub at: usize,
    /// What was wrong.
    pub kind: ExpressionErrorKind,
}

impl ExpressionError {
    fn new(expression: &str, at: usize, kind: ExpressionErrorKind) -> Self {
        Self {
            expression: expression.to_owned(),
            at,
            kind,
        }
    }
}

/// What was wrong in a variable expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExpressionErrorKind {
    /// Nothing but whitespace.
    #[error("the expression is empty")]
    Empty,
    /// A reference does not start with `†`.
    #[error("expected `†` to start a reference")]
    ExpectedDagger,
    /// The kind after `†` is not a valid kind name.
    #[error("{0}")]
    BadKind(NameError),
    /// `..`, or a `.` at the end of a reference.
    #[error("empty path segment")]
    EmptySegment,
    /// A character that cannot appear here.
    #[error("unexpected {0:?}")]
    UnexpectedChar(char),
    /// `||` or `&&` with no reference after it.
    #[error("operator with no reference after it")]
    DanglingOperator,
    /// `|` or `&` not doubled.
    #[error("single `{0}`: write `||` or `&&`")]
    SingleOperatorChar(char),
    /// An `||`/`&&` expression where exactly one reference is required.
    #[error("expected a single reference, without `||` or `&&`")]
    NotASingleReference,
}

fn is_delimiter(ch: char) -> bool {
    ch == '.' || ch == '|' || ch == '&' || ch.is_whitespace()
}

fn is_segment_char(ch: char) -> bool {
    !is_delimiter(ch) && ch != DAGGER && !ch.is_control()
}

struct Parser<'t> {
    text: &'t str,
    at: usize,
}

impl Parser<'_> {
    fn error(&self, at: usize, kind: ExpressionErrorKind) -> ExpressionError {
        ExpressionError::new(self.text, at, kind)
    }

    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn skip_whitespace(&mut self) {
        while let Some(ch) = self.peek().filter(|ch| ch.is_whitespace()) {
            self.at += ch.len_utf8();
        }
    }

    /// Consumes `op` (`||` or `&&`) if it is next.
    fn operator(&mut self, op: &str) -> Result<bool, ExpressionError> {
        if self.text[self.at..].starts_with(op) {
            self.at += op.len();
            return Ok(true);
        }
        match self.peek() {
            Some(ch) if op.starts_with(ch) => {
                Err(self.error(self.at, ExpressionErrorKind::SingleOperatorChar(ch)))
            }
            _ => Ok(false),
        }
    }

    /// Consumes characters while `keep` holds; returns the run.
    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> &str {
        let start = self.at;
        while let Some(ch) = self.peek().filter(|&ch| keep(ch)) {
            self.at += ch.len_utf8();
        }
        &self.text[start..self.at]
    }

    fn expression(mut self) -> Result<Expression, ExpressionError> {
        self.skip_whitespace();
        if self.at == self.text.len() {
            return Err(self.error(0, ExpressionErrorKind::Empty));
        }
        let mut alternatives = Vec::new();
        let mut conjunction = Vec::new();
        loop {
            self.skip_whitespace();
            if self.at == self.text.len() {
                return Err(self.error(self.at, ExpressionErrorKind::DanglingOperator));
            }
            conjunction.push(self.reference()?);
            self.skip_whitespace();
            if self.operator("&&")? {
                continue;
            }
            if self.operator("||")? {
                alternatives.push(std::mem::take(&mut conjunction));
                continue;
            }
            match self.peek() {
                None => break,
                Some(ch) => {
                    return Err(self.error(self.at, ExpressionErrorKind::UnexpectedChar(ch)))
                }
            }
        }
        alternatives.push(conjunction);
        Ok(Expression { alternatives })
    }

    fn reference(&mut self) -> Result<Reference, ExpressionError> {
        if self.peek() != Some(DAGGER) {
            return Err(self.error(self.at, ExpressionErrorKind::ExpectedDagger));
        }
        self.at += DAGGER.len_utf8();
        let kind_at = self.at;
        let kind_text = self.take_while(|ch| !is_delimiter(ch));
        let kind = Kind::new(kind_text)
            .map_err(|error| self.error(kind_at, ExpressionErrorKind::BadKind(error)))?;
        let mut path = Vec::new();
        while self.peek() == Some('.') {
            self.at += 1;
            let segment_at = self.at;
            let segment = self.take_while(|ch| !is_delimiter(ch));
            if segment.is_empty() {
                return Err(self.error(segment_at, ExpressionErrorKind::EmptySegment));
            }
            if let Some((offset, ch)) = segment.char_indices().find(|&(_, ch)| !is_segment_char(ch))
            {
                return Err(
                    self.error(segment_at + offset, ExpressionErrorKind::UnexpectedChar(ch))
                );
            }
            path.push(segment.to_owned());
        }
        Ok(Reference { kind, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_precedence_and_prints_canonically() {
        let expression = Expression::parse("  †a.x&&†b ||†c.0  ").unwrap();
        assert_eq!(expression.alternatives().len(), 2);
        assert_eq!(expression.to_string(), "†a.x && †b || †c.0");
    }

    #[test]
    fn rejects_malformed_text_with_positions() {
        let cases = [
            ("", 0, ExpressionErrorKind::Empty),
            ("input.x", 0, ExpressionErrorKind::ExpectedDagger),
            ("†input..x", 9, ExpressionErrorKind::EmptySegment),
            ("†input.x.", 11, ExpressionErrorKind::EmptySegment),
            ("†a ||", 7, ExpressionErrorKind::DanglingOperator),
            ("†a | †b", 5, ExpressionErrorKind::SingleOperatorChar('|')),
            ("†a †b", 5, ExpressionErrorKind::UnexpectedChar('†')),
            ("†a.b†c", 6, ExpressionErrorKind::UnexpectedChar('†')),
        ];
        for (text, at, kind) in cases {
            let error = Expression::parse(text).unwrap_err();
            assert_eq!((error.at, &error.kind), (at, &kind), "{text}");
        }
        assert!(matches!(
            Expression::parse("†user name").unwrap_err().kind,
            ExpressionErrorKind::UnexpectedChar('n')
        ));
        assert!(matches!(
            Expression::parse("†(x)").unwrap_err().kind,
            ExpressionErrorKind::BadKind(_)
        ));
    }

    #[test]
    fn single_reference_rejects_operators() {
        assert_eq!(
            Reference::parse("†a || †b").unwrap_err().kind,
            ExpressionErrorKind::NotASingleReference
        );
        let reference = Reference::parse(" †state ").unwrap();
        assert!(reference.path().is_empty());
    }

    #[test]
    fn constructed_references_must_print_back() {
        let kind = Kind::new("state").unwrap();
        assert!(Reference::new(kind.clone(), vec!["a".into(), "b c".into()]).is_err());
        assert!(Reference::new(kind.clone(), vec![String::new()]).is_err());
        let reference = Reference::new(kind, vec!["a".into(), "0".into()]).unwrap();
        assert_eq!(Reference::parse(&reference.to_string()).unwrap(), reference);
    }
}
