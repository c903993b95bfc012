//! The interface document: canonical writing, tolerant and bounded reading, judging,
//! selecting.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::interface::StreamSpec;

/// A WeatherAgent-like interface: a read-only observable property, a request-reply action,
/// a progress action, an event and a stream action.
fn weather() -> Interface {
    let mut interface = Interface::default();
    interface.actions.insert(
        "getWeather".into(),
        ActionAffordance {
            description: "The weather in a city.".into(),
            input: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
            output: json!({"type": "string"}),
            mode: ActionMode::Reply,
            stream: None,
        },
    );
    interface.actions.insert(
        "forecast".into(),
        ActionAffordance {
            description: String::new(),
            input: json!({"type": "object"}),
            output: json!({"type": "array", "items": {"type": "string"}}),
            mode: ActionMode::Progress,
            stream: None,
        },
    );
    interface.actions.insert(
        "talk".into(),
        ActionAffordance {
            description: "Talk about the weather.".into(),
            input: json!({"type": "object"}),
            output: json!({"type": "object"}),
            mode: ActionMode::Stream,
            stream: Some(StreamSpec {
                content_type: "audio/pcm;rate=24000;channels=1".into(),
                output_content_type: None,
                frame_bytes: 960,
                initial_credit: 96_000,
                realtime: true,
            }),
        },
    );
    interface.properties.insert(
        "modelConfiguration".into(),
        PropertyAffordance {
            description: "The model in use.".into(),
            schema: json!({"type": "object", "properties": {"model": {"type": "string"}}}),
            writable: false,
            observable: true,
        },
    );
    interface.events.insert(
        "userFeedbackReceived".into(),
        EventAffordance {
            description: String::new(),
            data: json!({"type": "object", "properties": {"rating": {"type": "integer"}}}),
        },
    );
    interface
}

fn limits() -> InterfaceDocumentLimits {
    InterfaceDocumentLimits::default()
}

#[test]
fn the_written_document_reads_back_and_is_byte_stable() {
    let interface = weather();
    let text = write(&interface, "WeatherAgent", Duration::from_secs(15));
    assert_eq!(
        text,
        write(&interface.clone(), "WeatherAgent", Duration::from_secs(15))
    );
    for heading in [
        "# Requirement\n",
        "# Interaction layer\n",
        "# Affordances\n",
        "# Timeout\n\n15 seconds\n",
    ] {
        assert!(text.contains(heading), "{heading:?} in\n{text}");
    }
    assert!(text.contains("Interact with the agent WeatherAgent through the affordances action `forecast`, action `getWeather`, action `talk`, property `modelConfiguration` and event `userFeedbackReceived`."), "{text}");
    assert!(text.contains(LAYER_URI));
    assert!(text.contains("```json\n{\n  \"actions\": {\n    \"forecast\""));
    assert!(is_interface_document(&text));
    assert_eq!(parse(&text, &limits()), Ok(interface));
    assert_eq!(timeout(&text), Some(Duration::from_secs(15)));
}

#[test]
fn a_hand_written_layout_is_read() {
    let text = format!(
        "## What we need\n\
         I want to know the weather, and hear about it.\n\n\
         ### The interaction layer\n\
         Messages follow `{LAYER_URI}`.\n\n\
         ### Interface\n\
         Here it is:\n\
         {{\"events\": {{\"userFeedbackReceived\": {{\"data\": {{\"type\": \"object\", \"properties\": {{\"rating\": {{\"type\": \"integer\"}}}}}}}}}},\n\
          \"actions\": {{\"getWeather\": {{\"input\": {{\"type\": \"object\", \"properties\": {{\"city\": {{\"type\": \"string\"}}}}, \"required\": [\"city\"]}},\n\
                                      \"output\": {{\"type\": \"string\"}}}}}}}}\n\
         and that is all.\n\n\
         ## Timeouts\n\
         **1500 ms** per request\n"
    );
    assert!(is_interface_document(&text));
    let read = parse(&text, &limits()).unwrap();
    let wanted = select(&weather(), &["getWeather", "userFeedbackReceived"]).unwrap();
    // Descriptions are not part of the judgement: the candidate is accepted.
    assert_eq!(judge(&read, &weather()), Judgement::Accept);
    assert_eq!(
        read.actions["getWeather"].input,
        wanted.actions["getWeather"].input
    );
    assert_eq!(read.actions["getWeather"].mode, ActionMode::Reply);
    assert_eq!(timeout(&text), Some(Duration::from_millis(1500)));
}

