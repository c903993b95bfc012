//! Rules beyond the external corpus: Concord's extension, the LMOS terms, security
//! references and combos, links, URIs, data schemas. Each case changes one thing in a valid
//! agent description and expects one problem, by kind and pointer.

use concord_describe::{ProblemKind, Report, Severity};
use serde_json::{json, Value};

const HASH: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

/// A valid agent description using every part of Concord's extension.
fn agent() -> Value {
    json!({
        "@context": [
            "https://www.w3.org/2022/wot/td/v1.1",
            {"lmos": "https://eclipse.dev/lmos/protocol/v1", "concord": "https://concord.dev/ns/v1#"}
        ],
        "@type": "lmos:Agent",
        "id": "urn:uuid:6f1d3a7a-1f97-4e6b-b45f-f3c2e1c84c77",
        "title": "WeatherAgent",
        "base": "https://weather.example.com/",
        "lmos:metadata": {"lmos:vendor": {"lmos:name": "Example AG", "lmos:url": "https://example.com"}},
        "securityDefinitions": {
            "basic_sc": {"scheme": "basic", "in": "header"},
            "bearer_sc": {"scheme": "bearer", "format": "jwt"},
            "both_sc": {"scheme": "combo", "allOf": ["basic_sc", "bearer_sc"]}
        },
        "security": "both_sc",
        "actions": {
            "getWeather": {
                "input": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false},
                "output": {"type": "string"},
                "forms": [{"href": "actions/getWeather", "op": "invokeaction"}]
            }
        },
        "concord:metaProtocol": {
            "concord:endpoint": "wss://weather.example.com/concord",
            "concord:versions": ["1.0", "1.1"],
            "concord:capabilities": ["naturalLanguageNegotiation", "testCasesNegotiation"],
            "concord:consensusProtocols": [
                {"concord:uri": "https://protocols.example.com/weather/1.0", "concord:protocolHash": HASH}
            ]
        }
    })
}

fn check(document: &Value) -> Report {
    concord_describe::validate(&serde_json::to_vec_pretty(document).unwrap())
}

/// Applies `change` to the agent and expects a problem of `kind` at `pointer`.
fn expect(change: impl FnOnce(&mut Value), kind: ProblemKind, pointer: &str) {
    let mut document = agent();
    change(&mut document);
    let report = check(&document);
    assert!(
        report
            .errors()
            .chain(report.warnings())
            .any(|p| p.kind == kind && p.pointer == pointer),
        "expected {kind} at {pointer}, got:\n{report}"
    );
    if kind.severity() == Severity::Warning {
        assert!(
            report.is_valid(),
            "a warning alone keeps the document valid:\n{report}"
        );
    }
}

#[test]
fn the_base_agent_is_valid_and_clean() {
    let report = check(&agent());
    assert!(report.is_valid() && report.warning_count() == 0, "{report}");
    let thing = concord_describe::parse(&serde_json::to_vec(&agent()).unwrap())
        .unwrap()
        .thing;
    let meta = thing.meta_protocol.unwrap();
    assert_eq!(meta.endpoint_url().unwrap().scheme(), "wss");
    assert_eq!(
        meta.highest_common_version(&["1.1".parse().unwrap()]),
        Some("1.1".parse().unwrap())
    );
    let protocol = meta
        .consensus_protocol("https://protocols.example.com/weather/1.0")
        .unwrap();
    assert!(protocol.hash.matches("abc"));
}

#[test]
fn versions_are_canonical_major_minor() {
    let problems = |version: &str| {
        let mut document = agent();
        document["concord:metaProtocol"]["concord:versions"] = json!(["1.0", version]);
        let report = check(&document);
        report
            .errors()
            .map(|p| (p.kind, p.pointer.clone(), p.message.clone()))
            .collect::<Vec<_>>()
    };
    let at = "/concord:metaProtocol/concord:versions/1".to_owned();
    // Looser spellings a hello accepts ("2" for 2.0) are not a version in a description.
    for bad in [
        "2", "1.", ".1", "01.0", "1.00", "1.0.0", "v1.0", "-1.0", "1.+0", " 1.0", "",
    ] {
        assert_eq!(
            problems(bad),
            [(
                ProblemKind::InvalidValue,
                at.clone(),
                format!("`{bad}` is not a meta-protocol version: expected MAJOR.MINOR in decimal without leading zeros, such as 1.0")
            )],
            "{bad:?}"
        );
    }
    assert_eq!(
        problems("65536.0"),
        [(
            ProblemKind::InvalidValue,
            at,
            "`65536.0` is not a meta-protocol version: MAJOR and MINOR are each at most 65535"
                .to_owned()
        )]
    );
    for good in ["0.0", "10.2", "65535.65535"] {
        assert_eq!(problems(good), [], "{good}");
    }
    // Versions read in numeric order: 10.2 is above 9.9.
    let mut document = agent();
    document["concord:metaProtocol"]["concord:versions"] = json!(["9.9", "10.2"]);
    let thing = concord_describe::parse(&serde_json::to_vec(&document).unwrap())
        .unwrap()
        .thing;
    let meta = thing.meta_protocol.unwrap();
    let ours = ["9.9".parse().unwrap(), "10.2".parse().unwrap()];
    assert_eq!(
        meta.highest_common_version(&ours),
        Some("10.2".parse().unwrap())
    );
}

