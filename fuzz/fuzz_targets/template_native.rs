//! Templates run natively, against the same templates in the sandbox: a protocol document and
//! a message from the fuzzer (split at the first NUL byte). For both sides' templates, each
//! contract function given the message answers natively exactly as the module does in the
//! sandbox (the same value, member order included, or the same error), and never panics.
#![no_main]

use std::time::Duration;

use concord_handlers::{Local, Template};
use concord_negotiate::ProtocolDocument;
use concord_sandbox::{Function, Limits, Role, Sandbox, SandboxError};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some(split) = data.iter().position(|byte| *byte == 0) else {
        return;
    };
    let (Ok(text), Ok(message)) = (
        std::str::from_utf8(&data[..split]),
        serde_json::from_slice::<Value>(&data[split + 1..]),
    ) else {
        return;
    };
    let Ok(document) = ProtocolDocument::parse(text) else {
        return;
    };
    // Sanitizers slow the engine down; the deadline is not what is tested here.
    let mut limits = Limits::default();
    limits.call_timeout = Duration::from_secs(5);
    for (role, functions) in [
        (
            Role::Requester,
            [Function::EncodeRequest, Function::DecodeResponse],
        ),
        (
            Role::Provider,
            [Function::DecodeRequest, Function::EncodeResponse],
        ),
    ] {
        let local = Local::from_protocol(&document, role, "fuzzAction");
        let Ok(template) = Template::new(&document, &local) else {
            continue;
        };
        let mut module = match Sandbox::load(template.source(), role, limits.clone()) {
            Ok(module) => module,
            Err(error) => panic!("a template does not load: {error}\n{}", template.source()),
        };
        for function in functions {
            let sandboxed = module.call(function, &message);
            if sandboxed.as_ref().is_err_and(SandboxError::is_limit) {
                continue;
            }
            let native = template.call(function, &message);
            match (&native, &sandboxed) {
                (Ok(native), Ok(sandboxed)) => {
                    assert_eq!(native.to_string(), sandboxed.to_string(), "{function}")
                }
                (
                    Err(SandboxError::Thrown { message: native }),
                    Err(SandboxError::Thrown { message: sandboxed }),
                ) => {
                    let rest = sandboxed.strip_prefix(native.as_str());
                    assert!(
                        rest.is_some_and(|rest| rest.is_empty() || rest.starts_with("\n    at ")),
                        "{function}: native {native:?}, sandbox {sandboxed:?}"
                    );
                }
                _ => panic!("{function}: native {native:?}, sandbox {sandboxed:?}"),
            }
        }
    }
});
