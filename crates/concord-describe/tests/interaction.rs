//! Concord's action terms: `concord:mode`, `concord:stream` and `concord:actionLease` —
//! built, read back, and
//! checked strictly (types, required members, unknown members, consistency with the mode).

use concord_describe::{
    ActionBuilder, Form, InteractionMode, MetaProtocol, OneOrMany, Operation, ProblemKind,
    StreamDescription, ThingBuilder,
};
use serde_json::{json, Value};

mod common;

const ENDPOINT: &str = "wss://talk.example.com/concord";

fn talk_stream() -> StreamDescription {
    let mut stream = StreamDescription::new("audio/pcm;rate=24000;channels=1", 96_000);
    stream.frame_bytes = 960;
    stream.realtime = true;
    stream
}

/// A description with a stream action and a progress action, as JSON.
fn described() -> Value {
    let mut cancel = Form::new(ENDPOINT);
    cancel.op = Some(OneOrMany::Many(vec![
        Operation::QueryAction,
        Operation::CancelAction,
    ]));
    let thing = ThingBuilder::agent("Talker")
        .action(
            "talk",
            ActionBuilder::new(ENDPOINT)
                .mode(InteractionMode::Stream)
                .stream(talk_stream()),
        )
        .action(
            "render",
            ActionBuilder::new(ENDPOINT)
                .mode(InteractionMode::Progress)
                .synchronous(false)
                .action_lease(45)
                .form(cancel),
        )
        .build()
        .unwrap();
    serde_json::to_value(thing).unwrap()
}

/// The error problems of `document`, as (kind, pointer).
fn errors(document: &Value) -> Vec<(ProblemKind, String)> {
    let text = serde_json::to_vec(document).unwrap();
    concord_describe::validate(&text)
        .errors()
        .map(|problem| (problem.kind, problem.pointer.clone()))
        .collect()
}

#[test]
fn the_terms_are_built_read_back_and_declare_the_prefix() {
    let document = described();
    // The TD 1.0 URI first, for consumers that know only it (TD 1.1 allows it), then
    // TD 1.1's, then the prefixes.
    assert_eq!(document["@context"][0], "https://www.w3.org/2019/wot/td/v1");
    assert_eq!(
        document["@context"][1],
        "https://www.w3.org/2022/wot/td/v1.1"
    );
    assert_eq!(
        document["@context"][2]["concord"],
        "https://concord.dev/ns/v1#"
    );
    assert_eq!(document["actions"]["talk"]["concord:mode"], "stream");
    assert_eq!(
        document["actions"]["talk"]["concord:stream"],
        json!({
            "concord:contentType": "audio/pcm;rate=24000;channels=1",
            "concord:frameBytes": 960,
            "concord:initialCredit": 96000,
            "concord:realtime": true
        })
    );
    let read = concord_describe::parse(&serde_json::to_vec(&document).unwrap()).unwrap();
    let talk = &read.thing.actions.as_ref().unwrap()["talk"];
    assert_eq!(talk.interaction_mode(), InteractionMode::Stream);
    assert_eq!(talk.stream.as_ref(), Some(&talk_stream()));
    let render = &read.thing.actions.as_ref().unwrap()["render"];
    assert_eq!(render.interaction_mode(), InteractionMode::Progress);
    assert_eq!(render.synchronous, Some(false));
    assert_eq!(render.lease(), Some(std::time::Duration::from_secs(45)));
    assert_eq!(document["actions"]["render"]["concord:actionLease"], 45);
    assert!(render.extensions.is_empty());
    assert_eq!(read.report.warning_count(), 0, "{:?}", read.report);
}

#[test]
fn an_action_without_the_terms_answers_in_reply_mode() {
    let thing = ThingBuilder::agent("Plain")
        .action("ping", ActionBuilder::new(ENDPOINT))
        .meta_protocol(MetaProtocol::new(ENDPOINT))
        .build()
        .unwrap();
    let ping = &thing.actions.as_ref().unwrap()["ping"];
    assert_eq!(ping.mode, None);
    assert_eq!(ping.interaction_mode(), InteractionMode::Reply);
}