#[test]
fn unknown_capabilities_are_kept_with_a_warning() {
    let mut document = agent();
    document["concord:metaProtocol"]["concord:capabilities"] =
        json!(["testCasesNegotiation", "telepathy"]);
    let text = serde_json::to_vec(&document).unwrap();
    let validated = concord_describe::parse(&text).unwrap();
    let warnings: Vec<_> = validated
        .report
        .warnings()
        .map(|p| (p.kind, p.pointer.as_str(), p.message.as_str()))
        .collect();
    assert_eq!(
        warnings,
        [(
            ProblemKind::UnknownCapability,
            "/concord:metaProtocol/concord:capabilities/1",
            "unknown capability `telepathy` (peers ignore it); known: naturalLanguageProtocol, verificationProtocol, naturalLanguageNegotiation, testCasesNegotiation, fixErrorNegotiation, encryptedChannel"
        )]
    );
    let meta = validated.thing.meta_protocol.as_ref().unwrap();
    assert!(meta.supports(concord_proto::Capability::TestCasesNegotiation));
    assert_eq!(
        serde_json::to_value(&validated.thing).unwrap(),
        document,
        "the unknown name is written back unchanged"
    );
}

#[test]
fn meta_protocol_terms() {
    let at = "/concord:metaProtocol";
    expect(
        |d| {
            d["concord:metaProtocol"]["concord:endpoint"] =
                json!("https://weather.example.com/concord")
        },
        ProblemKind::InvalidValue,
        &format!("{at}/concord:endpoint"),
    );
    expect(
        |d| d["concord:metaProtocol"]["concord:endpoint"] = json!("/concord"),
        ProblemKind::InvalidUri,
        &format!("{at}/concord:endpoint"),
    );
    expect(
        |d| {
            d["concord:metaProtocol"]
                .as_object_mut()
                .unwrap()
                .remove("concord:endpoint");
        },
        ProblemKind::MissingTerm,
        &format!("{at}/concord:endpoint"),
    );
    expect(
        |d| {
            d["concord:metaProtocol"]
                .as_object_mut()
                .unwrap()
                .remove("concord:versions");
        },
        ProblemKind::MissingTerm,
        &format!("{at}/concord:versions"),
    );
    expect(
        |d| d["concord:metaProtocol"]["concord:versions"] = json!([]),
        ProblemKind::Empty,
        &format!("{at}/concord:versions"),
    );
    expect(
        |d| d["concord:metaProtocol"]["concord:versions"] = json!(["1.0", "v2"]),
        ProblemKind::InvalidValue,
        &format!("{at}/concord:versions/1"),
    );
    expect(
        |d| d["concord:metaProtocol"]["concord:versions"] = json!(["1.0", "1.0"]),
        ProblemKind::DuplicateValue,
        &format!("{at}/concord:versions/1"),
    );
    expect(
        |d| d["concord:metaProtocol"]["concord:capabilities"] = json!(["telepathy"]),
        ProblemKind::UnknownCapability,
        &format!("{at}/concord:capabilities/0"),
    );
    expect(
        |d| {
            d["concord:metaProtocol"]["concord:capabilities"] =
                json!(["fixErrorNegotiation", "fixErrorNegotiation"])
        },
        ProblemKind::DuplicateValue,
        &format!("{at}/concord:capabilities/1"),
    );
    expect(
        |d| d["concord:metaProtocol"]["concord:capabilities"] = json!([7]),
        ProblemKind::WrongType,
        &format!("{at}/concord:capabilities/0"),
    );
    let protocol = format!("{at}/concord:consensusProtocols/0");
    expect(
        |d| {
            d["concord:metaProtocol"]["concord:consensusProtocols"][0]["concord:protocolHash"] =
                json!(HASH.to_uppercase())
        },
        ProblemKind::InvalidValue,
        &format!("{protocol}/concord:protocolHash"),
    );
    expect(
        |d| {
            d["concord:metaProtocol"]["concord:consensusProtocols"][0]["concord:protocolHash"] =
                json!(format!("sha256:{HASH}"))
        },
        ProblemKind::InvalidValue,
        &format!("{protocol}/concord:protocolHash"),
    );
    expect(
        |d| {
            d["concord:metaProtocol"]["concord:consensusProtocols"][0]["concord:protocolHash"] =
                json!(&HASH[1..])
        },
        ProblemKind::InvalidValue,
        &format!("{protocol}/concord:protocolHash"),
    );
    expect(
        |d| {
            d["concord:metaProtocol"]["concord:consensusProtocols"][0]
                .as_object_mut()
                .unwrap()
                .remove("concord:protocolHash");
        },
        ProblemKind::MissingTerm,
        &format!("{protocol}/concord:protocolHash"),
    );
    expect(
        |d| {
            d["concord:metaProtocol"]["concord:consensusProtocols"][0]["concord:uri"] =
                json!("weather/1.0")
        },
        ProblemKind::InvalidUri,
        &format!("{protocol}/concord:uri"),
    );
    expect(
        |d| {
            let entry = d["concord:metaProtocol"]["concord:consensusProtocols"][0].clone();
            d["concord:metaProtocol"]["concord:consensusProtocols"]
                .as_array_mut()
                .unwrap()
                .push(entry);
        },
        ProblemKind::DuplicateValue,
        &format!("{at}/concord:consensusProtocols/1/concord:uri"),
    );
    expect(
        |d| d["concord:metaProtocol"]["concord:endpiont"] = json!("typo"),
        ProblemKind::UnknownExtensionTerm,
        &format!("{at}/concord:endpiont"),
    );
    expect(
        |d| d["concord:metaProtocol"] = json!("wss://x"),
        ProblemKind::WrongType,
        at,
    );
}

