//! Handler modules written as ES modules: they load and answer exactly as the same code
//! written as a strict-mode script; `import` in any form, `export default` and exports that
//! are not functions are refused with typed errors.

use std::time::Duration;

use concord_sandbox::{Function, Limits, Role, Sandbox, SandboxError};
use serde_json::{json, Value};

const REQUESTER: &str = include_str!("fixtures/product-info-requester.js");
const PROVIDER: &str = include_str!("fixtures/product-info-provider.js");

fn limits() -> Limits {
    let mut limits = Limits::default();
    limits.call_timeout = Duration::from_millis(200);
    limits
}

/// `source` with `export ` before the top-level declarations of `names`.
fn exporting(source: &str, names: &[&str]) -> String {
    let mut module = source.to_owned();
    for name in names {
        let declaration = format!("\nfunction {name}(");
        assert!(module.contains(&declaration), "fixture declares {name}");
        module = module.replace(&declaration, &format!("\nexport function {name}("));
    }
    module
}

/// The script and its ES module forms give the same answers (or the same errors, stack frames
/// aside: the functions' names and columns differ between the forms) for every input.
fn answer_alike(role: Role, forms: &[String], calls: &[(Function, Value)]) {
    let mut handlers: Vec<_> = forms
        .iter()
        .map(|source| {
            Sandbox::load(source, role, limits())
                .unwrap_or_else(|error| panic!("{error}\n{source}"))
        })
        .collect();
    for (function, input) in calls {
        let answers: Vec<_> = handlers
            .iter_mut()
            .map(|handler| {
                handler.call(*function, input).map_err(|error| {
                    let text = error.to_string();
                    text.lines().next().unwrap_or_default().to_owned()
                })
            })
            .collect();
        assert!(
            answers.iter().all(|answer| answer == &answers[0]),
            "{function} {input}: {answers:?}"
        );
    }
}

#[test]
fn both_forms_load_and_answer_the_same() {
    let requester_forms = [
        REQUESTER.to_owned(),
        exporting(REQUESTER, &["encodeRequest", "decodeResponse"]),
        format!("{REQUESTER}\nexport {{ encodeRequest, decodeResponse }};\n"),
        format!(
            "{}\nexport const encodeRequest = (input) => encode(input), decodeResponse = decode;\n",
            REQUESTER
                .replace("function encodeRequest(", "function encode(")
                .replace("function decodeResponse(", "function decode(")
        ),
    ];
    answer_alike(
        Role::Requester,
        &requester_forms,
        &[
            (
                Function::EncodeRequest,
                json!({"messageId": "m1", "productId": "P12345"}),
            ),
            (
                Function::EncodeRequest,
                json!({"messageId": "m2", "productId": "P1", "productName": "Tea"}),
            ),
            (Function::EncodeRequest, json!({"messageId": "m3"})),
            (
                Function::DecodeResponse,
                json!({
                    "messageId": "m1", "type": "RESPONSE", "action": "getProductInfo",
                    "status": {"code": 200, "message": "OK"},
                    "productInfo": {"productId": "P1", "productName": "Tea",
                                    "productDescription": "Green", "price": 3.5,
                                    "currency": "EUR"}
                }),
            ),
            (Function::DecodeResponse, json!({"nonsense": true})),
        ],
    );
    let provider_forms = [
        PROVIDER.to_owned(),
        exporting(PROVIDER, &["decodeRequest", "encodeResponse"]),
        format!(
            "{}\nexport {{ decode as decodeRequest, encode as \"encodeResponse\" }};\n",
            PROVIDER
                .replace("function decodeRequest(", "function decode(")
                .replace("function encodeResponse(", "function encode(")
        ),
    ];
    answer_alike(
        Role::Provider,
        &provider_forms,
        &[
            (
                Function::DecodeRequest,
                json!({"messageId": "m1", "type": "REQUEST", "action": "getProductInfo",
                       "productId": "P1"}),
            ),
            (Function::DecodeRequest, json!({"type": "REQUEST"})),
            (
                Function::EncodeResponse,
                json!({"request": {"messageId": "m1"},
                       "error": {"code": 404, "message": "no product P9"}}),
            ),
        ],
    );
}

