//! Agent descriptions from untrusted bytes: validating never panics; every problem found in
//! text has a line and column; whatever validates reads into the model, and the model writes
//! it back as a description that validates and reads back equal.
#![no_main]

use concord_describe::ProblemKind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let report = match concord_describe::parse(data) {
        Ok(validated) => {
            let written = serde_json::to_vec(&validated.thing).expect("the model writes JSON");
            let again = concord_describe::parse(&written).expect("what the model writes validates");
            assert_eq!(
                again.thing, validated.thing,
                "round trip changed the description"
            );
            validated.report
        }
        Err(invalid) => invalid.report,
    };
    for problem in report.errors().chain(report.warnings()) {
        assert!(
            problem.position.is_some() || problem.kind == ProblemKind::TooLarge,
            "a problem without a position: {problem}"
        );
    }
});
