//! The external TD corpus: the Thingweb Playground's valid, invalid and warning documents,
//! and the W3C repository's validation documents. Valid ones pass without a single problem,
//! invalid ones fail for the reason their name gives, warning ones pass with that warning.

mod common;

use concord_describe::{ProblemKind, Report};

fn show(report: &Report) -> String {
    report.to_string()
}

#[test]
fn valid_documents_pass_without_problems() {
    let Some(dir) = common::td_dir() else { return };
    let mut documents = common::documents(&dir, "valid", "");
    documents.extend(common::documents(&dir, "w3c", "valid-"));
    assert_eq!(documents.len(), 36);
    for (name, bytes) in documents {
        let report = concord_describe::validate(&bytes);
        assert!(
            report.is_valid() && report.warning_count() == 0,
            "{name} should be valid without warnings:\n{}",
            show(&report)
        );
        // And the model reads it.
        concord_describe::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// Each invalid document, the problem kind its name and description give, and where.
const INVALID: &[(&str, ProblemKind, &str)] = &[
    (
        "invalid/camelCase.json",
        ProblemKind::InvalidOperation,
        "/actions/toggle/forms/0/op/0",
    ),
    (
        "invalid/duplicateEnum.json",
        ProblemKind::DuplicateValue,
        "/properties/status/enum/2",
    ),
    (
        "invalid/duplicateSecurityDefinitions.json",
        ProblemKind::DuplicateKey,
        "/securityDefinitions/basic_sc",
    ),
    (
        "invalid/emptyEnum.json",
        ProblemKind::Empty,
        "/properties/status/enum",
    ),
    (
        "invalid/emptyOpArray.json",
        ProblemKind::Empty,
        "/properties/status/forms/0/op",
    ),
    (
        "invalid/emptySecDef.json",
        ProblemKind::Empty,
        "/securityDefinitions",
    ),
    (
        "invalid/invalidDataType.json",
        ProblemKind::InvalidValue,
        "/actions/status/input/type",
    ),
    (
        "invalid/invalidInteractionElement.json",
        ProblemKind::WrongType,
        "/actions/wrongAction",
    ),
    (
        "invalid/invalidSecuMatch.json",
        ProblemKind::UndefinedSecurity,
        "/actions/toggle/forms/0/security/0",
    ),
    (
        "invalid/invalidSecuScheme.json",
        ProblemKind::UnknownSecurityScheme,
        "/securityDefinitions/basic_sc/scheme",
    ),
    (
        "invalid/noContext.json",
        ProblemKind::MissingTerm,
        "/@context",
    ),
    (
        "invalid/noForm1.json",
        ProblemKind::MissingTerm,
        "/properties/status/forms",
    ),
    (
        "invalid/noForm3.json",
        ProblemKind::MissingTerm,
        "/events/status/forms",
    ),
    (
        "invalid/noHref.json",
        ProblemKind::MissingTerm,
        "/events/overheating/forms/0/href",
    ),
    // "TD that does not respect the status property type": enum strings on a number.
    (
        "invalid/usingTM.json",
        ProblemKind::ValueTypeMismatch,
        "/properties/status/enum/0",
    ),
    (
        "invalid/versionInstanceMissing.json",
        ProblemKind::MissingTerm,
        "/version/instance",
    ),
    ("w3c/invalid-0.json", ProblemKind::MissingTerm, "/title"),
    ("w3c/invalid-1.json", ProblemKind::WrongType, "/title"),
    ("w3c/invalid-2.json", ProblemKind::WrongType, "/properties"),
    (
        "w3c/invalid-3.json",
        ProblemKind::MissingTerm,
        "/properties/status/forms/0/href",
    ),
];

#[test]
fn invalid_documents_fail_for_their_reason() {
    let Some(dir) = common::td_dir() else { return };
    let mut documents = common::documents(&dir, "invalid", "");
    documents.extend(common::documents(&dir, "w3c", "invalid-"));
    let names: Vec<&str> = documents.iter().map(|(name, _)| name.as_str()).collect();
    let expected: Vec<&str> = INVALID.iter().map(|(name, _, _)| *name).collect();
    assert_eq!(names, expected, "every invalid document has an expectation");
    for ((name, bytes), (_, kind, pointer)) in documents.iter().zip(INVALID) {
        let report = concord_describe::validate(bytes);
        assert!(!report.is_valid(), "{name} should be invalid");
        let problem = report
            .errors()
            .find(|p| p.kind == *kind && p.pointer == *pointer)
            .unwrap_or_else(|| {
                panic!(
                    "{name}: expected {kind} at {pointer}, got:\n{}",
                    show(&report)
                )
            });
        assert!(
            problem.position.is_some(),
            "{name}: the problem has a line and column"
        );
        // Nothing unrelated: every error is about the document's stated flaw.
        for error in report.errors() {
            assert!(
                error.kind == *kind || related(name, error.kind),
                "{name}: unexpected {error}"
            );
        }
    }
}

/// Follow-on errors a document's flaw causes besides the named one.
fn related(name: &str, kind: ProblemKind) -> bool {
    match name {
        // No definitions, so "nosec" in `security` names nothing.
        "invalid/emptySecDef.json" => kind == ProblemKind::UndefinedSecurity,
        // An empty document lacks every required term, and has a wrongly typed title.
        "w3c/invalid-0.json" | "w3c/invalid-1.json" => kind == ProblemKind::MissingTerm,
        _ => false,
    }
}

#[test]
fn invalid_document_positions_are_exact() {
    let Some(dir) = common::td_dir() else { return };
    let cases = [
        ("invalid/duplicateSecurityDefinitions.json", 12, 9),
        ("invalid/camelCase.json", 18, 28),
        ("invalid/noHref.json", 36, 17),
    ];
    for (name, line, column) in cases {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        let report = concord_describe::validate(&bytes);
        let at = report.errors().next().unwrap().position.unwrap();
        assert_eq!((at.line, at.column), (line, column), "{name}");
    }
}

const WARNING: &[(&str, ProblemKind, &str)] = &[
    (
        "warning/additionalResponsesEmptyResp.json",
        ProblemKind::IncompleteAdditionalResponse,
        "/actions/crop/forms/0/additionalResponses/2",
    ),
    (
        "warning/arrayNoItems.json",
        ProblemKind::ArrayWithoutItems,
        "/properties/status",
    ),
    (
        "warning/objectNoProperties.json",
        ProblemKind::ObjectWithoutProperties,
        "/properties/status",
    ),
    (
        "warning/unavailableDirectTm.json",
        ProblemKind::ThingModelNotChecked,
        "/links/0",
    ),
];

#[test]
fn warning_documents_pass_with_their_warning() {
    let Some(dir) = common::td_dir() else { return };
    let documents = common::documents(&dir, "warning", "");
    assert_eq!(documents.len(), WARNING.len());
    for ((name, bytes), (expected_name, kind, pointer)) in documents.iter().zip(WARNING) {
        assert_eq!(name, expected_name);
        let report = concord_describe::validate(bytes);
        assert!(
            report.is_valid(),
            "{name} should be valid:\n{}",
            show(&report)
        );
        assert!(
            report
                .warnings()
                .any(|p| p.kind == *kind && p.pointer == *pointer),
            "{name}: expected warning {kind} at {pointer}, got:\n{}",
            show(&report)
        );
        let parsed = concord_describe::parse(bytes).unwrap();
        assert_eq!(parsed.report.warning_count(), report.warning_count());
    }
}

#[test]
fn corpus_round_trips_through_the_model() {
    let Some(dir) = common::td_dir() else { return };
    let mut documents = common::documents(&dir, "valid", "");
    documents.extend(common::documents(&dir, "warning", ""));
    documents.extend(common::documents(&dir, "w3c", "valid-"));
    for (name, bytes) in documents {
        let original: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let thing = concord_describe::parse(&bytes).unwrap().thing;
        let written = serde_json::to_value(&thing).unwrap();
        assert_eq!(written, original, "{name} changed in a round trip");
        assert!(
            thing.validate().is_valid(),
            "{name}: the model's own output validates"
        );
    }
}
