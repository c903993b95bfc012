//! Templates run natively: the same plan as the module's JavaScript, so the same results.
//! Property tests on generated protocols, sides and arguments (valid, damaged and of the
//! wrong shape) compare every native call with the module in the sandbox: the same value,
//! byte for byte once serialised (member order and numbers included), or the same error.
//! The test-case runner judges both alike, and `Code::load` runs natively exactly the
//! modules that are our template.

mod common;

use common::generated::{document, local, style, Dice};
use common::{product_action, seed, seed_cases};
use concord_handlers::{
    template, CaseRunner, Code, Local, Provider, Reply, Requester, Template, Verifier,
};
use concord_negotiate::{DeterministicNegotiator, TestCases};
use concord_sandbox::{Function, Limits, Role, Sandbox, SandboxError};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;

/// The same outcome: equal JSON text, or the same thrown message (the sandbox's adds the
/// module's stack frames on lines of their own).
fn same(
    native: &Result<Value, SandboxError>,
    sandboxed: &Result<Value, SandboxError>,
) -> Result<(), String> {
    match (native, sandboxed) {
        (Ok(native), Ok(sandboxed)) => {
            let (native, sandboxed) = (native.to_string(), sandboxed.to_string());
            if native == sandboxed {
                Ok(())
            } else {
                Err(format!("native {native}\nsandbox {sandboxed}"))
            }
        }
        (
            Err(SandboxError::Thrown { message: native }),
            Err(SandboxError::Thrown { message: sandboxed }),
        ) => match sandboxed.strip_prefix(native.as_str()) {
            Some(rest) if rest.is_empty() || rest.starts_with("\n    at ") => Ok(()),
            _ => Err(format!(
                "native threw {native:?}\nsandbox threw {sandboxed:?}"
            )),
        },
        (Err(native), Err(sandboxed)) if native == sandboxed => Ok(()),
        (native, sandboxed) => Err(format!("native {native:?}\nsandbox {sandboxed:?}")),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every call of every generated template gives what the module gives in the sandbox.
    #[test]
    fn native_templates_answer_as_their_modules(
        document in document(),
        restyle in style(),
        provider in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let role = if provider { Role::Provider } else { Role::Requester };
        let side = local(&document, role, restyle);
        let Ok(template) = Template::new(&document, &side) else {
            return Ok(());
        };
        let mut module = Sandbox::load(template.source(), role, Limits::default()).unwrap();
        let mut dice = Dice::new(seed);
        for _ in 0..24 {
            for function in role.functions() {
                let argument = dice.argument(function, &document, &side);
                let sandboxed = module.call(function, &argument);
                if sandboxed.as_ref().is_err_and(SandboxError::is_limit) {
                    // The plan alone has no caps; `Code` applies them (tested below).
                    continue;
                }
                let native = template.call(function, &argument);
                if let Err(difference) = same(&native, &sandboxed) {
                    prop_assert!(
                        false,
                        "{function} of {argument}:\n{difference}\n{}",
                        template.source()
                    );
                }
            }
        }
    }

    /// The runner passes and fails the same cases, at the same steps, for the same reasons,
    /// whichever way the template runs.
    #[test]
    fn the_case_runner_judges_both_alike(
        document in document(),
        requester_style in style(),
        provider_style in style(),
    ) {
        let requester = local(&document, Role::Requester, requester_style);
        let provider = local(&document, Role::Provider, provider_style);
        let (Ok(requester_module), Ok(provider_module)) =
            (template(&document, &requester), template(&document, &provider))
        else {
            return Ok(());
        };
        let Ok(drafted) = DeterministicNegotiator::new().draft_test_cases_now(&document) else {
            return Ok(());
        };
        let cases = TestCases::parse(&drafted).unwrap();
        let verifier = Verifier::new(&document).unwrap();
        let load = |source: &str, side: &Local| {
            Code::load(source, &document, side, Limits::default()).unwrap()
        };
        let (mut native_requester, mut native_provider) =
            (load(&requester_module, &requester), load(&provider_module, &provider));
        prop_assert!(native_requester.is_native() && native_provider.is_native());
        let native = CaseRunner::new(&verifier)
            .with_side(&mut native_requester, &requester)
            .with_side(&mut native_provider, &provider)
            .run(&cases);
        let mut sandboxed_requester = sandboxed(&requester_module, Role::Requester);
        let mut sandboxed_provider = sandboxed(&provider_module, Role::Provider);
        let sandboxed = CaseRunner::new(&verifier)
            .with_side(&mut sandboxed_requester, &requester)
            .with_side(&mut sandboxed_provider, &provider)
            .run(&cases);
        prop_assert_eq!(native.passed(), sandboxed.passed());
        for (native, sandboxed) in native.cases.iter().zip(&sandboxed.cases) {
            let steps = |report: &concord_handlers::CaseReport| -> Vec<String> {
                report
                    .failures
                    .iter()
                    .map(|failure| format!("{}: {}", failure.step, first_line(&failure.problem.to_string())))
                    .collect()
            };
            prop_assert_eq!(steps(native), steps(sandboxed));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// The runtime's message path around a native template (which skips building the
    /// contract's argument objects) gives what it gives around the module in the sandbox:
    /// the same bytes, the same decoded requests and replies, the same errors.
    #[test]
    fn the_message_path_is_the_same_native_or_sandboxed(
        document in document(),
        restyle in style(),
        seed in any::<u64>(),
        caps in prop::option::weighted(0.5, (40usize..500, 40usize..500)),
    ) {
        let mut limits = Limits::default();
        if let Some((input_bytes, output_bytes)) = caps {
            limits.input_bytes = input_bytes;
            limits.output_bytes = output_bytes;
        }
        let requester_side = local(&document, Role::Requester, restyle);
        let provider_side = local(&document, Role::Provider, restyle);
        let (Ok(requester_module), Ok(provider_module)) =
            (template(&document, &requester_side), template(&document, &provider_side))
        else {
            return Ok(());
        };
        let verifier = Arc::new(Verifier::new(&document).unwrap());
        let native = |source: &str, side: &Local| {
            let code = Code::load(source, &document, side, limits.clone()).unwrap();
            assert!(code.is_native());
            code
        };
        let sandboxed = |source: &str, role: Role| {
            Code::from(Sandbox::load(source, role, limits.clone()).unwrap())
        };
        let mut requesters = [
            Requester::new(native(&requester_module, &requester_side), Arc::clone(&verifier)).unwrap(),
            Requester::new(sandboxed(&requester_module, Role::Requester), Arc::clone(&verifier)).unwrap(),
        ];
        let mut providers = [
            Provider::new(native(&provider_module, &provider_side), Arc::clone(&verifier)).unwrap(),
            Provider::new(sandboxed(&provider_module, Role::Provider), Arc::clone(&verifier)).unwrap(),
        ];
        let mut requester_codes = [
            native(&requester_module, &requester_side),
            sandboxed(&requester_module, Role::Requester),
        ];
        let mut provider_codes = [
            native(&provider_module, &provider_side),
            sandboxed(&provider_module, Role::Provider),
        ];
        let text = |result: Result<String, concord_handlers::RuntimeError>| match result {
            Ok(text) => text,
            Err(error) => format!("error: {}", first_line(&error.to_string())),
        };
        let mut dice = Dice::new(seed);
        for _ in 0..16 {
            // Whole arguments, through `Code::call`, under the same caps.
            for (codes, side) in [
                (&mut requester_codes, &requester_side),
                (&mut provider_codes, &provider_side),
            ] {
                for function in side.role().functions() {
                    let argument = dice.argument(function, &document, side);
                    let [native, sandboxed] = codes.each_mut().map(|code| code.call(function, &argument));
                    if let Err(difference) = same(&native, &sandboxed) {
                        prop_assert!(false, "{function} of {argument}:\n{difference}");
                    }
                }
            }
            let call = dice.argument(Function::EncodeRequest, &document, &requester_side);
            let input = call.get("input").cloned().unwrap_or(Value::Null);
            let [native, sandboxed] = requesters.each_mut().map(|requester| {
                text(requester.encode_request("m1", &input).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
            });
            prop_assert_eq!(native, sandboxed, "encodeRequest of {}", input);

            let request = dice.argument(Function::DecodeRequest, &document, &provider_side).to_string();
            let [native, sandboxed] = providers.each_mut().map(|provider| {
                text(provider.decode_request(request.as_bytes()).map(|incoming| format!("{incoming:?}")))
            });
            prop_assert_eq!(native, sandboxed, "decodeRequest of {}", request);

            let outcome = match dice.argument(Function::EncodeResponse, &document, &provider_side) {
                Value::Object(outcome) if outcome.contains_key("error") => {
                    concord_handlers::Outcome::Error(concord_handlers::ErrorStatus {
                        code: outcome["error"]["code"].as_i64().unwrap_or(500),
                        message: outcome["error"]["message"].as_str().unwrap_or("").to_owned(),
                    })
                }
                Value::Object(outcome) => concord_handlers::Outcome::Result(
                    outcome.get("result").cloned().unwrap_or(Value::Null),
                ),
                other => concord_handlers::Outcome::Result(other),
            };
            let [native, sandboxed] = providers.each_mut().map(|provider| {
                text(provider.encode_response("m1", &outcome).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
            });
            prop_assert_eq!(native, sandboxed, "encodeResponse of {:?}", outcome);

            let response = dice.argument(Function::DecodeResponse, &document, &requester_side).to_string();
            let [native, sandboxed] = requesters.each_mut().map(|requester| {
                text(requester.decode_response(response.as_bytes()).map(|reply| format!("{reply:?}")))
            });
            prop_assert_eq!(native, sandboxed, "decodeResponse of {}", response);
        }
    }
}

fn sandboxed(source: &str, role: Role) -> Code {
    Code::from(Sandbox::load(source, role, Limits::default()).unwrap())
}

/// A problem's text without the sandbox's stack frames.
fn first_line(text: &str) -> &str {
    text.split("\n    at ").next().unwrap_or(text)
}

#[test]
fn the_seed_cases_pass_natively() {
    let document = seed();
    let cases = seed_cases();
    let action = product_action();
    for (requester, provider) in [
        (
            Local::from_protocol(&document, Role::Requester, "getProductInfo"),
            Local::from_protocol(&document, Role::Provider, "getProductInfo"),
        ),
        (
            Local::requester_for(&action),
            Local::Provider(action.clone()),
        ),
    ] {
        let load = |side: &Local| {
            let code = Code::load(
                &template(&document, side).unwrap(),
                &document,
                side,
                Limits::default(),
            )
            .unwrap();
            assert!(code.is_native(), "{side:?}");
            code
        };
        let (mut requester_code, mut provider_code) = (load(&requester), load(&provider));
        let verifier = Verifier::new(&document).unwrap();
        let report = CaseRunner::new(&verifier)
            .with_side(&mut requester_code, &requester)
            .with_side(&mut provider_code, &provider)
            .run(&cases);
        assert!(report.passed(), "{}", report.details());
        assert_eq!(report.cases.len(), 2);
    }
}

#[test]
fn only_our_template_runs_natively() {
    let document = seed();
    let side = Local::Provider(product_action());
    let module = template(&document, &side).unwrap();
    let limits = Limits::default();
    let load = |source: &str, side: &Local| Code::load(source, &document, side, limits.clone());

    assert!(load(&module, &side).unwrap().is_native());
    // One byte off, another side's template, another side: the sandbox runs it.
    assert!(!load(&format!("{module} "), &side).unwrap().is_native());
    let mut other = product_action();
    other.input = json!({"type": "object", "properties": {"product_id": {"type": "string"}}, "required": ["product_id"]});
    let other_side = Local::Provider(other);
    assert!(!load(&module, &other_side).unwrap().is_native());
    let requester = Local::requester_for(&product_action());
    assert!(matches!(
        load(&module, &requester),
        Err(SandboxError::MissingExport { .. })
    ));
    // The sandbox's limits still decide what loads at all.
    let mut small = Limits::default();
    small.source_bytes = module.len() - 1;
    assert!(matches!(
        Code::load(&module, &document, &side, small),
        Err(SandboxError::SourceTooLarge { .. })
    ));
    let mut invalid = Limits::default();
    invalid.stack_bytes = 0;
    assert!(matches!(
        Code::load(&module, &document, &side, invalid),
        Err(SandboxError::InvalidLimit { .. })
    ));
}

/// The runtime's message path is the same around native code: schema checks on both ways,
/// the input limit on received bytes, errors typed by whose fault they are.
#[test]
fn the_message_path_checks_native_code_as_any_other() {
    let document = seed();
    let verifier = Arc::new(Verifier::new(&document).unwrap());
    let requester_side = Local::requester_for(&product_action());
    let provider_side = Local::Provider(product_action());
    let mut limits = Limits::default();
    limits.input_bytes = 400;
    let load = |side: &Local| {
        Code::load(
            &template(&document, side).unwrap(),
            &document,
            side,
            limits.clone(),
        )
        .unwrap()
    };
    let mut requester = Requester::new(load(&requester_side), Arc::clone(&verifier)).unwrap();
    let mut provider = Provider::new(load(&provider_side), Arc::clone(&verifier)).unwrap();
    assert!(requester.code().is_native() && provider.code().is_native());

    let request = requester
        .encode_request("m1", &json!({"productId": "P1"}))
        .unwrap();
    let incoming = provider.decode_request(&request).unwrap();
    assert_eq!(incoming.input, json!({"productId": "P1"}));
    let product = json!({"productId": "P1", "productName": "Laptop",
        "productDescription": "A laptop.", "price": 1299.99, "currency": "USD"});
    let response = provider
        .encode_response("m1", &concord_handlers::Outcome::Result(product.clone()))
        .unwrap();
    assert_eq!(
        requester.decode_response(&response).unwrap(),
        Reply::Output {
            message_id: "m1".into(),
            output: product.clone()
        }
    );
    // A result that breaks the response schema is ours to fix; a request that breaks the
    // request schema is the peer's; received bytes over the input limit are not parsed.
    let mut cheap = product.clone();
    cheap["price"] = json!("cheap");
    let wrong = provider.encode_response("m1", &concord_handlers::Outcome::Result(cheap));
    assert!(
        matches!(
            wrong,
            Err(concord_handlers::RuntimeError::InvalidOutgoing(_))
        ),
        "{wrong:?}"
    );
    let bad = provider.decode_request(
        br#"{"messageId":"m2","type":"REQUEST","action":"getProductInfo","productId":7}"#,
    );
    assert!(
        matches!(bad, Err(concord_handlers::RuntimeError::InvalidIncoming(_))),
        "{bad:?}"
    );
    let large = format!(
        r#"{{"messageId":"m3","type":"REQUEST","action":"getProductInfo","productId":"{}"}}"#,
        "x".repeat(400)
    );
    assert!(matches!(
        provider.decode_request(large.as_bytes()),
        Err(concord_handlers::RuntimeError::Wire { .. })
    ));
    // A module's throw reaches the caller as the sandbox's would.
    let missing = requester.encode_request("m4", &json!({"productName": "no id"}));
    match missing {
        Err(concord_handlers::RuntimeError::Handler {
            function: Function::EncodeRequest,
            source: SandboxError::Thrown { message },
        }) => assert_eq!(
            message,
            r#"TypeError: the input lacks "productId", which is required"#
        ),
        other => panic!("{other:?}"),
    }
}