#[test]
fn wrong_terms_are_errors_at_their_place() {
    let cases: Vec<(&str, Value, ProblemKind, &str)> = vec![
        (
            "/actions/talk/concord:mode",
            json!("shout"),
            ProblemKind::InvalidValue,
            "/actions/talk/concord:mode",
        ),
        (
            "/actions/talk/concord:mode",
            json!(3),
            ProblemKind::WrongType,
            "/actions/talk/concord:mode",
        ),
        (
            "/actions/talk/concord:mode",
            json!("reply"),
            ProblemKind::Conflict,
            "/actions/talk/concord:stream",
        ),
        (
            "/actions/talk/concord:stream",
            json!("audio/pcm"),
            ProblemKind::WrongType,
            "/actions/talk/concord:stream",
        ),
        (
            "/actions/talk/concord:stream/concord:contentType",
            json!("pcm"),
            ProblemKind::InvalidValue,
            "/actions/talk/concord:stream/concord:contentType",
        ),
        (
            "/actions/talk/concord:stream/concord:contentType",
            json!(1),
            ProblemKind::WrongType,
            "/actions/talk/concord:stream/concord:contentType",
        ),
        (
            "/actions/talk/concord:stream/concord:outputContentType",
            json!("text"),
            ProblemKind::InvalidValue,
            "/actions/talk/concord:stream/concord:outputContentType",
        ),
        (
            "/actions/talk/concord:stream/concord:frameBytes",
            json!(-1),
            ProblemKind::WrongType,
            "/actions/talk/concord:stream/concord:frameBytes",
        ),
        (
            "/actions/talk/concord:stream/concord:frameBytes",
            json!(4_294_967_296u64),
            ProblemKind::WrongType,
            "/actions/talk/concord:stream/concord:frameBytes",
        ),
        (
            "/actions/talk/concord:stream/concord:initialCredit",
            json!(1.5),
            ProblemKind::WrongType,
            "/actions/talk/concord:stream/concord:initialCredit",
        ),
        (
            "/actions/talk/concord:stream/concord:realtime",
            json!("yes"),
            ProblemKind::WrongType,
            "/actions/talk/concord:stream/concord:realtime",
        ),
        (
            "/actions/talk/concord:stream/bitrate",
            json!(64),
            ProblemKind::InvalidValue,
            "/actions/talk/concord:stream/bitrate",
        ),
        (
            "/actions/render/synchronous",
            json!(true),
            ProblemKind::Conflict,
            "/actions/render/synchronous",
        ),
        (
            "/actions/render/concord:actionLease",
            json!(0),
            ProblemKind::WrongType,
            "/actions/render/concord:actionLease",
        ),
        (
            "/actions/render/concord:actionLease",
            json!(86_401),
            ProblemKind::WrongType,
            "/actions/render/concord:actionLease",
        ),
        (
            "/actions/render/concord:actionLease",
            json!("30s"),
            ProblemKind::WrongType,
            "/actions/render/concord:actionLease",
        ),
        (
            "/actions/talk/concord:actionLease",
            json!(30),
            ProblemKind::Conflict,
            "/actions/talk/concord:actionLease",
        ),
    ];
    for (place, value, kind, pointer) in cases {
        let mut document = described();
        let (parent, term) = place.rsplit_once('/').unwrap();
        document
            .pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .insert(term.into(), value.clone());
        assert_eq!(
            errors(&document),
            vec![(kind, pointer.to_owned())],
            "{place} = {value}"
        );
    }
}

#[test]
fn missing_members_are_errors() {
    let mut document = described();
    document["actions"]["talk"]["concord:stream"]
        .as_object_mut()
        .unwrap()
        .remove("concord:initialCredit");
    assert_eq!(
        errors(&document),
        vec![(
            ProblemKind::MissingTerm,
            "/actions/talk/concord:stream/concord:initialCredit".to_owned()
        )]
    );
    let mut document = described();
    document["actions"]["talk"]
        .as_object_mut()
        .unwrap()
        .remove("concord:stream");
    assert_eq!(
        errors(&document),
        vec![(
            ProblemKind::MissingTerm,
            "/actions/talk/concord:stream".to_owned()
        )]
    );
    let mut document = described();
    document["actions"]["talk"]["concord:stream"]
        .as_object_mut()
        .unwrap()
        .remove("concord:contentType");
    assert_eq!(
        errors(&document),
        vec![(
            ProblemKind::MissingTerm,
            "/actions/talk/concord:stream/concord:contentType".to_owned()
        )]
    );
}

#[test]
fn an_unknown_concord_term_on_an_action_is_a_warning() {
    let mut document = described();
    document["actions"]["talk"]["concord:priority"] = json!(1);
    let text = serde_json::to_vec(&document).unwrap();
    let report = concord_describe::validate(&text);
    assert!(report.is_valid());
    assert!(report
        .warnings()
        .any(|problem| problem.kind == ProblemKind::UnknownExtensionTerm
            && problem.pointer == "/actions/talk/concord:priority"));
}

/// An independent check: the official TD JSON Schema (`../shared/testdata/td`), through the
/// `jsonschema` crate, accepts the description with Concord's action terms. Its `@context`
/// definition accepts only the experimental `wot-next` URI; it is pointed at TD 1.1, and
/// TD 1.1's "TD 1.0 URI first" form is added (the node's Python check does the same).
#[test]
fn the_official_td_schema_accepts_the_terms() {
    let Some(dir) = common::td_dir() else {
        return;
    };
    let text = std::fs::read(dir.join("w3c/td-json-schema-validation.json")).unwrap();
    let mut schema: Value = serde_json::from_slice(&text).unwrap();
    if let Some(Value::String(draft)) = schema.get_mut("$schema") {
        *draft = draft.trim().to_owned();
    }
    for (name, definition) in schema["definitions"].as_object_mut().unwrap() {
        if name.starts_with("thing-context-td-uri-temp") {
            definition["const"] = json!("https://www.w3.org/2022/wot/td/v1.1");
        }
    }
    // TD 1.1 also allows the TD 1.0 URI first, then TD 1.1's, then others (what older
    // consumers such as node-wot 0.9.2 accept, and what descriptions open with).
    let context = &mut schema["definitions"]["thing-context"]["anyOf"];
    let others = context[1]["additionalItems"].clone();
    context.as_array_mut().unwrap().push(json!({
        "type": "array",
        "items": [
            {"$ref": "#/definitions/thing-context-td-uri-v1"},
            {"$ref": "#/definitions/thing-context-td-uri-temp"}
        ],
        "minItems": 2,
        "additionalItems": others,
    }));
    let validator = jsonschema::draft7::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let document = described();
    let errors: Vec<String> = validator
        .iter_errors(&document)
        .map(|error| format!("{}: {error}", error.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let mut wrong = document.clone();
    wrong["actions"]["render"]["synchronous"] = json!("no");
    assert!(!validator.is_valid(&wrong), "the schema checks actions");
}
