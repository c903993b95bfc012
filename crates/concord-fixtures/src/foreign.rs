//! A corpus of foreign candidate protocols: documents written the way other agents write
//! them (the Python SDK's LLM prompt as GPT-4o, Qwen, Llama, Gemini or Mistral follow it;
//! Agora protocol documents with YAML front matter; the seeds' Chinese layout and their
//! "based on an existing protocol" form), each with the decision a Concord provider should
//! reach on it, and the provider's actions they are written against.
//!
//! The documents and the manifest live in `crates/concord-negotiate/tests/foreign/`
//! ([`DIRECTORY`]); they are compiled in, so the corpus needs no file access at run time.
//!
//! ```
//! use concord_fixtures::foreign::{corpus, Expectation};
//!
//! let corpus = corpus();
//! assert!(corpus.candidates.len() >= 18);
//! let first = &corpus.candidates[0];
//! assert_eq!(first.expect, Expectation::Accept);
//! let action = corpus.action(&first.action).unwrap();
//! let example = &action.examples[0];
//! assert_eq!(action.answer(&example.input), Some(&example.output));
//! assert_eq!(action.answer(&action.not_found), None);
//! ```

use std::fmt;

use concord_negotiate::ActionSpec;
use serde::Deserialize;
use serde_json::Value;

/// Where the corpus lives, relative to the workspace root.
pub const DIRECTORY: &str = "crates/concord-negotiate/tests/foreign";

/// The manifest (`corpus.json`): the provider's actions and, per candidate document, what it
/// imitates and the decision expected.
pub const MANIFEST: &str = include_str!("../../concord-negotiate/tests/foreign/corpus.json");

/// The candidate documents, each as `(file name, text)`.
macro_rules! documents {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!("../../concord-negotiate/tests/foreign/", $file)))),*]
    };
}

/// Every candidate document compiled in, as `(file name, text)`, in file-name order.
pub const DOCUMENTS: &[(&str, &str)] = documents![
    "01-sdk-product-info.md",
    "02-qwen-weather-snake-case.md",
    "03-llama-currency-nested-params-defs.md",
    "04-seed-layout-stock-quote-zh.md",
    "05-sdk-translate-zh.md",
    "06-agora-weather-flat-status.md",
    "07-agora-currency-kebab-case.md",
    "08-gpt-order-defs-refs.md",
    "09-llama-calendar-arguments.md",
    "10-qwen-stock-flat-response.md",
    "11-mistral-product-id-kind-status.md",
    "12-zh-order-snake-case.md",
    "13-frontmatter-translate-two-response-schemas.md",
    "14-gemini-calendar-example-first.md",
    "15-seed-layout-product-sdk-envelope-zh.md",
    "16-seed-based-on-uri-zh.md",
    "17-prose-only-stock-quote.md",
    "18-request-schema-only-translate.md",
    "19-integer-customer-id-order.md",
    "20-counter-weather-station-id.md",
    "21-reject-stock-market-cap.md",
    "22-counter-order-items-as-text.md",
    "23-reject-unknown-action.md",
    "24-llm-currency-status-words-nullable-error.md",
    "25-agora-product-status-words.md",
];

/// The whole corpus: the provider's actions and the candidates written against them.
#[derive(Debug, Clone, PartialEq)]
pub struct Corpus {
    /// The provider's actions, as it publishes them.
    pub actions: Vec<ForeignAction>,
    /// The candidate documents, in manifest order.
    pub candidates: Vec<ForeignCandidate>,
}

impl Corpus {
    /// The action named `name`.
    pub fn action(&self, name: &str) -> Option<&ForeignAction> {
        self.actions.iter().find(|action| action.spec.name == name)
    }

    /// Every action's published spec, as a provider serving all of them holds them.
    pub fn specs(&self) -> Vec<ActionSpec> {
        self.actions
            .iter()
            .map(|action| action.spec.clone())
            .collect()
    }

    /// The candidates expected to be accepted as written or countered (those that end in
    /// an agreement).
    pub fn agreeing(&self) -> impl Iterator<Item = &ForeignCandidate> {
        self.candidates
            .iter()
            .filter(|candidate| !matches!(candidate.expect, Expectation::Reject { .. }))
    }
}

/// One of the provider's actions with the calls it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct ForeignAction {
    /// Name, description and JSON Schemas, as published (camelCase).
    pub spec: ActionSpec,
    /// Inputs the action answers and the outputs it gives them; each output satisfies the
    /// output schema in full.
    pub examples: Vec<Example>,
    /// An input valid against the input schema that matches no example: the action
    /// answers it with 404.
    pub not_found: Value,
}

impl ForeignAction {
    /// The output for exactly this input, if one of the examples has it.
    pub fn answer(&self, input: &Value) -> Option<&Value> {
        self.examples
            .iter()
            .find(|example| example.input == *input)
            .map(|example| &example.output)
    }

