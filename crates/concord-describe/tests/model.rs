//! The typed model and the builder: unknown terms survive a round trip, built descriptions
//! are valid and round-trip through serde, and the builder refuses to build invalid ones.

use concord_describe::{
    ActionBuilder, ConsensusProtocol, DataType, EventBuilder, Form, MetaProtocol, Operation,
    ProblemKind, PropertyBuilder, SecurityScheme, Thing, ThingBuilder,
};
use concord_proto::{Capabilities, Capability, MetaVersion, ProtocolHash, META_PROTOCOL_VERSION};
use proptest::prelude::*;
use serde_json::{json, Value};

/// A description with an unknown or prefixed term at every level the model has.
fn everything_extended() -> Value {
    json!({
        "@context": [
            "https://www.w3.org/2022/wot/td/v1.1",
            {"lmos": "https://eclipse.dev/lmos/protocol/v1", "concord": "https://concord.dev/ns/v1#", "ex": "https://example.com/ns#", "@language": "en"}
        ],
        "@type": ["lmos:Agent", "ex:Forecaster"],
        "id": "urn:weather",
        "title": "Weather",
        "titles": {"en": "Weather", "de": "Wetter"},
        "ex:rating": {"stars": 5, "reviews": [1, 2.5, null]},
        "version": {"instance": "1.0.0", "ex:build": 42},
        "links": [{"href": "https://example.com/doc", "rel": "service-doc", "ex:audience": "humans"}],
        "lmos:metadata": {"lmos:vendor": {"lmos:name": "Example", "lmos:url": "https://example.com", "lmos:country": "DE"}, "lmos:tier": "gold"},
        "securityDefinitions": {
            "ace_sc": {"scheme": "ace:ACESecurityScheme", "ace:as": "coaps://as.example.com/token", "ace:cnonce": true},
            "basic_sc": {"scheme": "basic", "in": "header", "ex:realm": "weather"}
        },
        "security": ["basic_sc"],
        "schemaDefinitions": {"error": {"type": "object", "properties": {"code": {"type": "integer"}}, "x-internal": true}},
        "properties": {
            "units": {
                "type": "string", "enum": ["metric", "imperial"], "ex:ui": "dropdown", "pattern": "^[a-z]+$",
                "observable": true,
                "forms": [
                    {"href": "https://weather.example.com/units", "op": "readproperty", "htv:methodName": "GET"},
                    {"href": "https://weather.example.com/units", "op": "writeproperty", "htv:methodName": "PUT"}
                ]
            }
        },
        "actions": {
            "forecast": {
                "ex:cost": 0.01,
                "input": {"type": "object", "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 14.0}}, "additionalProperties": false},
                "output": {"type": "array", "items": [{"type": "string"}, {"type": "number"}], "minItems": 2},
                "forms": [{
                    "href": "https://weather.example.com/forecast",
                    "response": {"contentType": "application/json", "ex:cache": "no-store"},
                    "additionalResponses": [{"success": false, "contentType": "application/json", "schema": "error", "ex:retry": true}],
                    "mqv:qos": 1
                }]
            }
        },
        "events": {
            "alert": {"data": {"type": "null", "const": null, "default": null}, "forms": [{"href": "https://weather.example.com/alerts", "subprotocol": "sse"}], "ex:severity": "high"}
        },
        "concord:metaProtocol": {
            "concord:endpoint": "wss://weather.example.com/concord",
            "concord:versions": ["1.0"],
            "concord:capabilities": ["naturalLanguageProtocol", "futureCapability"],
            "concord:consensusProtocols": [{"concord:uri": "https://protocols.example.com/w/1", "concord:protocolHash": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "ex:note": "v1"}],
            "ex:region": "eu"
        }
    })
}

#[test]
fn unknown_terms_survive_a_round_trip() {
    let original = everything_extended();
    let text = serde_json::to_vec_pretty(&original).unwrap();
    let parsed = concord_describe::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    // The unknown capability is kept, and is the only thing worth a warning.
    let warnings: Vec<ProblemKind> = parsed.report.warnings().map(|p| p.kind).collect();
    assert_eq!(warnings, [ProblemKind::UnknownCapability]);
    let thing = parsed.thing;
    assert_eq!(thing.extensions["ex:rating"]["stars"], 5);
    assert_eq!(
        thing.actions.as_ref().unwrap()["forecast"].forms[0].extensions["mqv:qos"],
        1
    );
    assert_eq!(
        thing.properties.as_ref().unwrap()["units"]
            .schema
            .extensions["pattern"],
        "^[a-z]+$"
    );
    // Kept as written, ignored when read as capabilities (as a peer ignores it).
    let meta = thing.meta_protocol.as_ref().unwrap();
    assert_eq!(
        meta.capability_names.as_deref(),
        Some(
            [
                "naturalLanguageProtocol".to_owned(),
                "futureCapability".to_owned()
            ]
            .as_slice()
        )
    );
    assert_eq!(
        meta.capabilities(),
        [Capability::NaturalLanguageProtocol].into_iter().collect()
    );
    assert!(matches!(
        thing.security_definitions["ace_sc"],
        SecurityScheme::Additional(_)
    ));
    let written = serde_json::to_value(&thing).unwrap();
    assert_eq!(written, original);
    // Twice, through text.
    let again = concord_describe::parse(&serde_json::to_vec(&written).unwrap())
        .unwrap()
        .thing;
    assert_eq!(again, thing);
}

#[test]
fn built_descriptions_are_valid_and_round_trip() {
    let hash = ProtocolHash::of_text("# Weather protocol 1.0\n");
    let capabilities: Capabilities = [
        Capability::FixErrorNegotiation,
        Capability::NaturalLanguageNegotiation,
    ]
    .into_iter()
    .collect();
    let mut meta =
        MetaProtocol::new("wss://weather.example.com/concord").with_capabilities(capabilities);
    meta.consensus_protocols = Some(vec![ConsensusProtocol::new(
        "https://protocols.example.com/weather/1.0",
        hash,
    )]);
    let mut write = Form::new("properties/units");
    write.op = Some(concord_describe::OneOrMany::One(Operation::WriteProperty));
    let thing = ThingBuilder::agent("WeatherAgent")
        .id("urn:uuid:6f1d3a7a-1f97-4e6b-b45f-f3c2e1c84c77")
        .description("Forecasts for any city.")
        .version("1.2.0")
        .base("https://weather.example.com/")
        .vendor("Example AG", "https://example.com")
        .security("bearer_sc", SecurityScheme::bearer())
        .property("units", PropertyBuilder::new("properties/units", json!({"type": "string", "enum": ["metric", "imperial"]})).observable(false).form(write))
        .action(
            "getWeather",
            ActionBuilder::new("actions/getWeather")
                .title("Get weather")
                .input(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
                .output(json!({"type": "string"}))
                .safe(true)
                .idempotent(true)
                .synchronous(true),
        )
        .event("alert", EventBuilder::new("events/alert").description("Severe weather").data(json!({"type": "string"})))
        .meta_protocol(meta)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));

    assert!(thing.validate().is_valid());
    let text = serde_json::to_vec_pretty(&thing).unwrap();
    let report = concord_describe::validate(&text);
    assert!(report.is_valid() && report.warning_count() == 0, "{report}");
    let read = concord_describe::parse(&text).unwrap().thing;
    assert_eq!(read, thing);

    // What a peer reads before connecting.
    let action = &read.actions.as_ref().unwrap()["getWeather"];
    assert_eq!(
        action.input.as_ref().unwrap().data_type,
        Some(DataType::Object)
    );
    assert_eq!(
        action.output.as_ref().unwrap().to_json(),
        json!({"type": "string"})
    );
    let meta = read.meta_protocol.as_ref().unwrap();
    assert_eq!(meta.versions, [META_PROTOCOL_VERSION]);
    // Written as wire names in spec order, whatever order they were given in.
    assert_eq!(
        serde_json::to_value(&thing).unwrap()["concord:metaProtocol"]["concord:capabilities"],
        json!(["naturalLanguageNegotiation", "fixErrorNegotiation"])
    );
    assert_eq!(meta.capabilities(), capabilities);
    assert!(meta.supports(Capability::FixErrorNegotiation));
    assert!(!meta.supports(Capability::VerificationProtocol));
    assert_eq!(meta.consensus_protocols.as_ref().unwrap()[0].hash, hash);
    assert_eq!(
        read.prefix_iri("concord"),
        Some(concord_describe::CONCORD_NAMESPACE)
    );
    assert_eq!(read.security.as_slice(), ["bearer_sc"]);
}