#[test]
fn a_fenced_block_without_a_named_section_is_found() {
    let text = format!(
        "Layer: {LAYER_URI}\n\n~~~\n{{\"properties\": {{\"modelConfiguration\": {{\"schema\": {{\"type\": \"object\"}}, \"observable\": true}}}}}}\n~~~\n"
    );
    assert!(
        !is_interface_document(&text),
        "no interaction layer section"
    );
    let read = parse(&text, &limits()).unwrap();
    assert!(read.properties["modelConfiguration"].observable);
    assert_eq!(timeout(&text), None);
}

#[test]
fn the_layer_must_be_ours() {
    let text = write(&weather(), "W", Duration::from_secs(1));
    let other = text.replace(LAYER_URI, "urn:concord:interaction:2");
    assert_eq!(
        parse(&other, &limits()),
        Err(InterfaceDocumentError::UnsupportedLayer(
            "urn:concord:interaction:2".into()
        ))
    );
    assert!(!is_interface_document(&other));
    let none = text.replace(LAYER_URI, "the usual layer");
    assert_eq!(
        parse(&none, &limits()),
        Err(InterfaceDocumentError::MissingLayer)
    );
}

#[test]
fn reading_is_bounded() {
    let text = write(&weather(), "W", Duration::from_secs(1));
    let small = InterfaceDocumentLimits {
        max_text: 100,
        ..limits()
    };
    assert_eq!(
        parse(&text, &small),
        Err(InterfaceDocumentError::TooLarge {
            size: text.len(),
            limit: 100
        })
    );
    let few = InterfaceDocumentLimits {
        max_affordances: 4,
        ..limits()
    };
    assert_eq!(
        parse(&text, &few),
        Err(InterfaceDocumentError::TooManyAffordances { count: 5, limit: 4 })
    );
    let short = InterfaceDocumentLimits {
        max_name: 8,
        ..limits()
    };
    assert!(matches!(
        parse(&text, &short),
        Err(InterfaceDocumentError::BadName { kind: "action", ref name, limit: 8 }) if name == "getWeather"
    ));
    let shallow = InterfaceDocumentLimits {
        max_depth: 5,
        ..limits()
    };
    let line = 1 + text[..text.find("```json").unwrap()].lines().count() + 1;
    assert_eq!(
        parse(&text, &shallow),
        Err(InterfaceDocumentError::TooDeep { line, limit: 5 })
    );
    let deep = format!(
        "# Interaction layer\n{LAYER_URI}\n# Affordances\n```json\n{{\"actions\": {}{}}}\n```\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    assert!(matches!(
        parse(&deep, &limits()),
        Err(InterfaceDocumentError::BadJson { .. })
    ));
}

#[test]
fn errors_name_where() {
    let text = format!(
        "# Interaction layer\n{LAYER_URI}\n\n# Affordances\n```json\n{{\n  \"actions\": {{\n    \"a\": {{\"mode\": \"reply\",}}\n  }}\n}}\n```\n"
    );
    assert!(matches!(
        parse(&text, &limits()),
        Err(InterfaceDocumentError::BadJson {
            position: TextPosition { line: 8, .. },
            ..
        })
    ));
    let unknown_member = text.replace("\"mode\": \"reply\",", "\"mood\": \"good\"");
    assert!(matches!(
        parse(&unknown_member, &limits()),
        Err(InterfaceDocumentError::BadAffordance { kind: "action", ref name, .. }) if name == "a"
    ));
    let stream_without_spec = text.replace("\"mode\": \"reply\",", "\"mode\": \"stream\"");
    assert!(matches!(
        parse(&stream_without_spec, &limits()),
        Err(InterfaceDocumentError::BadAffordance { kind: "action", ref reason, .. }) if reason.contains("stream")
    ));
    let bad_schema = text.replace("\"mode\": \"reply\",", "\"input\": 3");
    assert!(matches!(
        parse(&bad_schema, &limits()),
        Err(InterfaceDocumentError::BadAffordance { ref reason, .. }) if reason.contains("input")
    ));
    let no_block = format!("# Interaction layer\n{LAYER_URI}\n# Affordances\nnone\n");
    assert_eq!(
        parse(&no_block, &limits()),
        Err(InterfaceDocumentError::MissingAffordances)
    );
}