#[test]
fn prefixes_must_be_declared() {
    expect(
        |d| d["@context"][1].as_object_mut().unwrap().clear(),
        ProblemKind::UndeclaredPrefix,
        "/@type",
    );
    expect(
        |d| {
            d["@context"][1].as_object_mut().unwrap().remove("concord");
        },
        ProblemKind::UndeclaredPrefix,
        "/concord:metaProtocol",
    );
    expect(
        |d| d["@context"][1]["concord"] = json!("https://concord.dev/ns/v2#"),
        ProblemKind::InvalidContext,
        "/@context",
    );
    expect(
        |d| d["@context"][1]["lmos"] = json!("https://eclipse.dev/lmos/protocol/v2"),
        ProblemKind::UnexpectedNamespace,
        "/@context",
    );
}

#[test]
fn lmos_terms_and_identifier_spellings() {
    expect(
        |d| d["lmos:metadata"]["lmos:vendor"]["lmos:url"] = json!("telekom"),
        ProblemKind::InvalidUri,
        "/lmos:metadata/lmos:vendor/lmos:url",
    );
    expect(
        |d| d["lmos:metadata"]["lmos:vendor"] = json!("Example AG"),
        ProblemKind::WrongType,
        "/lmos:metadata/lmos:vendor",
    );
    expect(
        |d| d["thingID"] = json!("urn:other"),
        ProblemKind::Conflict,
        "/thingID",
    );
    expect(
        |d| {
            d["thingId"] = d["id"].clone();
            d["thingID"] = d["id"].clone();
        },
        ProblemKind::Conflict,
        "/thingID",
    );
    // Either spelling alone is accepted; the model writes `thingId`.
    for spelling in ["thingId", "thingID"] {
        let mut document = agent();
        let id = document.as_object_mut().unwrap().remove("id").unwrap();
        document[spelling] = id;
        let thing = concord_describe::parse(&serde_json::to_vec(&document).unwrap())
            .unwrap()
            .thing;
        assert_eq!(
            thing.identifier(),
            Some("urn:uuid:6f1d3a7a-1f97-4e6b-b45f-f3c2e1c84c77")
        );
        let written = serde_json::to_value(&thing).unwrap();
        assert!(written.get("thingId").is_some() && written.get("thingID").is_none());
    }
}