#[test]
fn the_builder_refuses_invalid_descriptions() {
    let error = ThingBuilder::tool("Broken")
        .action(
            "a",
            ActionBuilder::new("https://a.example.com/a").input(json!({"type": "text"})),
        )
        .build()
        .unwrap_err();
    let problem = error.report.errors().next().unwrap();
    assert_eq!(
        (problem.kind, problem.pointer.as_str()),
        (ProblemKind::InvalidValue, "/actions/a/input/type")
    );
    assert!(
        error.to_string().contains("/actions/a/input/type"),
        "{error}"
    );

    let error = ThingBuilder::agent("Broken")
        .meta_protocol(MetaProtocol::new("https://not-a-websocket.example.com/"))
        .build()
        .unwrap_err();
    assert_eq!(
        error.report.errors().next().unwrap().pointer,
        "/concord:metaProtocol/concord:endpoint"
    );

    let error = ThingBuilder::agent("Broken")
        .property(
            "p",
            PropertyBuilder::new("https://a.example.com/p", json!("string")),
        )
        .build()
        .unwrap_err();
    assert_eq!(
        error.report.errors().next().unwrap().pointer,
        "/properties/p"
    );
}

#[test]
fn affordances_built_from_forms_alone_keep_them_in_order_and_need_one() {
    let form = |href: &str, op: Operation| {
        let mut form = Form::new(href);
        form.op = Some(concord_describe::OneOrMany::One(op));
        form
    };
    let thing = ThingBuilder::agent("Two bindings")
        .base("http://127.0.0.1:8080/")
        .action(
            "a",
            ActionBuilder::with_forms([
                form("ws://127.0.0.1:8080/concord", Operation::InvokeAction),
                form("actions/a", Operation::InvokeAction),
            ]),
        )
        .property(
            "p",
            PropertyBuilder::with_forms(
                [form("properties/p", Operation::ReadProperty)],
                json!({"type": "string"}),
            ),
        )
        .event(
            "e",
            EventBuilder::with_forms([form("events/e", Operation::SubscribeEvent)]),
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let hrefs: Vec<&str> = thing.actions.as_ref().unwrap()["a"]
        .forms
        .iter()
        .map(|form| form.href.as_str())
        .collect();
    assert_eq!(hrefs, ["ws://127.0.0.1:8080/concord", "actions/a"]);
    assert_eq!(thing.properties.as_ref().unwrap()["p"].forms.len(), 1);
    assert_eq!(thing.events.as_ref().unwrap()["e"].forms.len(), 1);

    let error = ThingBuilder::agent("No way in")
        .action("a", ActionBuilder::with_forms([]))
        .build()
        .unwrap_err();
    assert_eq!(
        error.report.errors().next().unwrap().pointer,
        "/actions/a/forms"
    );
}

#[test]
fn a_changed_thing_can_be_validated_again() {
    let mut thing: Thing = ThingBuilder::agent("A").build().unwrap();
    assert_eq!(thing.security_definitions.len(), 1);
    thing.security = concord_describe::OneOrMany::One("other_sc".into());
    let report = thing.validate();
    let problem = report.errors().next().unwrap();
    assert_eq!(
        (problem.kind, problem.pointer.as_str(), problem.position),
        (ProblemKind::UndefinedSecurity, "/security", None)
    );
}

// ----- properties of the builder over generated descriptions -----

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z][a-zA-Z0-9_]{0,12}"
}

fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": "null"})),
        (any::<i32>(), any::<i32>()).prop_map(
            |(a, b)| json!({"type": "integer", "minimum": a.min(b), "maximum": a.max(b)})
        ),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!({"type": "number", "default": f})),
        prop::collection::btree_set("[a-z]{1,6}", 1..4)
            .prop_map(|values| json!({"type": "string", "enum": values})),
        ".{0,20}".prop_map(|text| json!({"type": "string", "description": text})),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            inner
                .clone()
                .prop_map(|items| json!({"type": "array", "items": items})),
            prop::collection::btree_map(name(), inner, 1..4).prop_map(|members| {
                let required: Vec<&String> = members.keys().take(1).collect();
                json!({"type": "object", "properties": members, "required": required})
            }),
        ]
    })
}

prop_compose! {
    fn action()(input in schema(), output in schema(), description in ".{0,40}", safe in any::<bool>()) -> ActionBuilder {
        ActionBuilder::new("actions/x").input(input).output(output).description(description).safe(safe)
    }
}

prop_compose! {
    fn meta_protocol()(
        capabilities in prop::sample::subsequence(Capability::ALL.to_vec(), 0..=5),
        versions in prop::collection::btree_set((0u16..4, 0u16..10), 1..4),
        documents in prop::collection::btree_set(".{1,30}", 0..3),
    ) -> MetaProtocol {
        let mut meta = MetaProtocol::new("wss://agent.example.com/concord")
            .with_capabilities(capabilities.into_iter().collect());
        meta.versions = versions.into_iter().map(|(major, minor)| MetaVersion { major, minor }).collect();
        meta.consensus_protocols = Some(
            documents
                .iter()
                .enumerate()
                .map(|(i, text)| ConsensusProtocol::new(format!("https://protocols.example.com/{i}"), ProtocolHash::of_text(text)))
                .collect(),
        );
        meta
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn generated_agents_build_validate_and_round_trip(
        title in ".{1,30}",
        actions in prop::collection::btree_map(name(), action(), 0..4),
        meta in prop::option::of(meta_protocol()),
    ) {
        let mut builder = ThingBuilder::agent(title).base("https://agent.example.com/");
        for (name, action) in actions {
            builder = builder.action(name, action);
        }
        if let Some(meta) = meta {
            builder = builder.meta_protocol(meta);
        }
        let thing = builder.build().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let text = serde_json::to_vec(&thing).unwrap();
        let report = concord_describe::validate(&text);
        prop_assert!(report.is_valid(), "{}", report);
        let read = concord_describe::parse(&text).unwrap().thing;
        prop_assert_eq!(&read, &thing);
        prop_assert_eq!(serde_json::to_value(&read).unwrap(), serde_json::from_slice::<Value>(&text).unwrap());
    }
}

#[test]
fn the_deepest_documents_read_within_a_2_mib_stack() {
    // Nesting up to the default limit (64), in a data schema and in an extension term: reading
    // into the model (serde with flattened maps, which needs more stack per level than plain
    // JSON) must fit the stack of a tokio worker thread.
    let mut schema = json!({"type": "string"});
    for _ in 0..59 {
        schema = json!({"type": "array", "items": schema});
    }
    let mut extension = json!(1);
    for _ in 0..63 {
        extension = json!([extension]);
    }
    let document = json!({
        "@context": "https://www.w3.org/2022/wot/td/v1.1",
        "title": "Deep",
        "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
        "security": "nosec_sc",
        "ex:deep": extension,
        "actions": {"deep": {"input": schema, "forms": [{"href": "https://deep.example.com/"}]}}
    });
    let text = serde_json::to_vec(&document).unwrap();
    let parsed = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || concord_describe::parse(&text).map(|v| v.thing))
        .unwrap()
        .join()
        .expect("no stack overflow");
    let thing = parsed.unwrap_or_else(|e| panic!("{e}"));
    assert!(thing.validate().is_valid());
    // One level more is refused before the model is involved.
    let mut deeper = serde_json::to_value(&thing).unwrap();
    deeper["ex:deep"] = json!([deeper["ex:deep"].take()]);
    let report = concord_describe::validate(&serde_json::to_vec(&deeper).unwrap());
    assert_eq!(report.errors().next().unwrap().kind, ProblemKind::TooDeep);
}
