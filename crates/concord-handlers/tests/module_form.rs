//! Handler modules written as ES modules (as LLMs usually write JavaScript): `Code::load`
//! runs them in the sandbox (only our template's exact text runs natively) and they answer on
//! the message path exactly as the template does; an `import` is refused with a typed error.

mod common;

use std::sync::Arc;

use common::{product_action, seed};
use concord_handlers::{template, Code, Local, Outcome, Provider, Requester, Verifier};
use concord_sandbox::{Limits, SandboxError};
use serde_json::json;

/// The template for `local`, and the same code as an ES module exporting its two functions.
fn both_forms(local: &Local) -> (String, String) {
    let script = template(&seed(), local).unwrap();
    let mut module = script.clone();
    for function in local.role().functions() {
        let declaration = format!("\nfunction {function}(");
        assert!(
            module.contains(&declaration),
            "template declares {function}"
        );
        module = module.replace(&declaration, &format!("\nexport function {function}("));
    }
    (script, module)
}

fn load(source: &str, local: &Local) -> Code {
    Code::load(source, &seed(), local, Limits::default())
        .unwrap_or_else(|error| panic!("{error}\n{source}"))
}

#[test]
fn an_es_module_runs_in_the_sandbox_and_answers_as_the_template() {
    let document = seed();
    let verifier = Arc::new(Verifier::new(&document).unwrap());
    let requester_side = Local::requester_for(&product_action());
    let provider_side = Local::Provider(product_action());
    let (requester_script, requester_module) = both_forms(&requester_side);
    let (provider_script, provider_module) = both_forms(&provider_side);

    let native = load(&requester_script, &requester_side);
    assert!(native.is_native());
    let sandboxed = load(&requester_module, &requester_side);
    assert!(
        !sandboxed.is_native(),
        "an ES module is not our template's text"
    );
    let mut requesters = [
        Requester::new(native, Arc::clone(&verifier)).unwrap(),
        Requester::new(sandboxed, Arc::clone(&verifier)).unwrap(),
    ];
    let native = load(&provider_script, &provider_side);
    let sandboxed = load(&provider_module, &provider_side);
    assert!(native.is_native() && !sandboxed.is_native());
    let mut providers = [
        Provider::new(native, Arc::clone(&verifier)).unwrap(),
        Provider::new(sandboxed, Arc::clone(&verifier)).unwrap(),
    ];

    let product = json!({"productId": "P1", "productName": "笔记本",
                         "productDescription": "轻薄", "price": 999.5, "currency": "CNY"});
    let requests: Vec<_> = requesters
        .iter_mut()
        .map(|requester| {
            requester
                .encode_request("m1", &json!({"productId": "P1"}))
                .unwrap()
        })
        .collect();
    assert_eq!(requests[0], requests[1]);
    for outcome in [
        Outcome::Result(product),
        Outcome::Error(concord_handlers::ErrorStatus {
            code: 404,
            message: "no product P1".into(),
        }),
    ] {
        let responses: Vec<_> = providers
            .iter_mut()
            .map(|provider| {
                let incoming = provider.decode_request(&requests[0]).unwrap();
                provider
                    .encode_response(&incoming.message_id, &outcome)
                    .unwrap()
            })
            .collect();
        assert_eq!(responses[0], responses[1]);
        let replies: Vec<_> = requesters
            .iter_mut()
            .map(|requester| requester.decode_response(&responses[0]).unwrap())
            .collect();
        assert_eq!(replies[0], replies[1]);
    }
}

#[test]
fn an_import_is_refused_by_name() {
    let requester_side = Local::requester_for(&product_action());
    let (_, module) = both_forms(&requester_side);
    let importing = format!("import {{ lookup }} from \"./catalogue.js\";\n{module}");
    let error = Code::load(&importing, &seed(), &requester_side, Limits::default()).unwrap_err();
    assert_eq!(error, SandboxError::Import { line: 1, column: 1 });
    assert!(error.to_string().contains("cannot import"), "{error}");
}
