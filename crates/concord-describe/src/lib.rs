//! Agent descriptions for Concord: the Eclipse LMOS Agent Description Format, which is a
//! W3C WoT Thing Description (TD) 1.1 with `lmos:` terms, plus Concord's own extension
//! (`concord:`, bound to [`CONCORD_NAMESPACE`]) naming an agent's meta-protocol endpoint,
//! versions, capabilities and consensus protocols.
//!
//! An agent's description is how others discover it: its actions and their input/output
//! JSON Schemas (what protocol negotiation starts from), its security, and how to reach its
//! meta-protocol. This crate
//!
//! - **validates** descriptions strictly: the TD 1.1 rules, plus what the official TD JSON
//!   Schema cannot check (security names that must be defined, duplicate JSON keys,
//!   `enum`/`const` values of the declared type, at most one `rel: "type"` link, `href`
//!   resolution against `base`, the `concord:` terms). Every problem has a JSON pointer and
//!   a line and column; warnings are kept apart from errors ([`validate`], [`Validator`]);
//! - **reads** them into a typed model that keeps every unknown term, so documents
//!   round-trip ([`parse`], [`Thing`]);
//! - **builds** them, valid by construction ([`ThingBuilder`]).
//!
//! ```
//! use concord_describe::{ActionBuilder, MetaProtocol, ThingBuilder};
//! use concord_proto::Capability;
//! use serde_json::json;
//!
//! let meta = MetaProtocol::new("wss://weather.example.com/concord")
//!     .with_capabilities([Capability::TestCasesNegotiation].into_iter().collect());
//! let thing = ThingBuilder::agent("WeatherAgent")
//!     .id("urn:uuid:6f1d3a7a-1f97-4e6b-b45f-f3c2e1c84c77")
//!     .action(
//!         "getWeather",
//!         ActionBuilder::new("https://weather.example.com/actions/getWeather")
//!             .input(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
//!             .output(json!({"type": "string"})),
//!     )
//!     .meta_protocol(meta)
//!     .build()?;
//!
//! let text = serde_json::to_vec_pretty(&thing).unwrap();
//! let read = concord_describe::parse(&text)?;
//! assert_eq!(read.thing, thing);
//! assert!(read.thing.meta_protocol.unwrap().supports(Capability::TestCasesNegotiation));
//! # Ok::<(), concord_describe::InvalidDescription>(())
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod builder;
mod model;
mod pointer;
mod problem;
mod source;
mod validate;
mod vocab;

use serde_json::Value;

pub use builder::{ActionBuilder, EventBuilder, PropertyBuilder, ThingBuilder};
pub use model::*;
pub use problem::{Problem, ProblemKind, Report, Severity, TextPosition};
pub use vocab::{
    CONCORD_NAMESPACE, CONCORD_PREFIX, LMOS_AGENT, LMOS_NAMESPACE, LMOS_PREFIX, LMOS_TOOL,
    MAX_ACTION_LEASE_SECS, TD_1_0_CONTEXT, TD_1_1_CONTEXT,
};

/// Validates a description with the default limits. See [`Validator::validate`].
///
/// ```
/// let report = concord_describe::validate(b"{\n  \"title\": \"x\",\n}");
/// let error = report.errors().next().unwrap();
/// assert_eq!(error.message, "trailing comma before `}`");
/// assert_eq!((error.position.unwrap().line, error.position.unwrap().column), (2, 15));
/// ```
pub fn validate(input: &[u8]) -> Report {
    Validator::default().validate(input)
}

/// Validates and reads a description with the default limits. See [`Validator::parse`].
pub fn parse(input: &[u8]) -> Result<Validated, InvalidDescription> {
    Validator::default().parse(input)
}

/// Validates descriptions, within limits on what it will read.
#[derive(Clone, Debug)]
pub struct Validator {
    max_bytes: usize,
    max_depth: usize,
    max_problems: usize,
}

impl Default for Validator {
    /// 1 MiB of text, 64 levels of nesting, 200 problems.
    fn default() -> Self {
        Self {
            max_bytes: 1 << 20,
            max_depth: 64,
            max_problems: 200,
        }
    }
}

impl Validator {
    /// A validator with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rejects larger inputs without reading them (default 1 MiB).
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Rejects arrays and objects nested deeper than this (default 64).
    ///
    /// Real descriptions nest a dozen levels. The limit also bounds the stack reading into
    /// the model takes: serde's flattened `extensions` buffer each level, so the model needs
    /// more stack per level than plain JSON; at 64 levels a 2 MiB thread stack (a tokio
    /// worker's) has room to spare even in debug builds. Raise it only with a bigger stack.
    pub fn max_depth(mut self, max_depth: usize) -> Self {
        self.max_depth = max_depth;
        self
    }

    /// Stops recording problems after this many (default 200).
    pub fn max_problems(mut self, max_problems: usize) -> Self {
        self.max_problems = max_problems.max(1);
        self
    }

