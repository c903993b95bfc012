//! JSON Schemas from untrusted input, checked against tight schema limits before anything
//! compiles them, then inlined within the same limits.
//!
//! Never panics; whatever `inline_refs_within` returns is itself within the limits, and is
//! what `inline_refs` writes (the limits refuse, they never change a schema); a schema over
//! the limits as written is never inlined.
#![no_main]

use concord_negotiate::complexity::{check_complexity, SchemaLimits};
use concord_negotiate::json_schema::{inline_refs, inline_refs_within};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Small enough for the fuzzer to go over each limit with short inputs.
const LIMITS: SchemaLimits = SchemaLimits {
    max_depth: 6,
    max_nodes: 40,
    max_values: 200,
    max_enum_values: 8,
    max_members: 8,
    max_branches: 4,
    max_pattern_len: 16,
    max_pattern_total: 32,
};

fuzz_target!(|data: &[u8]| {
    let Ok(schema) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let as_written = check_complexity(&schema, &LIMITS);
    match inline_refs_within(&schema, &LIMITS) {
        Ok(inlined) => {
            assert!(
                as_written.is_ok(),
                "inlined a schema over the limits: {as_written:?}"
            );
            if let Err(error) = check_complexity(&inlined, &LIMITS) {
                panic!("the inlined schema is over the limits: {error}");
            }
            assert_eq!(inlined, inline_refs(&schema));
        }
        Err(error) => {
            if let Err(first) = as_written {
                assert_eq!(error, first, "not the first limit found over");
            }
            assert!(!error.to_string().is_empty());
        }
    }
});
