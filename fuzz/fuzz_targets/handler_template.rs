//! Protocol handler code from untrusted input: protocol documents (peer-written schemas)
//! become templates, and received message bytes are decoded and read.
//!
//! Never panics; the same document always gives the same module, and every module a
//! template writes compiles and loads in the sandbox, whatever the schemas' field names and
//! constants; decoded messages equal themselves under `diff`, and the contract's readers
//! accept or refuse them without panicking.
#![no_main]

use std::time::Duration;

use concord_handlers::{diff, template, wire, Incoming, Local, Reply, Verifier};
use concord_negotiate::{Encoding, ProtocolDocument};
use concord_sandbox::{Limits, Role, Sandbox};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for encoding in [Encoding::Json, Encoding::Aicl] {
        if let Ok(message) = wire::decode(encoding, data, 1 << 20) {
            assert!(diff(&message, &message).is_empty());
            let _ = Reply::from_value(&message);
            let _ = Incoming::from_value(&message);
        }
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(document) = ProtocolDocument::parse(text) else {
        return;
    };
    let _ = Verifier::new(&document);
    // Sanitizers slow the engine down; the deadline is not what is tested here.
    let mut limits = Limits::default();
    limits.call_timeout = Duration::from_secs(5);
    for role in [Role::Requester, Role::Provider] {
        let local = Local::from_protocol(&document, role, "fuzzAction");
        if let Ok(source) = template(&document, &local) {
            assert_eq!(template(&document, &local).as_ref(), Ok(&source));
            if let Err(error) = Sandbox::load(&source, role, limits.clone()) {
                panic!("a template does not load: {error}\n{source}");
            }
        }
    }
});
