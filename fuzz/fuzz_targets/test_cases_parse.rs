//! Test cases from untrusted input: the `testCases` text a peer proposes in
//! `testCasesNegotiation`.
//!
//! Never panics; whatever parses is written back in the canonical form, which parses to
//! the same cases and is a fixed point of writing.
#![no_main]

use concord_negotiate::TestCases;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cases) = TestCases::parse(text) else {
        return;
    };
    let written = cases.write();
    let again = match TestCases::parse(&written) {
        Ok(again) => again,
        Err(error) => panic!("the written form does not parse: {error}\n{written}"),
    };
    assert_eq!(again, cases, "writing changed the cases:\n{written}");
    assert_eq!(again.write(), written);
});
