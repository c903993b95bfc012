//! The JSON the model answers with at each step, read strictly and checked before use.
//!
//! Every shape rejects unknown keys, so a misspelt key (`candidate_protocol`) fails the
//! parse and gets a corrective retry instead of being silently dropped.

use concord_proto::{Decision, FixDecision};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::LlmFailure;
use crate::document::ProtocolDocument;
use crate::policy::NegotiateError;
use crate::test_cases::TestCases;
use crate::validation::ProtocolSchemas;

/// `{"candidateProtocol": "<markdown>"}`: the draft step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct DraftAnswer {
    pub candidate_protocol: String,
}

/// A judging status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    Accepted,
    Negotiating,
    Rejected,
}

/// `{"status", "candidateProtocol", "modificationSummary", "reason"}`: the judge step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct JudgeAnswer {
    pub status: Status,
    #[serde(default)]
    pub candidate_protocol: Option<String>,
    #[serde(default)]
    pub modification_summary: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// `{"testCases": "<markdown>"}`: the test-case drafting step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct TestCasesAnswer {
    pub test_cases: String,
}

/// `{"status", "testCases", "modificationSummary", "reason"}`: the test-case judging step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct TestCasesJudgeAnswer {
    pub status: Status,
    #[serde(default)]
    pub test_cases: Option<String>,
    #[serde(default)]
    pub modification_summary: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A diagnosis status: there is no counter-proposal to an error report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum FixStatus {
    Accepted,
    Rejected,
}

/// `{"status", "reason"}`: the diagnosis step.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct DiagnoseAnswer {
    pub status: FixStatus,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The most characters a protocol document or a set of test cases the model writes may
/// have: the bound its JSON Schema sets (a small model fills an unbounded string until
/// `max_tokens`).
pub const MAX_DOCUMENT_CHARS: u32 = 8000;

/// The most characters of a modification summary or a reason.
pub const MAX_NOTE_CHARS: u32 = 1000;

/// A string of at most `max` characters, or null.
fn nullable_text(max: u32) -> Value {
    json!({"type": ["string", "null"], "maxLength": max})
}