    /// The action as a `concord-node` backend: an example's output for an input equal to
    /// that example's input, else a 404 naming the action.
    #[cfg(feature = "node")]
    pub fn backend(
        &self,
    ) -> impl Fn(Value) -> std::future::Ready<Result<Value, concord_node::ActionError>>
           + Send
           + Sync
           + 'static {
        let action = self.clone();
        move |input: Value| {
            std::future::ready(action.answer(&input).cloned().ok_or_else(|| {
                concord_node::ActionError::not_found(format!(
                    "`{}` has no answer for {input}",
                    action.spec.name
                ))
            }))
        }
    }
}

/// One call of an action: an input and the output it gives.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Example {
    /// The input, valid against the action's input schema.
    pub input: Value,
    /// The output, valid against the action's output schema.
    pub output: Value,
}

/// The decision a Concord provider should reach on a candidate, with no LLM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expectation {
    /// Accepted as written: the envelope is inferred and the fields map onto the action.
    Accept,
    /// Countered with our canonical protocol (and a modification summary), which the
    /// requester then accepts.
    Counter,
    /// Rejected, the reason naming this field.
    Reject {
        /// The field the reason must name (as the candidate spells it).
        field: String,
    },
}

impl Expectation {
    /// `accept`, `counter` or `reject`, as the manifest spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Counter => "counter",
            Self::Reject { .. } => "reject",
        }
    }
}

/// A candidate protocol document from outside, with what it imitates and the decision
/// expected.
#[derive(Debug, Clone, PartialEq)]
pub struct ForeignCandidate {
    /// Its file name in [`DIRECTORY`] (`NN-short-name.md`).
    pub file: String,
    /// What format it imitates, in words.
    pub origin: String,
    /// The provider action it is written for.
    pub action: String,
    /// The decision expected.
    pub expect: Expectation,
    /// The document, byte for byte as proposed.
    pub text: &'static str,
}

/// Why the compiled-in corpus does not load (the fixture tests keep it loading).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorpusError {
    /// `corpus.json` does not parse into the manifest's shape.
    Manifest(String),
    /// The manifest names a file that is not compiled in.
    MissingDocument(String),
    /// A candidate names an action the manifest does not define.
    UnknownAction {
        /// The candidate's file.
        file: String,
        /// The action it names.
        action: String,
    },
    /// A candidate's `expect` is not `accept`, `counter` or `reject`, or `rejectField` is
    /// missing on a rejection or present on anything else.
    BadExpectation {
        /// The candidate's file.
        file: String,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for CorpusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Manifest(message) => write!(f, "{DIRECTORY}/corpus.json: {message}"),
            Self::MissingDocument(file) => {
                write!(
                    f,
                    "{DIRECTORY}/{file} is named by the manifest but not compiled in"
                )
            }
            Self::UnknownAction { file, action } => {
                write!(
                    f,
                    "{DIRECTORY}/corpus.json: {file} names an unknown action `{action}`"
                )
            }
            Self::BadExpectation { file, reason } => {
                write!(f, "{DIRECTORY}/corpus.json: {file}: {reason}")
            }
        }
    }
}