#[test]
fn security_names_and_combos() {
    expect(
        |d| d["security"] = json!(["missing_sc"]),
        ProblemKind::UndefinedSecurity,
        "/security/0",
    );
    expect(
        |d| d["security"] = json!([]),
        ProblemKind::Empty,
        "/security",
    );
    expect(
        |d| d["securityDefinitions"]["both_sc"]["allOf"] = json!(["basic_sc", "nope_sc"]),
        ProblemKind::UndefinedSecurity,
        "/securityDefinitions/both_sc/allOf/1",
    );
    expect(
        |d| d["securityDefinitions"]["both_sc"]["allOf"] = json!(["basic_sc"]),
        ProblemKind::InvalidValue,
        "/securityDefinitions/both_sc/allOf",
    );
    expect(
        |d| d["securityDefinitions"]["both_sc"]["oneOf"] = json!(["basic_sc", "bearer_sc"]),
        ProblemKind::Conflict,
        "/securityDefinitions/both_sc/allOf",
    );
    expect(
        |d| {
            d["securityDefinitions"]["both_sc"]
                .as_object_mut()
                .unwrap()
                .remove("allOf");
        },
        ProblemKind::MissingTerm,
        "/securityDefinitions/both_sc/oneOf",
    );
    expect(
        |d| d["securityDefinitions"]["both_sc"]["allOf"] = json!(["both_sc", "basic_sc"]),
        ProblemKind::InvalidValue,
        "/securityDefinitions/both_sc/allOf/0",
    );
    expect(
        |d| {
            d["securityDefinitions"]["a_sc"] =
                json!({"scheme": "combo", "oneOf": ["b_sc", "basic_sc"]});
            d["securityDefinitions"]["b_sc"] =
                json!({"scheme": "combo", "oneOf": ["a_sc", "basic_sc"]});
        },
        ProblemKind::InvalidValue,
        "/securityDefinitions/a_sc",
    );
    expect(
        |d| d["actions"]["getWeather"]["forms"][0]["security"] = json!("nope_sc"),
        ProblemKind::UndefinedSecurity,
        "/actions/getWeather/forms/0/security",
    );
    expect(
        |d| d["securityDefinitions"]["auto_sc"] = json!({"scheme": "auto", "name": "x"}),
        ProblemKind::Conflict,
        "/securityDefinitions/auto_sc/name",
    );
    expect(
        |d| d["securityDefinitions"]["basic_sc"]["in"] = json!("uri"),
        ProblemKind::InvalidValue,
        "/securityDefinitions/basic_sc/in",
    );
    expect(
        |d| d["securityDefinitions"]["d_sc"] = json!({"scheme": "digest", "qop": "none"}),
        ProblemKind::InvalidValue,
        "/securityDefinitions/d_sc/qop",
    );
    expect(
        |d| d["securityDefinitions"]["x_sc"] = json!({"scheme": "Basic"}),
        ProblemKind::UnknownSecurityScheme,
        "/securityDefinitions/x_sc/scheme",
    );
    // A prefixed extension scheme is fine.
    let mut document = agent();
    document["securityDefinitions"]["ace_sc"] =
        json!({"scheme": "ace:ACESecurityScheme", "ace:as": "coaps://as.example.com/token"});
    assert!(check(&document).is_valid());
}