#[test]
fn judging_accepts_counters_and_rejects() {
    let ours = weather();
    let same = select(&ours, &["getWeather", "modelConfiguration"]).unwrap();
    assert_eq!(judge(&same, &ours), Judgement::Accept);

    let mut changed = select(
        &ours,
        &[
            "getWeather",
            "talk",
            "modelConfiguration",
            "userFeedbackReceived",
        ],
    )
    .unwrap();
    changed.actions.get_mut("getWeather").unwrap().output = json!({"type": "number"});
    changed
        .actions
        .get_mut("talk")
        .unwrap()
        .stream
        .as_mut()
        .unwrap()
        .initial_credit = 1;
    changed
        .properties
        .get_mut("modelConfiguration")
        .unwrap()
        .writable = true;
    changed.actions.get_mut("getWeather").unwrap().description = "other words".into();
    let Judgement::Counter(counter) = judge(&changed, &ours) else {
        panic!("expected a counter");
    };
    assert_eq!(
        counter,
        select(&ours, &["getWeather", "talk", "modelConfiguration"]).unwrap()
    );

    let mut mode = select(&ours, &["forecast"]).unwrap();
    mode.actions.get_mut("forecast").unwrap().mode = ActionMode::Reply;
    assert_eq!(
        judge(&mode, &ours),
        Judgement::Counter(select(&ours, &["forecast"]).unwrap())
    );

    let mut unknown = same.clone();
    unknown
        .events
        .insert("rain".into(), ours.events["userFeedbackReceived"].clone());
    assert_eq!(
        judge(&unknown, &ours),
        Judgement::Reject("this agent has no event `rain`".into())
    );
    // The right name of the wrong kind is not ours either.
    let mut kind = Interface::default();
    kind.events.insert(
        "getWeather".into(),
        ours.events["userFeedbackReceived"].clone(),
    );
    assert!(
        matches!(judge(&kind, &ours), Judgement::Reject(why) if why.contains("event `getWeather`"))
    );
    assert!(matches!(
        judge(&Interface::default(), &ours),
        Judgement::Reject(_)
    ));
}

#[test]
fn selecting_takes_any_kind_by_name() {
    let ours = weather();
    let selected = select(
        &ours,
        &["talk", "userFeedbackReceived", "modelConfiguration"],
    )
    .unwrap();
    assert_eq!(selected.len(), 3);
    assert_eq!(selected.actions["talk"], ours.actions["talk"]);
    assert_eq!(
        select(&ours, &["getWeather", "snow"]),
        Err("this agent has no affordance `snow`".into())
    );
    assert!(select(&ours, &[]).is_err());
}

#[test]
fn timeouts_are_written_and_read() {
    for (timeout_value, written) in [
        (Duration::from_secs(15), "15 seconds"),
        (Duration::from_secs(1), "1 second"),
        (Duration::from_millis(2500), "2500 milliseconds"),
    ] {
        let text = write(&weather(), "W", timeout_value);
        assert!(
            text.ends_with(&format!("# Timeout\n\n{written}\n")),
            "{text}"
        );
        assert_eq!(timeout(&text), Some(timeout_value));
    }
    for (line, read) in [
        ("2 minutes", Some(Duration::from_secs(120))),
        ("30 s.", Some(Duration::from_secs(30))),
        ("soon", None),
        ("99999999999999999999 seconds", None),
    ] {
        assert_eq!(timeout(&format!("## Timeout\n{line}\n")), read, "{line}");
    }
}