/// An object with exactly these properties, all required (OpenAI's strict mode wants every
/// property listed; optional ones are nullable).
fn object(properties: Value) -> Value {
    let required: Vec<String> = properties
        .as_object()
        .map(|map| map.keys().cloned().collect())
        .unwrap_or_default();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The JSON Schema of [`DraftAnswer`].
pub(crate) fn draft_schema() -> Value {
    object(json!({
        "candidateProtocol": {"type": "string", "minLength": 1, "maxLength": MAX_DOCUMENT_CHARS}
    }))
}

/// The JSON Schema of [`JudgeAnswer`].
pub(crate) fn judge_schema() -> Value {
    object(json!({
        "status": {"type": "string", "enum": ["accepted", "negotiating", "rejected"]},
        "candidateProtocol": nullable_text(MAX_DOCUMENT_CHARS),
        "modificationSummary": nullable_text(MAX_NOTE_CHARS),
        "reason": nullable_text(MAX_NOTE_CHARS),
    }))
}

/// The JSON Schema of [`TestCasesAnswer`].
pub(crate) fn test_cases_schema() -> Value {
    object(json!({
        "testCases": {"type": "string", "minLength": 1, "maxLength": MAX_DOCUMENT_CHARS}
    }))
}

/// The JSON Schema of [`TestCasesJudgeAnswer`].
pub(crate) fn test_cases_judge_schema() -> Value {
    object(json!({
        "status": {"type": "string", "enum": ["accepted", "negotiating", "rejected"]},
        "testCases": nullable_text(MAX_DOCUMENT_CHARS),
        "modificationSummary": nullable_text(MAX_NOTE_CHARS),
        "reason": nullable_text(MAX_NOTE_CHARS),
    }))
}

/// The JSON Schema of [`DiagnoseAnswer`].
pub(crate) fn diagnose_schema() -> Value {
    object(json!({
        "status": {"type": "string", "enum": ["accepted", "rejected"]},
        "reason": nullable_text(MAX_NOTE_CHARS),
    }))
}

/// `value`, when it is there and not blank.
fn required(
    value: Option<String>,
    status: &'static str,
    field: &'static str,
) -> Result<String, LlmFailure> {
    value
        .filter(|text| !text.trim().is_empty())
        .ok_or(LlmFailure::MissingField { status, field })
}

/// A protocol the model wrote: it must parse, have both schemas, and both must compile.
/// Returns the text exactly as written (it is what gets hashed).
pub(crate) fn full_protocol(text: String) -> Result<String, LlmFailure> {
    let document = ProtocolDocument::parse(&text).map_err(LlmFailure::InvalidProtocol)?;
    if document.request_schema.is_none() || document.response_schema.is_none() {
        return Err(LlmFailure::PartialProtocol);
    }
    match ProtocolSchemas::compile(&document) {
        Ok(_) => Ok(text),
        Err(NegotiateError::Schema { which, message }) => {
            Err(LlmFailure::ProtocolSchema { which, message })
        }
        Err(NegotiateError::TooComplex { which, error }) => Err(LlmFailure::ProtocolSchema {
            which,
            message: error.to_string(),
        }),
        Err(other) => Err(LlmFailure::ProtocolSchema {
            which: "request",
            message: other.to_string(),
        }),
    }
}

/// Test cases the model wrote: they must parse and, when the agreed protocol has
/// schemas, every message must follow them. Returns them in the canonical layout.
pub(crate) fn valid_test_cases(
    protocol: &ProtocolDocument,
    text: &str,
) -> Result<String, LlmFailure> {
    let cases = TestCases::parse(text).map_err(LlmFailure::InvalidTestCases)?;
    if let Ok(schemas) = ProtocolSchemas::compile(protocol) {
        let problems: Vec<String> = cases
            .cases
            .iter()
            .flat_map(|case| schemas.check_case(case))
            .collect();
        if !problems.is_empty() {
            return Err(LlmFailure::TestCasesBreakSchemas {
                problems: problems.join("\n"),
            });
        }
    }
    Ok(cases.write())
}

/// The decision a judging answer of `status` stands for, once the fields that status needs
/// are there: a counter-proposal (the answer's `field`, made usable by `usable`) with its
/// summary, or a rejection's reason.
fn judged(
    status: Status,
    (field, counter): (&'static str, Option<String>),
    modification_summary: Option<String>,
    reason: Option<String>,
    usable: impl FnOnce(String) -> Result<String, LlmFailure>,
) -> Result<Decision, LlmFailure> {
    match status {
        Status::Accepted => Ok(Decision::Accept),
        Status::Negotiating => {
            let candidate = required(counter, "negotiating", field)?;
            let modification_summary =
                required(modification_summary, "negotiating", "modificationSummary")?;
            Ok(Decision::Counter {
                candidate: usable(candidate)?,
                modification_summary,
            })
        }
        Status::Rejected => Ok(Decision::Reject {
            reason: required(reason, "rejected", "reason")?,
        }),
    }
}

impl JudgeAnswer {
    /// The decision, once the fields its status needs are there and a counter-proposal
    /// is a full protocol.
    pub(crate) fn into_decision(self) -> Result<Decision, LlmFailure> {
        judged(
            self.status,
            ("candidateProtocol", self.candidate_protocol),
            self.modification_summary,
            self.reason,
            full_protocol,
        )
    }
}

impl TestCasesJudgeAnswer {
    /// The decision, once the fields its status needs are there and counter test cases
    /// parse and follow the agreed schemas.
    pub(crate) fn into_decision(self, protocol: &ProtocolDocument) -> Result<Decision, LlmFailure> {
        judged(
            self.status,
            ("testCases", self.test_cases),
            self.modification_summary,
            self.reason,
            |cases| valid_test_cases(protocol, &cases),
        )
    }
}

impl DiagnoseAnswer {
    /// The decision, once a rejection has its reason.
    pub(crate) fn into_decision(self) -> Result<FixDecision, LlmFailure> {
        match self.status {
            FixStatus::Accepted => Ok(FixDecision::Accept),
            FixStatus::Rejected => Ok(FixDecision::Reject {
                reason: required(self.reason, "rejected", "reason")?,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every schema's answers parse into its shape, and the shape's strictness matches the
    /// schema's: what the server may let through, the parse takes.
    #[test]
    fn schemas_describe_the_shapes() {
        let accepted = json!({"status": "accepted", "candidateProtocol": null,
                              "modificationSummary": null, "reason": null});
        assert!(jsonschema::is_valid(&judge_schema(), &accepted));
        assert!(serde_json::from_value::<JudgeAnswer>(accepted).is_ok());
        assert!(!jsonschema::is_valid(
            &judge_schema(),
            &json!({"status": "accepted"})
        ));
        let diagnosis = json!({"status": "rejected", "reason": "x"});
        assert!(jsonschema::is_valid(&diagnose_schema(), &diagnosis));
        assert!(serde_json::from_value::<DiagnoseAnswer>(diagnosis).is_ok());
        let draft = json!({"candidateProtocol": "# Requirement"});
        assert!(jsonschema::is_valid(&draft_schema(), &draft));
        assert!(serde_json::from_value::<DraftAnswer>(draft).is_ok());
        let long = "x".repeat(MAX_DOCUMENT_CHARS as usize + 1);
        assert!(!jsonschema::is_valid(
            &draft_schema(),
            &json!({"candidateProtocol": long})
        ));
        let cases = json!({"status": "negotiating", "testCases": "t",
                           "modificationSummary": "m", "reason": null});
        assert!(jsonschema::is_valid(&test_cases_judge_schema(), &cases));
        assert!(serde_json::from_value::<TestCasesJudgeAnswer>(cases).is_ok());
        assert!(jsonschema::is_valid(
            &test_cases_schema(),
            &json!({"testCases": "t"})
        ));
        for schema in [
            draft_schema(),
            judge_schema(),
            test_cases_schema(),
            test_cases_judge_schema(),
            diagnose_schema(),
        ] {
            assert_eq!(schema["additionalProperties"], false);
        }
    }

    #[test]
    fn shapes_are_strict() {
        assert!(serde_json::from_str::<JudgeAnswer>(r#"{"status":"accepted"}"#).is_ok());
        assert!(serde_json::from_str::<JudgeAnswer>(r#"{"status":"ACCEPTED"}"#).is_err());
        assert!(serde_json::from_str::<JudgeAnswer>(
            r#"{"status":"negotiating","candidate_protocol":"x"}"#
        )
        .is_err());
        assert!(serde_json::from_str::<DiagnoseAnswer>(r#"{"status":"negotiating"}"#).is_err());
        assert!(
            serde_json::from_str::<DraftAnswer>(r#"{"candidateProtocol":"x"} trailing"#).is_err()
        );
    }

    #[test]
    fn statuses_need_their_fields() {
        let answer: JudgeAnswer =
            serde_json::from_str(r#"{"status":"rejected","reason":"  "}"#).unwrap();
        assert!(matches!(
            answer.into_decision(),
            Err(LlmFailure::MissingField {
                status: "rejected",
                field: "reason"
            })
        ));
        let answer: DiagnoseAnswer =
            serde_json::from_str(r#"{"status":"accepted","reason":null}"#).unwrap();
        assert_eq!(answer.into_decision().unwrap(), FixDecision::Accept);
    }

    #[test]
    fn a_based_on_uri_counter_is_not_a_full_protocol() {
        let text = "# Requirement\nx\n\n# Flow\nBased on https://example.com/p/1 with changes.\n\n# Changes\n- more\n";
        assert!(matches!(
            full_protocol(text.into()),
            Err(LlmFailure::PartialProtocol)
        ));
    }
}
