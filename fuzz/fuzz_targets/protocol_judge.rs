//! Foreign candidate protocols, judged as a provider would judge them: a peer's document is
//! parsed, its envelope inferred and its schemas compared with our actions.
//!
//! Never panics; the same candidate always gets the same decision; and what the rules
//! accept as written, a template serves: a candidate the judge accepts yields a provider
//! module for the action it calls, so an accepted protocol never fails at code generation.
#![no_main]

use concord_handlers::{template, Local};
use concord_negotiate::{ActionSpec, DeterministicNegotiator, JudgeContext, ProtocolDocument};
use concord_proto::Decision;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fn actions() -> Vec<ActionSpec> {
    vec![
        ActionSpec {
            name: "getProductInfo".into(),
            description: "Product information by id.".into(),
            input: json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
            output: json!({"title": "ProductInfo", "type": "object", "properties": {
                "productName": {"type": "string"}, "price": {"type": "number"}},
                "required": ["productName", "price"]}),
        },
        ActionSpec {
            name: "getWeather".into(),
            description: "The weather in a city.".into(),
            input: json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}}, "required": ["city"]}),
            output: json!({"type": "object", "properties": {"temperature": {"type": "number"}, "summary": {"type": "string"}}}),
        },
        ActionSpec {
            name: "convert".into(),
            description: "A value in another unit.".into(),
            input: json!({"type": "number"}),
            output: json!({"type": "number"}),
        },
    ]
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let actions = actions();
    let rules = DeterministicNegotiator::new();
    let decision = rules.judge_now(JudgeContext::Provider { actions: &actions }, text);
    assert_eq!(
        decision,
        rules.judge_now(JudgeContext::Provider { actions: &actions }, text)
    );
    if decision != Decision::Accept {
        return;
    }
    let document = match ProtocolDocument::parse(text) {
        Ok(document) => document,
        Err(error) => panic!("an accepted candidate does not parse: {error}"),
    };
    let Some(local) = Local::provider_for(&document, &actions) else {
        panic!("an accepted candidate calls none of our actions");
    };
    if let Err(error) = template(&document, &local) {
        panic!("an accepted candidate has no template: {error}\n{text}");
    }
});