/// Stream limits whose receive buffer holds `bytes`.
fn buffer(bytes: u64) -> StreamLimits {
    StreamLimits {
        max_receive_buffer: bytes,
        ..StreamLimits::default()
    }
}

/// A requester's hand-written document (not ours: other headings, a bare object) asking
/// for the stream action with a credit our receive buffer cannot hold.
#[test]
fn a_candidate_credit_over_our_buffer_is_countered_and_named() {
    let text = "## Goal\n\nTalk.\n\n## Interaction layer\n\nWe use urn:concord:interaction:1.\n\n## Interface\n\n{\"actions\": {\"talk\": {\"mode\": \"stream\", \"input\": {\"type\": \"object\"}, \"output\": {\"type\": \"object\"},\n  \"stream\": {\"contentType\": \"audio/pcm;rate=24000;channels=1\", \"frameBytes\": 960, \"initialCredit\": 4194304, \"realtime\": true}}}}\n";
    let candidate = parse(text, &limits()).unwrap();
    let ours = weather();
    let streams = StreamLimits::default();
    let Judgement::Counter(counter) = judge(&candidate, &ours) else {
        panic!("expected a counter");
    };
    assert_eq!(counter, select(&ours, &["talk"]).unwrap());
    assert_eq!(check_credits(&counter, &streams), Ok(()));
    let refused = check_credits(&candidate, &streams).unwrap_err();
    assert_eq!(
        refused,
        InterfaceDocumentError::CreditExceedsBuffer {
            name: "talk".into(),
            credit: 4_194_304,
            limit: 1_048_576
        }
    );
    let said = refused.to_string();
    assert!(
        said.contains("`talk`") && said.contains("stream.initialCredit"),
        "{said}"
    );
}

/// A credit is checked against a buffer: at its edge it fits, one byte less does not;
/// affordances without a stream always fit.
#[test]
fn credits_are_checked_against_the_receive_buffer() {
    let ours = weather();
    let talk = select(&ours, &["talk"]).unwrap();
    let credit = talk.actions["talk"].stream.as_ref().unwrap().initial_credit;
    assert_eq!(check_credits(&talk, &buffer(credit)), Ok(()));
    assert!(matches!(
        check_credits(&talk, &buffer(credit - 1)),
        Err(InterfaceDocumentError::CreditExceedsBuffer { .. })
    ));
    let plain = select(&ours, &["getWeather", "modelConfiguration"]).unwrap();
    assert_eq!(check_credits(&plain, &buffer(1)), Ok(()));
    // A credit of 0 could never move a byte.
    let mut none = talk;
    if let Some(stream) = none.actions.get_mut("talk").and_then(|a| a.stream.as_mut()) {
        stream.initial_credit = 0;
    }
    assert_eq!(
        check_credits(&none, &buffer(credit)),
        Err(InterfaceDocumentError::NoCredit {
            name: "talk".into()
        })
    );
}

#[test]
fn a_bad_json_column_counts_characters() {
    // "名前" is six bytes and two characters: serde_json stops at the brace after the stray
    // comma, the 32nd character of its line and its 36th byte.
    let text = format!(
        "# Interaction layer\n{LAYER_URI}\n\n# Affordances\n```json\n{{\n  \"actions\": {{\"名前\": {{\"mode\": 1,}}}}\n}}\n```\n"
    );
    let Err(InterfaceDocumentError::BadJson { position, .. }) = parse(&text, &limits()) else {
        panic!("a trailing comma is bad JSON");
    };
    let line = text.lines().nth(position.line - 1).unwrap();
    assert_eq!(line, "  \"actions\": {\"名前\": {\"mode\": 1,}}");
    let fault = line.chars().nth(position.column - 1);
    assert_eq!(
        position,
        TextPosition {
            line: 7,
            column: 32
        }
    );
    assert_eq!(fault, Some('}'));
}