#[test]
fn links_and_uris() {
    let link = |d: &mut Value, link: Value| d["links"] = json!([link]);
    expect(
        |d| {
            d["links"] = json!([
                {"rel": "type", "href": "https://models.example.com/a.tm.jsonld", "type": "application/tm+json"},
                {"rel": "type", "href": "https://models.example.com/b.tm.jsonld"}
            ])
        },
        ProblemKind::MultipleTypeLinks,
        "/links/1/rel",
    );
    expect(
        |d| {
            link(
                d,
                json!({"rel": "service-doc", "href": "manual.pdf", "sizes": "16x16"}),
            )
        },
        ProblemKind::Conflict,
        "/links/0/sizes",
    );
    expect(
        |d| {
            link(
                d,
                json!({"rel": "icon", "href": "icon.png", "sizes": "big"}),
            )
        },
        ProblemKind::InvalidValue,
        "/links/0/sizes",
    );
    expect(
        |d| {
            link(
                d,
                json!({"rel": "tm:extends", "href": "https://models.example.com/base.tm.jsonld"}),
            )
        },
        ProblemKind::ThingModel,
        "/links/0/rel",
    );
    expect(
        |d| link(d, json!({"href": "manual.pdf", "hreflang": "en_US"})),
        ProblemKind::InvalidValue,
        "/links/0/hreflang",
    );
    expect(
        |d| d["actions"]["getWeather"]["forms"][0]["href"] = json!("actions/get weather"),
        ProblemKind::InvalidUri,
        "/actions/getWeather/forms/0/href",
    );
    expect(
        |d| d["actions"]["getWeather"]["forms"][0]["href"] = json!("actions/{city"),
        ProblemKind::InvalidUri,
        "/actions/getWeather/forms/0/href",
    );
    expect(
        |d| {
            d.as_object_mut().unwrap().remove("base");
        },
        ProblemKind::RelativeHrefWithoutBase,
        "/actions/getWeather/forms/0/href",
    );
    expect(
        |d| d["base"] = json!("weather/"),
        ProblemKind::InvalidUri,
        "/base",
    );
    expect(
        |d| d["base"] = json!("urn:weather"),
        ProblemKind::InvalidUri,
        "/base",
    );
    expect(
        |d| d["id"] = json!("weather agent"),
        ProblemKind::InvalidUri,
        "/id",
    );
    expect(
        |d| d["created"] = json!("2024-02-30T00:00:00Z"),
        ProblemKind::InvalidValue,
        "/created",
    );
    expect(
        |d| d["titles"] = json!({"en_US": "Weather"}),
        ProblemKind::InvalidValue,
        "/titles/en_US",
    );
    expect(
        |d| d["@context"] = json!("https://www.w3.org/2019/wot/td/v1"),
        ProblemKind::InvalidContext,
        "/@context",
    );
    expect(
        |d| {
            d["@context"] = json!([
                "https://www.w3.org/2022/wot/td/v1.1",
                "https://www.w3.org/2019/wot/td/v1"
            ])
        },
        ProblemKind::InvalidContext,
        "/@context/1",
    );
    expect(
        |d| d["@type"] = json!(["lmos:Agent", "tm:ThingModel"]),
        ProblemKind::ThingModel,
        "/@type",
    );
}

#[test]
fn forms_and_operations() {
    let forms = "/actions/getWeather/forms/0";
    expect(
        |d| d["actions"]["getWeather"]["forms"][0]["op"] = json!("readproperty"),
        ProblemKind::InvalidOperation,
        &format!("{forms}/op"),
    );
    expect(
        |d| d["actions"]["getWeather"]["forms"][0]["contentType"] = json!("json"),
        ProblemKind::InvalidValue,
        &format!("{forms}/contentType"),
    );
    expect(
        |d| d["actions"]["getWeather"]["forms"] = json!([]),
        ProblemKind::Empty,
        "/actions/getWeather/forms",
    );
    expect(
        |d| d["forms"] = json!([{"href": "all"}]),
        ProblemKind::MissingTerm,
        "/forms/0/op",
    );
    expect(
        |d| d["forms"] = json!([{"href": "all", "op": "invokeaction"}]),
        ProblemKind::InvalidOperation,
        "/forms/0/op",
    );
    expect(
        |d| {
            d["actions"]["getWeather"]["forms"][0]["additionalResponses"] =
                json!([{"success": false, "contentType": "application/json", "schema": "error"}])
        },
        ProblemKind::UndefinedSchema,
        &format!("{forms}/additionalResponses/0/schema"),
    );
}