    /// Checks the bytes of a description: UTF-8, JSON syntax (all recoverable mistakes at
    /// once), duplicate keys, then the description rules. Problems come in text order.
    pub fn validate(&self, input: &[u8]) -> Report {
        self.check(input).0
    }

    /// Checks a description and, when it has no errors, reads it into the typed model.
    pub fn parse(&self, input: &[u8]) -> Result<Validated, InvalidDescription> {
        let (report, document) = self.check(input);
        match document {
            Some(document) if report.is_valid() => read_thing(document, report),
            _ => Err(InvalidDescription { report }),
        }
    }

    fn check(&self, input: &[u8]) -> (Report, Option<Value>) {
        if input.len() > self.max_bytes {
            let problem = Problem::new(
                ProblemKind::TooLarge,
                String::new(),
                format!(
                    "the description is {} bytes; the limit is {}",
                    input.len(),
                    self.max_bytes
                ),
            );
            return (Report::from_problems(vec![problem]), None);
        }
        let text = match std::str::from_utf8(input) {
            Ok(text) => text,
            Err(error) => {
                return (
                    Report::from_problems(vec![utf8_problem(input, &error)]),
                    None,
                )
            }
        };
        let parsed = match source::parse(text, self.max_depth) {
            Ok(parsed) => parsed,
            Err(problems) => return (Report::from_problems(problems), None),
        };
        let mut problems: Vec<Problem> = parsed
            .duplicates
            .iter()
            .map(|(pointer, at)| {
                let key = pointer::segments(pointer).pop().unwrap_or_default();
                let mut problem = Problem::new(
                    ProblemKind::DuplicateKey,
                    pointer.clone(),
                    format!("key `{key}` appears more than once in this object; JSON readers disagree on which value counts"),
                );
                problem.position = Some(*at);
                problem
            })
            .collect();
        let mut found = validate::check(&parsed.value, self.max_depth, self.max_problems);
        if !found.is_empty() {
            let pointers: Vec<&str> = found.iter().map(|p| p.pointer.as_str()).collect();
            let positions = source::locate(text, &pointers);
            for problem in &mut found {
                problem.position = positions.get(&problem.pointer).copied();
            }
        }
        problems.append(&mut found);
        // Text order; problems about the same place keep the order they were found in.
        problems.sort_by_key(|p| {
            p.position
                .map_or((usize::MAX, usize::MAX), |at| (at.line, at.column))
        });
        (Report::from_problems(problems), Some(parsed.value))
    }
}

impl Thing {
    /// Checks this description with the same rules as [`validate`] (positions are `None`:
    /// there is no text). Use it after changing a parsed or built description.
    pub fn validate(&self) -> Report {
        let limits = Validator::default();
        match serde_json::to_value(self) {
            Ok(document) => Report::from_problems(validate::check(
                &document,
                limits.max_depth,
                limits.max_problems,
            )),
            Err(error) => Report::from_problems(vec![Problem::new(
                ProblemKind::WrongType,
                String::new(),
                format!("the description cannot be written as JSON: {error}"),
            )]),
        }
    }
}

/// A description that passed validation, read into the model, with any warnings.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Validated {
    /// The description.
    pub thing: Thing,
    /// The validation report: no errors, possibly warnings.
    pub report: Report,
}

/// A description with errors; the report says what and where.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}", summary(.report))]
pub struct InvalidDescription {
    /// Every problem found.
    pub report: Report,
}

fn summary(report: &Report) -> String {
    let count = report.error_count();
    match report.errors().next() {
        Some(first) if count > 1 => {
            format!("invalid agent description ({count} errors), first: {first}")
        }
        Some(first) => format!("invalid agent description: {first}"),
        None => "invalid agent description".to_owned(),
    }
}

/// Reads a valid document into the model (a failure here is a bug: the validator accepted
/// something the model cannot hold).
pub(crate) fn read_thing(document: Value, report: Report) -> Result<Validated, InvalidDescription> {
    match serde_json::from_value::<Thing>(document) {
        Ok(thing) => Ok(Validated { thing, report }),
        Err(error) => Err(InvalidDescription {
            report: Report::from_problems(vec![Problem::new(
                ProblemKind::WrongType,
                String::new(),
                format!(
                    "the description passed validation but cannot be read into the model: {error}"
                ),
            )]),
        }),
    }
}

/// Where UTF-8 decoding failed, as a syntax problem.
fn utf8_problem(input: &[u8], error: &std::str::Utf8Error) -> Problem {
    let valid = &input[..error.valid_up_to()];
    let position = TextPosition::locate(valid, valid.len());
    let byte = input.get(error.valid_up_to()).copied().unwrap_or_default();
    let mut problem = Problem::new(
        ProblemKind::Syntax,
        String::new(),
        format!(
            "the text is not UTF-8: byte 0x{byte:02x} at offset {} starts no valid character",
            error.valid_up_to()
        ),
    );
    problem.position = Some(position);
    problem
}