#[test]
fn imports_are_refused_with_a_typed_error() {
    for (source, line, column) in [
        (
            "import { x } from 'std';\nexport function encodeRequest(i) { return i; }",
            1,
            1,
        ),
        ("import 'os';", 1, 1),
        (
            "export function encodeRequest(i) {\n  return import('fs');\n}",
            2,
            10,
        ),
        (
            "function encodeRequest(i) { return import.meta.url; }",
            1,
            36,
        ),
        ("export * as std from 'std';", 1, 1),
        ("export { readFile as encodeRequest } from 'fs';", 1, 1),
    ] {
        let error = Sandbox::load(source, Role::Requester, limits()).unwrap_err();
        assert_eq!(error, SandboxError::Import { line, column }, "{source}");
        assert!(
            error.to_string().contains("cannot import anything"),
            "{error}"
        );
    }
}

#[test]
fn exports_that_are_not_functions_are_refused() {
    for (source, found) in [
        (
            "export const encodeRequest = 42;\nexport function decodeResponse(m) { return m; }",
            "a number",
        ),
        (
            "const encodeRequest = { call: 1 };\nfunction decodeResponse(m) { return m; }\n\
             export { encodeRequest, decodeResponse };",
            "an object",
        ),
        (
            "export let encodeRequest;\nexport function decodeResponse(m) { return m; }",
            "undefined",
        ),
    ] {
        let error = Sandbox::load(source, Role::Requester, limits()).unwrap_err();
        assert_eq!(
            error,
            SandboxError::ExportNotFunction {
                function: Function::EncodeRequest,
                found
            },
            "{source}"
        );
    }
}

#[test]
fn a_module_must_export_its_contract_functions() {
    let source = "function encodeRequest(i) { return i; }\n\
                  export function decodeResponse(m) { return m; }";
    assert_eq!(
        Sandbox::load(source, Role::Requester, limits()).unwrap_err(),
        SandboxError::MissingExport {
            role: Role::Requester,
            function: Function::EncodeRequest
        }
    );
}

#[test]
fn unsupported_export_forms_are_compile_errors_in_place() {
    for (source, line, column, says) in [
        (
            "const a = 1;\nexport default { encodeRequest() {} };",
            2,
            1,
            "export default",
        ),
        ("export const [encodeRequest] = [];", 1, 1, "destructuring"),
        (
            "export function encodeRequest(i) {\n  return i +;\n}",
            2,
            13,
            "",
        ),
    ] {
        match Sandbox::load(source, Role::Requester, limits()) {
            Err(SandboxError::Compile {
                line: l,
                column: c,
                message,
            }) => {
                assert_eq!((l, c), (line, column), "{source}: {message}");
                assert!(message.contains(says), "{source}: {message}");
            }
            other => panic!("{source}: {other:?}"),
        }
    }
}

#[test]
fn modules_keep_the_limits_and_the_isolation() {
    let source = "let calls = 0;\n\
                  export function decodeRequest(m) { if (m.spin) for (;;) {} calls += 1; return calls; }\n\
                  export function encodeResponse(r) { return Math.random(); }";
    let mut handler = Sandbox::load(source, Role::Provider, limits()).expect("loads");
    assert!(matches!(
        handler.call(Function::DecodeRequest, &json!({"spin": true})),
        Err(SandboxError::Timeout { .. })
    ));
    for _ in 0..2 {
        assert_eq!(
            handler.call(Function::DecodeRequest, &json!({})),
            Ok(json!(1))
        );
    }
    assert!(matches!(
        handler.call(Function::EncodeResponse, &json!({})),
        Err(SandboxError::Thrown { message }) if message.contains("Math.random()")
    ));
    let mut clone = handler
        .try_clone()
        .expect("a second engine from the bytecode");
    assert_eq!(
        clone.call(Function::DecodeRequest, &json!({})),
        Ok(json!(1))
    );
    let frames = "export function decodeRequest(m) {\n  throw new TypeError('bad');\n}\n\
                  export function encodeResponse(r) { return r; }";
    let mut handler = Sandbox::load(frames, Role::Provider, limits()).expect("loads");
    let error = handler
        .call(Function::DecodeRequest, &json!({}))
        .unwrap_err();
    assert!(
        error.to_string().contains("handler.js:2:"),
        "stack positions point into the module: {error}"
    );
    let big = format!("export const x = {:?};", "a".repeat(100));
    let mut small = limits();
    small.source_bytes = 64;
    assert!(matches!(
        Sandbox::load(&big, Role::Provider, small),
        Err(SandboxError::SourceTooLarge { .. })
    ));
    assert!(matches!(
        Sandbox::load(
            "export const encodeRequest = () => 1n;",
            Role::Requester,
            limits()
        ),
        Err(SandboxError::Compile { .. })
    ));
}
