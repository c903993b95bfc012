//! What the validator found: problems, their kinds, where they are, and the report that holds them.

use std::fmt;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

pub use concord_proto::TextPosition;

/// Whether a problem makes the document invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The document is not a valid description.
    Error,
    /// The document is valid, but probably not what its author meant.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// The kind of a problem. Each kind has a fixed [`Severity`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProblemKind {
    /// The text is not JSON (RFC 8259), or not UTF-8.
    Syntax,
    /// The input is larger than the validator's byte limit.
    TooLarge,
    /// Arrays and objects are nested deeper than the validator's depth limit.
    TooDeep,
    /// An object has the same key twice.
    DuplicateKey,
    /// A required term is absent.
    MissingTerm,
    /// A term has the wrong JSON type (for example an object where a string belongs).
    WrongType,
    /// A term that must not be empty is empty.
    Empty,
    /// A value is outside the set or format the term allows.
    InvalidValue,
    /// A value is not a URI, or an `href` cannot be resolved against `base`.
    InvalidUri,
    /// `@context` is not a TD 1.1 context.
    InvalidContext,
    /// The document is a Thing Model (or uses Thing Model terms), not a Thing Description.
    ThingModel,
    /// A form's `op` is not an operation of its affordance type.
    InvalidOperation,
    /// A security scheme's `scheme` is neither a TD 1.1 scheme nor a prefixed extension scheme.
    UnknownSecurityScheme,
    /// A security name (in `security`, a form, or a `combo`) is not in `securityDefinitions`.
    UndefinedSecurity,
    /// An additional response names a schema that is not in `schemaDefinitions`.
    UndefinedSchema,
    /// An `enum`, `const` or `default` value is not of the schema's declared `type`.
    ValueTypeMismatch,
    /// A list that must hold distinct values repeats one.
    DuplicateValue,
    /// More than one link has `rel: "type"`.
    MultipleTypeLinks,
    /// A prefixed term is used but its prefix is not declared in `@context`.
    UndeclaredPrefix,
    /// Two terms contradict each other.
    Conflict,
    /// A data schema is not a well-formed JSON Schema (draft-07).
    InvalidSchema,
    /// Warning: a data schema of type `array` without `items`.
    ArrayWithoutItems,
    /// Warning: a data schema of type `object` without `properties`.
    ObjectWithoutProperties,
    /// Warning: a data schema has both `enum` and `const`.
    EnumWithConst,
    /// Warning: `readOnly`/`writeOnly`/`observable` contradict a property's operations.
    ReadWriteConflict,
    /// Warning: an additional response leaves `success` or `contentType` to their defaults.
    IncompleteAdditionalResponse,
    /// Warning: a `rel: "type"` link names a Thing Model that was not fetched, so conformance
    /// to it is not checked.
    ThingModelNotChecked,
    /// Warning: a relative `href` with no `base`; it resolves against wherever the document
    /// was fetched from.
    RelativeHrefWithoutBase,
    /// Warning: a capability name this version does not know; peers ignore it.
    UnknownCapability,
    /// Warning: a term in the `concord:` namespace that this version does not know.
    UnknownExtensionTerm,
    /// Warning: the `lmos` prefix is bound to another IRI than the LMOS v1 namespace.
    UnexpectedNamespace,
    /// Warning: the validator stopped recording problems at its limit.
    TooManyProblems,
}

