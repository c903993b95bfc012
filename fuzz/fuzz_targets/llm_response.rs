//! A chat-completions response body from an untrusted server: decoding must never panic,
//! and whatever decodes must survive a re-encode unchanged.
#![no_main]

use concord_llm::ChatResponse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(response) = ChatResponse::from_json(data) else {
        return;
    };
    let _ = response.content();
    for call in response.tool_calls() {
        let _ = call.parse_arguments::<serde_json::Value>();
    }
    let encoded = serde_json::to_vec(&response).expect("a decoded response encodes");
    let again = ChatResponse::from_json(&encoded).expect("an encoded response decodes");
    assert_eq!(again, response);
});
