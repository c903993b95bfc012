//! The two JSON examples of the LMOS Agent Description Format seed
//! (`../shared/seeds/lmos-agent-description-format.txt`, lines 34-50 and 52-172), kept
//! verbatim as fixtures, are not JSON: a trailing comma in `@context` (both), and a missing
//! comma before `securityDefinitions` (the full example). The validator names both mistakes
//! in one pass, at the exact place: the comma itself, and the place right after `}` where the
//! comma belongs. Fixed, they validate.

mod common;

use concord_describe::{LmosKind, ProblemKind};

/// (line, column, message) of each syntax error.
fn syntax_errors(name: &str) -> Vec<(usize, usize, String)> {
    let report = concord_describe::validate(&common::fixture(name));
    assert!(!report.is_valid());
    report
        .errors()
        .map(|p| {
            assert_eq!(p.kind, ProblemKind::Syntax, "{p}");
            let at = p.position.expect("syntax errors have a position");
            (at.line, at.column, p.message.clone())
        })
        .collect()
}

#[test]
fn fixtures_are_the_seed_verbatim() {
    let seed = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/seeds/lmos-agent-description-format.txt"
    ));
    let Ok(seed) = std::fs::read_to_string(seed) else {
        eprintln!(
            "SKIPPED: ../shared/seeds not found; the fixtures cannot be compared with the seed"
        );
        return;
    };
    let lines: Vec<&str> = seed.lines().collect();
    let example = lines[33..50].join("\n") + "\n";
    let full = lines[51..172].join("\n") + "\n";
    assert_eq!(
        String::from_utf8(common::fixture("lmos-seed-example.json")).unwrap(),
        example
    );
    assert_eq!(
        String::from_utf8(common::fixture("lmos-seed-full-example.json")).unwrap(),
        full
    );
}

#[test]
fn short_example_has_a_trailing_comma() {
    // Fixture line 5 is seed line 38: `"lmos": "https://eclipse.dev/lmos/protocol/v1",`
    assert_eq!(
        syntax_errors("lmos-seed-example.json"),
        [(5, 47, "trailing comma before `}`".to_owned())]
    );
}

#[test]
fn full_example_has_a_trailing_comma_and_a_missing_comma() {
    // Seed line 56 (fixture line 5): the same trailing comma. Seed line 73 (fixture line
    // 22) is the `}` closing `lmos:metadata`; the comma belongs right after it, before
    // `"securityDefinitions"` on the next line.
    let errors = syntax_errors("lmos-seed-full-example.json");
    assert_eq!(
        errors,
        [
            (5, 47, "trailing comma before `}`".to_owned()),
            (
                22,
                2,
                "missing `,` between object members (the next one starts at line 23, column 1)"
                    .to_owned()
            ),
        ]
    );
    let report = concord_describe::validate(&common::fixture("lmos-seed-full-example.json"));
    let pointers: Vec<&str> = report.errors().map(|p| p.pointer.as_str()).collect();
    assert_eq!(pointers, ["/@context/1/lmos", "/lmos:metadata"]);
}

#[test]
fn full_example_fixed_validates() {
    let parsed = concord_describe::parse(&common::fixture("lmos-seed-full-example.fixed.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parsed.report.warning_count(), 0, "{}", parsed.report);
    let thing = parsed.thing;
    assert_eq!(thing.lmos_kind(), Some(LmosKind::Agent));
    assert_eq!(thing.title, "WeatherAgent");
    let vendor = thing.lmos_metadata.unwrap().vendor.unwrap();
    assert_eq!(vendor.name.as_deref(), Some("Deutsche Telekom AG"));
    let get_weather = &thing.actions.unwrap()["getWeather"];
    let input = get_weather.input.as_ref().unwrap();
    assert_eq!(
        input.required.as_deref(),
        Some(&["question".to_owned(), "interactionMode".to_owned()][..])
    );
    assert_eq!(get_weather.forms[0].extensions["htv:methodName"], "POST");
}

#[test]
fn short_example_fixed_is_valid_json_and_needs_only_security() {
    // With the comma fixed, the only problems left are TD 1.1's required security terms,
    // which this fragment of the seed (it illustrates the LMOS terms) leaves out.
    let report = concord_describe::validate(&common::fixture("lmos-seed-example.fixed.json"));
    let errors: Vec<(ProblemKind, &str)> = report
        .errors()
        .map(|p| (p.kind, p.pointer.as_str()))
        .collect();
    assert_eq!(
        errors,
        [
            (ProblemKind::MissingTerm, "/securityDefinitions"),
            (ProblemKind::MissingTerm, "/security")
        ]
    );
    let parsed = concord_describe::parse(&common::fixture(
        "lmos-seed-example.fixed-with-security.json",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        parsed.thing.identifier(),
        Some("urn:uuid:6f1d3a7a-1f97-4e6b-b45f-f3c2e1c84c77")
    );
    assert_eq!(parsed.report.warning_count(), 0);
}
