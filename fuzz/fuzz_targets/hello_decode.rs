//! Hello decoding and the responder's handshake decision: never panic; what decodes
//! re-encodes to an equal hello.
#![no_main]

use concord_proto::handshake::{answer_source_hello, KnownProtocols, LocalOffer};
use concord_proto::{Capabilities, Hello};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(hello) = Hello::decode(text) else {
        return;
    };
    assert_eq!(Hello::decode(&hello.encode()).expect("re-decodes"), hello);
    let mut store = KnownProtocols::default();
    store.insert_document("# Requirement\nfuzz\n");
    store.insert_consensus("https://example.com/protocol/1.0");
    let _ = answer_source_hello(&LocalOffer::new(Capabilities::all()), &hello, &store, "fuzz000000000000");
});