impl ProblemKind {
    /// Whether problems of this kind make a document invalid.
    pub fn severity(self) -> Severity {
        use ProblemKind::*;
        match self {
            ArrayWithoutItems
            | ObjectWithoutProperties
            | EnumWithConst
            | ReadWriteConflict
            | IncompleteAdditionalResponse
            | ThingModelNotChecked
            | RelativeHrefWithoutBase
            | UnknownCapability
            | UnknownExtensionTerm
            | UnexpectedNamespace
            | TooManyProblems => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// The kind's stable kebab-case name, as printed by the CLI and in JSON output.
    pub fn name(self) -> &'static str {
        use ProblemKind::*;
        match self {
            Syntax => "syntax",
            TooLarge => "too-large",
            TooDeep => "too-deep",
            DuplicateKey => "duplicate-key",
            MissingTerm => "missing-term",
            WrongType => "wrong-type",
            Empty => "empty",
            InvalidValue => "invalid-value",
            InvalidUri => "invalid-uri",
            InvalidContext => "invalid-context",
            ThingModel => "thing-model",
            InvalidOperation => "invalid-operation",
            UnknownSecurityScheme => "unknown-security-scheme",
            UndefinedSecurity => "undefined-security",
            UndefinedSchema => "undefined-schema",
            ValueTypeMismatch => "value-type-mismatch",
            DuplicateValue => "duplicate-value",
            MultipleTypeLinks => "multiple-type-links",
            UndeclaredPrefix => "undeclared-prefix",
            Conflict => "conflict",
            InvalidSchema => "invalid-schema",
            ArrayWithoutItems => "array-without-items",
            ObjectWithoutProperties => "object-without-properties",
            EnumWithConst => "enum-with-const",
            ReadWriteConflict => "read-write-conflict",
            IncompleteAdditionalResponse => "incomplete-additional-response",
            ThingModelNotChecked => "thing-model-not-checked",
            RelativeHrefWithoutBase => "relative-href-without-base",
            UnknownCapability => "unknown-capability",
            UnknownExtensionTerm => "unknown-extension-term",
            UnexpectedNamespace => "unexpected-namespace",
            TooManyProblems => "too-many-problems",
        }
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for ProblemKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// One thing the validator found.
///
/// `pointer` is an RFC 6901 JSON pointer to the offending value (`""` is the whole document);
/// for a missing term it points where the term should be. `position` is where that value
/// (or, for a missing term, its nearest present ancestor) starts in the text; it is `None`
/// only for documents that did not come from text ([`crate::Thing::validate`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    /// What is wrong.
    pub kind: ProblemKind,
    /// JSON pointer to where it is wrong.
    pub pointer: String,
    /// Line and column in the text, when the document came from text.
    pub position: Option<TextPosition>,
    /// A sentence naming what was expected and what was found.
    pub message: String,
}

impl Problem {
    pub(crate) fn new(kind: ProblemKind, pointer: String, message: String) -> Self {
        Self {
            kind,
            pointer,
            position: None,
            message,
        }
    }

    /// Error or warning: fixed by the kind.
    pub fn severity(&self) -> Severity {
        self.kind.severity()
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(position) = self.position {
            write!(f, "{}: ", position.short())?;
        }
        write!(f, "{}[{}]", self.severity(), self.kind)?;
        if self.pointer.is_empty() {
            write!(f, " at the document root")?;
        } else {
            write!(f, " at {}", self.pointer)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl Serialize for Problem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut state = serializer.serialize_struct("Problem", 6)?;
        state.serialize_field("severity", &self.severity())?;
        state.serialize_field("kind", &self.kind)?;
        state.serialize_field("pointer", &self.pointer)?;
        state.serialize_field("line", &self.position.map(|p| p.line))?;
        state.serialize_field("column", &self.position.map(|p| p.column))?;
        state.serialize_field("message", &self.message)?;
        state.end()
    }
}

/// Everything the validator found in one document, errors and warnings kept apart.
///
/// ```
/// let report = concord_describe::validate(br#"{"title": "x"}"#);
/// assert!(!report.is_valid());
/// assert!(report.errors().any(|p| p.pointer == "/@context"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    errors: Vec<Problem>,
    warnings: Vec<Problem>,
}

impl Report {
    pub(crate) fn from_problems(problems: Vec<Problem>) -> Self {
        let (errors, warnings) = problems
            .into_iter()
            .partition(|p| p.severity() == Severity::Error);
        Self { errors, warnings }
    }

    /// True when there are no errors (warnings allowed).
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// The errors, in document order.
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.errors.iter()
    }

    /// The warnings, in document order.
    pub fn warnings(&self) -> impl Iterator<Item = &Problem> {
        self.warnings.iter()
    }

    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.errors.len()
    }

    /// Number of warnings.
    pub fn warning_count(&self) -> usize {
        self.warnings.len()
    }

    /// The warnings, taking ownership.
    pub fn into_warnings(self) -> Vec<Problem> {
        self.warnings
    }
}

impl fmt::Display for Report {
    /// One problem per line, errors first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for problem in self.errors.iter().chain(&self.warnings) {
            writeln!(f, "{problem}")?;
        }
        Ok(())
    }
}

impl Serialize for Report {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut state = serializer.serialize_struct("Report", 3)?;
        state.serialize_field("valid", &self.is_valid())?;
        state.serialize_field("errors", &self.errors)?;
        state.serialize_field("warnings", &self.warnings)?;
        state.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_place_kind_and_pointer() {
        let mut problem = Problem::new(
            ProblemKind::MissingTerm,
            "/version/instance".into(),
            "`instance` is required".into(),
        );
        problem.position = Some(TextPosition {
            line: 12,
            column: 16,
        });
        assert_eq!(
            problem.to_string(),
            "12:16: error[missing-term] at /version/instance: `instance` is required"
        );
    }

    #[test]
    fn report_separates_errors_and_warnings() {
        let report = Report::from_problems(vec![
            Problem::new(ProblemKind::ArrayWithoutItems, "/a".into(), "w".into()),
            Problem::new(ProblemKind::Syntax, "".into(), "e".into()),
        ]);
        assert!(!report.is_valid());
        assert_eq!(report.error_count(), 1);
        assert_eq!(report.warning_count(), 1);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["errors"][0]["kind"], "syntax");
        assert_eq!(json["warnings"][0]["severity"], "warning");
    }
}