#[test]
fn data_schemas() {
    let input = "/actions/getWeather/input";
    expect(
        |d| {
            d["actions"]["getWeather"]["input"]["properties"]["city"]["enum"] = json!(["Berlin", 7])
        },
        ProblemKind::ValueTypeMismatch,
        &format!("{input}/properties/city/enum/1"),
    );
    expect(
        |d| d["actions"]["getWeather"]["input"]["properties"]["city"]["const"] = json!(null),
        ProblemKind::ValueTypeMismatch,
        &format!("{input}/properties/city/const"),
    );
    expect(
        |d| d["actions"]["getWeather"]["output"] = json!({"type": "integer", "default": 1.5}),
        ProblemKind::ValueTypeMismatch,
        "/actions/getWeather/output/default",
    );
    expect(
        |d| d["actions"]["getWeather"]["output"] = json!({"type": "integer", "enum": [1, 1.0]}),
        ProblemKind::DuplicateValue,
        "/actions/getWeather/output/enum/1",
    );
    expect(
        |d| d["actions"]["getWeather"]["output"] = json!({"type": "string", "minLength": -1}),
        ProblemKind::InvalidValue,
        "/actions/getWeather/output/minLength",
    );
    expect(
        |d| d["actions"]["getWeather"]["output"] = json!({"type": "number", "multipleOf": 0}),
        ProblemKind::InvalidValue,
        "/actions/getWeather/output/multipleOf",
    );
    expect(
        |d| d["actions"]["getWeather"]["output"] = json!({"type": "array"}),
        ProblemKind::ArrayWithoutItems,
        "/actions/getWeather/output",
    );
    expect(
        |d| {
            d["actions"]["getWeather"]["output"] =
                json!({"type": "string", "enum": ["a"], "const": "a"})
        },
        ProblemKind::EnumWithConst,
        "/actions/getWeather/output/const",
    );
    // JSON Schema keywords TD does not define must still be well formed.
    expect(
        |d| d["actions"]["getWeather"]["input"]["additionalProperties"] = json!("no"),
        ProblemKind::InvalidSchema,
        &format!("{input}/additionalProperties"),
    );
    expect(
        |d| d["actions"]["getWeather"]["input"]["required"] = json!(["city", "city"]),
        ProblemKind::InvalidSchema,
        &format!("{input}/required"),
    );
    expect(
        |d| d["actions"]["getWeather"]["input"] = json!([]),
        ProblemKind::WrongType,
        input,
    );
}

#[test]
fn property_read_write_consistency() {
    let property = |d: &mut Value, p: Value| d["properties"] = json!({"mode": p});
    expect(
        |d| {
            property(
                d,
                json!({"type": "string", "readOnly": true, "forms": [{"href": "mode", "op": ["readproperty", "writeproperty"]}]}),
            )
        },
        ProblemKind::ReadWriteConflict,
        "/properties/mode/forms/0/op",
    );
    expect(
        |d| {
            property(
                d,
                json!({"type": "string", "writeOnly": true, "observable": true, "forms": [{"href": "mode", "op": "writeproperty"}]}),
            )
        },
        ProblemKind::ReadWriteConflict,
        "/properties/mode",
    );
}

#[test]
fn http_forms_name_a_real_method_that_fits_their_operations_and_a_known_subprotocol() {
    let form = "/actions/getWeather/forms/0";
    expect(
        |d| d["actions"]["getWeather"]["forms"][0]["htv:methodName"] = json!("post"),
        ProblemKind::InvalidValue,
        &format!("{form}/htv:methodName"),
    );
    expect(
        |d| d["actions"]["getWeather"]["forms"][0]["htv:methodName"] = json!("FETCH"),
        ProblemKind::InvalidValue,
        &format!("{form}/htv:methodName"),
    );
    expect(
        |d| d["actions"]["getWeather"]["forms"][0]["htv:methodName"] = json!("GET"),
        ProblemKind::Conflict,
        &format!("{form}/htv:methodName"),
    );
    expect(
        |d| d["actions"]["getWeather"]["forms"][0]["subprotocol"] = json!("sse"),
        ProblemKind::Conflict,
        &format!("{form}/subprotocol"),
    );
    let event = |subprotocol: &str| {
        let mut document = agent();
        document["events"] = json!({"changed": {"forms": [{
            "href": "events/changed",
            "op": ["subscribeevent", "unsubscribeevent"],
            "subprotocol": subprotocol,
            "contentType": "text/event-stream",
            "htv:methodName": "GET"
        }]}});
        check(&document)
    };
    // Server-Sent Events and long polls on an event are fine; an unknown subprotocol is not.
    assert!(event("sse").is_valid(), "{}", event("sse"));
    assert!(event("longpoll").is_valid(), "{}", event("longpoll"));
    let report = event("mqtt");
    assert!(
        report.errors().any(|p| p.kind == ProblemKind::InvalidValue
            && p.pointer == "/events/changed/forms/0/subprotocol"),
        "{report}"
    );
    // A form that is not HTTP is left to its own binding.
    let mut document = agent();
    document["actions"]["getWeather"]["forms"][0]["href"] = json!("mqtt://broker/getWeather");
    document["actions"]["getWeather"]["forms"][0]["htv:methodName"] = json!("GET");
    assert!(check(&document).is_valid(), "{}", check(&document));
}
