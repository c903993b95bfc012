//! Hello decoding within the default limits and the responder's handshake decision: never
//! panic; what decodes re-encodes to an equal hello; what the default limits accept, tighter
//! limits either accept unchanged or refuse with a typed error.
#![no_main]

use concord_proto::handshake::{answer_source_hello, KnownProtocols, LocalOffer};
use concord_proto::{Capabilities, Hello, HelloLimits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(hello) = Hello::decode(text) else {
        return;
    };
    // Re-encoding may lengthen a number in an extra field (`1e2` becomes `100.0`), so the
    // whole-text bound is widened for the round trip; every field bound stays.
    let mut relaxed = HelloLimits::default();
    relaxed.max_text_size = usize::MAX;
    assert_eq!(
        Hello::decode_with_limits(&hello.encode(), &relaxed).expect("re-decodes"),
        hello
    );
    let mut tight = HelloLimits::default();
    tight.max_text_size = 1024;
    tight.max_message_id_len = 16;
    tight.max_versions = 2;
    tight.max_capabilities = 4;
    tight.max_candidate_protocols = 2;
    tight.max_string_len = 64;
    tight.max_extra_fields = 2;
    tight.max_extra_size = 128;
    if let Ok(again) = Hello::decode_with_limits(text, &tight) {
        assert_eq!(again, hello);
    }
    let mut store = KnownProtocols::default();
    store.insert_document("# Requirement\nfuzz\n");
    store.insert_consensus("https://example.com/protocol/1.0");
    let _ = answer_source_hello(
        &LocalOffer::new(Capabilities::all()),
        &hello,
        &store,
        "fuzz000000000000",
    );
});