impl std::error::Error for CorpusError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    actions: Vec<RawAction>,
    candidates: Vec<RawCandidate>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawAction {
    name: String,
    #[serde(default)]
    description: String,
    input: Value,
    output: Value,
    examples: Vec<Example>,
    not_found: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawCandidate {
    file: String,
    origin: String,
    action: String,
    expect: String,
    #[serde(default)]
    reject_field: Option<String>,
}

/// The corpus, or why the compiled-in manifest does not load.
///
/// # Errors
/// A [`CorpusError`] naming the manifest entry at fault.
pub fn try_corpus() -> Result<Corpus, CorpusError> {
    let raw: RawManifest =
        serde_json::from_str(MANIFEST).map_err(|error| CorpusError::Manifest(error.to_string()))?;
    let actions: Vec<ForeignAction> = raw
        .actions
        .into_iter()
        .map(|action| ForeignAction {
            spec: ActionSpec {
                name: action.name,
                description: action.description,
                input: action.input,
                output: action.output,
            },
            examples: action.examples,
            not_found: action.not_found,
        })
        .collect();
    let mut candidates = Vec::with_capacity(raw.candidates.len());
    for candidate in raw.candidates {
        let text = DOCUMENTS
            .iter()
            .find(|(file, _)| *file == candidate.file)
            .map(|(_, text)| *text)
            .ok_or_else(|| CorpusError::MissingDocument(candidate.file.clone()))?;
        if !actions
            .iter()
            .any(|action| action.spec.name == candidate.action)
        {
            return Err(CorpusError::UnknownAction {
                file: candidate.file,
                action: candidate.action,
            });
        }
        let bad = |reason: &str| CorpusError::BadExpectation {
            file: candidate.file.clone(),
            reason: reason.to_owned(),
        };
        let expect = match (candidate.expect.as_str(), candidate.reject_field) {
            ("accept", None) => Expectation::Accept,
            ("counter", None) => Expectation::Counter,
            ("reject", Some(field)) => Expectation::Reject { field },
            ("reject", None) => return Err(bad("a rejection needs its rejectField")),
            ("accept" | "counter", Some(_)) => {
                return Err(bad("rejectField is only for a rejection"))
            }
            _ => return Err(bad("expect must be accept, counter or reject")),
        };
        candidates.push(ForeignCandidate {
            file: candidate.file,
            origin: candidate.origin,
            action: candidate.action,
            expect,
            text,
        });
    }
    Ok(Corpus {
        actions,
        candidates,
    })
}

/// The corpus: the provider's actions and every candidate with its expected decision.
///
/// # Panics
/// When the compiled-in manifest does not load ([`try_corpus`] says why); this crate's
/// tests keep it loading.
#[allow(clippy::panic)] // a compiled-in fixture, checked by the tests below
pub fn corpus() -> Corpus {
    match try_corpus() {
        Ok(corpus) => corpus,
        Err(error) => panic!("{error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use concord_negotiate::naming::{convert, NamingStyle};

    fn directory() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../concord-negotiate/tests/foreign")
    }

    #[test]
    fn the_manifest_loads_and_names_every_document_once() {
        let corpus = try_corpus().unwrap();
        let mut named: Vec<&str> = corpus.candidates.iter().map(|c| c.file.as_str()).collect();
        named.sort_unstable();
        let before = named.len();
        named.dedup();
        assert_eq!(named.len(), before, "a file is named twice");
        let compiled: Vec<&str> = DOCUMENTS.iter().map(|(file, _)| *file).collect();
        assert_eq!(named, compiled, "the manifest and DOCUMENTS disagree");
        // Every `.md` in the directory is in the corpus, and nothing else is.
        let mut on_disk: Vec<String> = std::fs::read_dir(directory())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".md"))
            .collect();
        on_disk.sort_unstable();
        assert_eq!(on_disk, compiled);
        for (file, text) in DOCUMENTS {
            let number: String = file.chars().take_while(char::is_ascii_digit).collect();
            assert_eq!(number.len(), 2, "{file} is not named NN-short-name.md");
            assert!(!text.trim().is_empty(), "{file} is empty");
            let on_disk = std::fs::read_to_string(directory().join(file)).unwrap();
            assert_eq!(on_disk, *text, "{file} changed since it was compiled in");
        }
    }

    #[test]
    fn the_corpus_has_the_breadth_it_promises() {
        let corpus = corpus();
        assert!(corpus.candidates.len() >= 18);
        assert!(corpus.actions.len() >= 6);
        let count = |name: &str| {
            corpus
                .candidates
                .iter()
                .filter(|c| c.expect.name() == name)
                .count()
        };
        assert!(count("reject") >= 2, "{}", count("reject"));
        assert!(count("counter") >= 3, "{}", count("counter"));
        assert_eq!(
            corpus.agreeing().count(),
            count("accept") + count("counter")
        );
        for action in &corpus.actions {
            assert!(
                corpus
                    .candidates
                    .iter()
                    .any(|c| c.action == action.spec.name),
                "no candidate is written for `{}`",
                action.spec.name
            );
        }
        for candidate in &corpus.candidates {
            assert!(!candidate.origin.trim().is_empty(), "{}", candidate.file);
            if let Expectation::Reject { field } = &candidate.expect {
                assert!(
                    candidate.text.contains(field.as_str()),
                    "{} never mentions its rejectField `{field}`",
                    candidate.file
                );
            }
        }
    }

    #[test]
    fn every_action_is_published_in_camel_case_with_examples_its_schemas_accept() {
        let corpus = corpus();
        for action in &corpus.actions {
            let name = &action.spec.name;
            assert_eq!(&convert(name, NamingStyle::CamelCase), name);
            assert!(!action.spec.description.is_empty(), "{name}");
            let input = jsonschema::validator_for(&action.spec.input)
                .unwrap_or_else(|error| panic!("{name}: input schema: {error}"));
            let output = jsonschema::validator_for(&action.spec.output)
                .unwrap_or_else(|error| panic!("{name}: output schema: {error}"));
            for schema in [&action.spec.input, &action.spec.output] {
                for (field, _) in concord_negotiate::json_schema::properties(schema) {
                    assert_eq!(convert(field, NamingStyle::CamelCase), field, "{name}");
                }
            }
            assert!(!action.examples.is_empty(), "{name} has no example");
            for example in &action.examples {
                let problems: Vec<String> = input
                    .iter_errors(&example.input)
                    .map(|e| e.to_string())
                    .collect();
                assert!(
                    problems.is_empty(),
                    "{name} input {}: {problems:?}",
                    example.input
                );
                let problems: Vec<String> = output
                    .iter_errors(&example.output)
                    .map(|e| e.to_string())
                    .collect();
                assert!(
                    problems.is_empty(),
                    "{name} output {}: {problems:?}",
                    example.output
                );
                // The output satisfies the schema in full: every property it lists is there.
                for (field, _) in concord_negotiate::json_schema::properties(&action.spec.output) {
                    assert!(
                        example.output.get(field).is_some(),
                        "{name}: an example output lacks `{field}`"
                    );
                }
                assert_eq!(action.answer(&example.input), Some(&example.output));
            }
            assert!(
                input.is_valid(&action.not_found),
                "{name}: notFound {} breaks the input schema",
                action.not_found
            );
            assert_eq!(action.answer(&action.not_found), None, "{name}");
        }
    }
}
