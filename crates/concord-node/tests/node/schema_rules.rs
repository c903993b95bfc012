//! The published schemas' rules hold in every mode: an input with a misspelt optional
//! member, under `additionalProperties: false`, is refused before anything is sent, in the
//! same words, whether the action answers once, reports progress, is fired and forgotten,
//! streams, or is a property written.

use concord_fixtures::weather::voice_stream;
use concord_negotiate::ActionSpec;
use concord_node::{ActionError, ActionUpdate, CallError, Node, Property, StreamIo, Want};
use serde_json::{json, Value};

use crate::support::{build, quick_limits, requester, serve, Agent};

/// A city and, optionally, how many days: nothing else.
fn forecast_input() -> Value {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city"],
        "additionalProperties": false
    })
}

fn spec(name: &str) -> ActionSpec {
    ActionSpec {
        name: name.to_owned(),
        description: format!("The forecast, {name}."),
        input: forecast_input(),
        output: json!({"type": "object", "properties": {"days": {"type": "integer"}}}),
    }
}

/// How many days the action was asked for (7 when absent).
fn days(input: &Value) -> Value {
    json!({"days": input["days"].as_u64().unwrap_or(7)})
}

fn forecaster() -> Agent {
    build(
        Node::builder("Forecaster")
            .action(spec("forecast"), |input: Value| async move { Ok(days(&input)) })
            .progress_action(
                spec("forecastReport"),
                |input: Value, _progress| async move { Ok(days(&input)) },
            )
            .notify_action(spec("logForecast"), |input: Value| async move {
                Ok(days(&input))
            })
            .stream_action(
                spec("talkForecast"),
                voice_stream(),
                |input: Value, _stream: StreamIo| async move {
                    Ok::<Value, ActionError>(days(&input))
                },
            )
            .property(
                "settings",
                Property::new(forecast_input(), json!({"city": "Oslo"})).writable(),
            )
            .limits(quick_limits()),
    )
}

/// The typo of the optional `days`.
fn misspelt() -> Value {
    json!({"city": "Oslo", "dyas": 3})
}

/// A refusal of the misspelt input: invalid input, naming the affordance, where and what.
fn assert_refused(error: &CallError, name: &str) {
    let CallError::InvalidInput(text) = error else {
        panic!("{name}: expected invalid input, got {error:?}");
    };
    assert!(
        text.contains(&format!("`{name}` is invalid at /"))
            && text.contains("dyas")
            && !text.contains("handler"),
        "{name}: {text}"
    );
}

#[tokio::test]
async fn a_misspelt_optional_member_is_refused_in_every_mode() {
    let provider = forecaster();
    let server = serve(&provider).await;
    let requester = requester();

    // Request-reply over its own negotiated protocol: refused, not answered as if absent.
    let reply = requester.connect(&server, "forecast").await;
    assert_eq!(
        reply
            .call("forecast", json!({"city": "Oslo", "days": 3}))
            .await
            .unwrap(),
        json!({"days": 3})
    );
    let error = reply.call("forecast", misspelt()).await.unwrap_err();
    assert_refused(&error, "forecast");
    // The negotiated protocol carries the rule itself, for any requester.
    let agreed = requester
        .store()
        .protocol(&reply.info().hash)
        .unwrap()
        .unwrap();
    assert!(
        agreed.document.contains("\"additionalProperties\": false"),
        "{}",
        agreed.document
    );

    // Every mode of an interface session.
    let peer = requester
        .node
        .connect_with(
            server.url(),
            Want::interface([
                "forecast",
                "forecastReport",
                "logForecast",
                "talkForecast",
                "settings",
            ]),
        )
        .await
        .unwrap();
    let error = peer.call("forecast", misspelt()).await.unwrap_err();
    assert_refused(&error, "forecast");
    let mut run = peer
        .call_with_progress("forecastReport", misspelt())
        .await
        .unwrap();
    let done = loop {
        match run.next().await {
            Some(ActionUpdate::Done(result)) => break result,
            Some(_) => {}
            None => panic!("no end to the progress call"),
        }
    };
    assert_refused(&done.unwrap_err(), "forecastReport");
    let error = peer.notify("logForecast", misspelt()).await.unwrap_err();
    assert_refused(&error, "logForecast");
    let error = peer
        .open_stream("talkForecast", misspelt())
        .await
        .map(drop)
        .unwrap_err();
    assert_refused(&error, "talkForecast");
    let error = peer
        .write_property("settings", misspelt())
        .await
        .unwrap_err();
    assert_refused(&error, "settings");
}

/// A foreign candidate looser than the action (its `days` has no minimum), agreed as
/// written: a requester that speaks it may send what the action's schema refuses, and the
/// provider refuses it before the action runs, in the same words, as a 400.
#[tokio::test]
async fn a_provider_refuses_what_its_action_refuses_whatever_the_protocol_let_through() {
    let provider = forecaster();
    let server = serve(&provider).await;
    let requester = requester();
    let loose = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]
    });
    let candidate = r#"# Requirement
The forecast of a city.

# Data format

## Request
```json
{"type": "object", "properties": {"messageId": {"type": "string"}, "type": {"type": "string", "const": "REQUEST"}, "action": {"type": "string", "const": "forecast"}, "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["messageId", "type", "action", "city"]}
```

## Response
```json
{"type": "object", "properties": {"messageId": {"type": "string"}, "type": {"type": "string", "const": "RESPONSE"}, "status": {"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}, "required": ["code", "message"]}, "result": {"type": "object", "properties": {"days": {"type": "integer"}}}}, "required": ["messageId", "type", "status"]}
```
"#;
    let want = Want::action("forecast").input(loose).propose(candidate);
    let peer = requester
        .node
        .connect_with(server.url(), want)
        .await
        .unwrap();
    assert_eq!(peer.info().settlement, concord_node::Settlement::Negotiated);
    assert_eq!(
        peer.call("forecast", json!({"city": "Oslo", "days": 2}))
            .await
            .unwrap(),
        json!({"days": 2})
    );
    match peer
        .call("forecast", json!({"city": "Oslo", "days": 0}))
        .await
        .unwrap_err()
    {
        CallError::Remote { code: 400, message } => assert!(
            message.contains("the input of the action `forecast` is invalid at /days"),
            "{message}"
        ),
        other => panic!("expected a 400 from the provider, got {other:?}"),
    }
}
