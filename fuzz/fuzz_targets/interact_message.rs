//! Interaction-layer messages (W3C Web Thing Protocol shape) on arbitrary bytes: decoding
//! never panics, and a message that decodes encodes again and decodes to the same message.
#![no_main]

use concord_interact::{Limits, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    if let Ok(message) = Message::decode(data, &limits) {
        let encoded = message.encode(&limits).expect("a decoded message encodes");
        let again = Message::decode(&encoded, &limits).expect("an encoded message decodes");
        assert_eq!(again, message);
    }
});
