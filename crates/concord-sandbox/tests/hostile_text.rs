//! Whatever the module text, loading and calling return a value or a typed error; nothing
//! panics and nothing escapes its limits.

use std::time::Duration;

use concord_sandbox::{Function, Limits, Role, Sandbox, SandboxError};
use proptest::prelude::*;
use serde_json::json;

fn limits() -> Limits {
    let mut limits = Limits::default();
    limits.call_timeout = Duration::from_millis(20);
    limits.memory_bytes = 4 << 20;
    limits
}

/// Pieces of JavaScript (and of attempts to break out of a function wrapper) that random
/// concatenation turns into interesting programs more often than random characters do.
const TOKENS: &[&str] = &[
    "function encodeRequest(input) {",
    "function decodeResponse(m) {",
    "function ",
    "return ",
    "input",
    "m",
    "}",
    "{",
    ")",
    "(",
    ";",
    "\n",
    "for (;;) {}",
    "while (true)",
    "x => x",
    "async ",
    "await ",
    "yield ",
    "\"",
    "'",
    "`",
    "${",
    "/*",
    "*/",
    "//",
    "-->",
    "<!--",
    "#!",
    "\\",
    "\\u0000",
    "\u{0}",
    "\u{2028}",
    "import(",
    "import.meta",
    "export ",
    "export function encodeRequest(input) {",
    "export async function* decodeResponse(m) {",
    "export { encodeRequest as decodeResponse, m as \"encodeRequest\" }",
    "export const encodeRequest = ",
    "export let m, input = ",
    "export default ",
    " from 'std'",
    "import ",
    ", ",
    " as ",
    "/x/",
    "\r",
    "eval(",
    "new Function(",
    "Object.prototype.x = 1;",
    "globalThis",
    "this",
    "arguments",
    "throw ",
    "try {",
    "} catch (e) {",
    "new Promise(() => {})",
    "[].concat(",
    "'x'.repeat(1e9)",
    "/(a+)+$/.test(",
    "...",
    "?.",
    "??",
    "class A extends ",
    "super",
    "new.target",
    "let ",
    "const ",
    "var ",
    "=",
    "==",
    "0x",
    "1e308",
    "9007199254740993n",
    "Symbol()",
    "{ toJSON() {",
    "get x() {",
    "Proxy",
    "Reflect.",
    "with (",
    "debugger;",
    "label:",
    "break label;",
    "0",
    "1",
    ",",
    ".",
    "+",
    "-",
    "*",
    "/",
    "%",
    "!",
];

fn module_text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(proptest::sample::select(TOKENS), 0..40).prop_map(|t| t.concat()),
        any::<String>(),
        "[ -~\n]{0,200}",
    ]
}

fn exercise(source: &str) {
    for role in [Role::Requester, Role::Provider] {
        match Sandbox::load(source, role, limits()) {
            Ok(mut handler) => {
                for function in role.functions() {
                    for input in [json!(null), json!({"a": [1, "x"]}), json!("s")] {
                        let _ = handler.call(function, &input);
                    }
                }
            }
            Err(SandboxError::Engine { message }) => {
                panic!("engine failure on {source:?}: {message}")
            }
            Err(_) => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn any_module_text_gives_a_value_or_a_typed_error(source in module_text()) {
        exercise(&source);
    }

    #[test]
    fn any_text_after_a_valid_module_is_contained(tail in module_text()) {
        let source = format!(
            "function encodeRequest(input) {{ return input; }}\nfunction decodeResponse(m) {{ return m; }}\n{tail}"
        );
        exercise(&source);
    }
}

#[test]
fn a_valid_module_keeps_working_after_random_calls() {
    let mut handler = Sandbox::load(
        "function encodeRequest(input) { return [input]; }\nfunction decodeResponse(m) { return m; }",
        Role::Requester,
        limits(),
    )
    .unwrap();
    assert_eq!(
        handler.call(Function::EncodeRequest, &json!(1)),
        Ok(json!([1]))
    );
}
