//! The LMOS seed's WeatherAgent, served: its readable `modelConfiguration` property, its
//! `getWeather` action and its `userFeedbackReceived` event, with the seed's schemas, and
//! three actions that show the other patterns: `forecastReport` (long-running, with
//! progress), `logFeedback` (fire and forget: it publishes the event) and `talk` (voice:
//! 20 ms PCM16 mono frames at 24 kHz in, the same frames back with the volume halved).
//!
//! With the `node` feature, [`agent`] adds all of it to a `concord_node::NodeBuilder`.

use serde_json::{json, Value};

/// The agent's title in the seed.
pub const TITLE: &str = "WeatherAgent";
/// The property.
pub const MODEL_CONFIGURATION: &str = "modelConfiguration";
/// The request-reply action.
pub const GET_WEATHER: &str = "getWeather";
/// The long-running action.
pub const FORECAST_REPORT: &str = "forecastReport";
/// The fire-and-forget action.
pub const LOG_FEEDBACK: &str = "logFeedback";
/// The stream action.
pub const TALK: &str = "talk";
/// The event.
pub const USER_FEEDBACK_RECEIVED: &str = "userFeedbackReceived";
/// Bytes of one 20 ms frame of PCM16 mono audio at 24 kHz.
pub const VOICE_FRAME_BYTES: usize = 960;

/// The seed's `modelConfiguration` schema.
pub fn model_configuration_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "modelName": {"type": "string", "description": "Name of the model in use, e.g., gpt-4o."},
            "temperature": {"type": "number", "minimum": 0, "maximum": 1, "description": "Temperature setting for controlling response randomness."},
            "maxTokens": {"type": "integer", "description": "Maximum number of tokens the model is allowed to generate."}
        }
    })
}

/// The property's first value.
pub fn model_configuration() -> Value {
    json!({"modelName": "gpt-4o", "temperature": 0.2, "maxTokens": 512})
}

/// The seed's `getWeather` input schema.
pub fn get_weather_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "question": {"type": "string"},
            "interactionMode": {"type": "string", "enum": ["text", "voice"]}
        },
        "required": ["question", "interactionMode"]
    })
}

/// The seed's `getWeather` output schema.
pub fn get_weather_output() -> Value {
    json!({"type": "string", "description": "Natural language output providing weather information."})
}

/// The seed's `userFeedbackReceived` data schema.
pub fn feedback_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "rating": {"type": "integer", "minimum": 1, "maximum": 5, "description": "User rating, where 1 is the lowest and 5 is the highest."},
            "comment": {"type": "string", "description": "Optional user comment providing additional feedback."}
        },
        "required": ["rating"]
    })
}

/// `getWeather`'s answer: a sentence about the city named in the question.
pub fn answer_weather(input: &Value) -> String {
    let question = input["question"].as_str().unwrap_or_default();
    let city = question
        .split_whitespace()
        .last()
        .map(|word| word.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|word| !word.is_empty())
        .unwrap_or("your city");
    format!("In {city} it is 18 °C and partly cloudy, with a light westerly wind.")
}

/// `talk`'s transformation of one frame: each PCM16 little-endian sample halved.
pub fn halve_volume(frame: &[u8]) -> Vec<u8> {
    frame
        .chunks(2)
        .flat_map(|sample| match sample {
            [low, high] => (i16::from_le_bytes([*low, *high]) / 2)
                .to_le_bytes()
                .to_vec(),
            other => other.to_vec(),
        })
        .collect()
}

#[cfg(feature = "node")]
mod serve {
    use std::sync::OnceLock;
    use std::time::Duration;

    use concord_negotiate::ActionSpec;
    use concord_node::{
        Action, ActionError, ActionFuture, Event, NodeBuilder, ProgressReporter, Property,
        Publisher, StreamIo, StreamSpec,
    };
    use serde_json::{json, Value};

    use super::*;

    fn spec(name: &str, description: &str, input: Value, output: Value) -> ActionSpec {
        ActionSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            input,
            output,
        }
    }

    /// The voice stream's description: 20 ms PCM16 mono frames at 24 kHz, realtime, with
    /// credit for 50 frames (a second of audio) each way.
    pub fn voice_stream() -> StreamSpec {
        StreamSpec {
            content_type: "audio/pcm;rate=24000;channels=1".to_owned(),
            output_content_type: None,
            frame_bytes: u32::try_from(VOICE_FRAME_BYTES).unwrap_or(u32::MAX),
            initial_credit: 50 * VOICE_FRAME_BYTES as u64,
            realtime: true,
        }
    }

    /// `logFeedback`: publishes its input as `userFeedbackReceived` with the publisher its
    /// node gives it when built ([`Action::attach`]).
    #[derive(Debug, Default)]
    struct LogFeedback {
        publisher: OnceLock<Publisher>,
    }

    impl Action for LogFeedback {
        fn call(&self, input: Value) -> ActionFuture {
            let published = match self.publisher.get() {
                Some(publisher) => publisher
                    .publish(USER_FEEDBACK_RECEIVED, input)
                    .map(|_| json!({"recorded": true}))
                    .map_err(|error| ActionError::bad_request(error.to_string())),
                None => Err(ActionError::internal("the action is not served by a node")),
            };
            Box::pin(std::future::ready(published))
        }

        fn attach(&self, publisher: &Publisher) {
            let _ = self.publisher.set(publisher.clone());
        }
    }

    /// Adds the WeatherAgent's property, actions and event to `builder`.
    pub fn agent(builder: NodeBuilder) -> NodeBuilder {
        builder
            .description("Weather information in natural language, by text or voice.")
            .property(
                MODEL_CONFIGURATION,
                Property::new(model_configuration_schema(), model_configuration())
                    .observable()
                    .description("Current configuration of the underlying LLM, including version, temperature, and maximum tokens."),
            )
            .action(
                spec(
                    GET_WEATHER,
                    "Fetches weather information based on user input.",
                    get_weather_input(),
                    get_weather_output(),
                ),
                |input: Value| async move { Ok(Value::String(answer_weather(&input))) },
            )
            .progress_action(
                spec(
                    FORECAST_REPORT,
                    "Writes a seven-day forecast report for a city, reporting progress day by day.",
                    json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["city"]}),
                    json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "array", "items": {"type": "string"}}}, "required": ["city", "days"]}),
                ),
                |input: Value, progress: ProgressReporter| async move {
                    let city = input["city"].as_str().unwrap_or("Berlin").to_owned();
                    let total = input["days"].as_u64().unwrap_or(7).clamp(1, 14);
                    let mut days = Vec::new();
                    for day in 1..=total {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        days.push(format!("day {day}: 17 °C, light rain"));
                        progress.report(day as f64 / total as f64, Some(json!({"daysDone": day})));
                    }
                    Ok(json!({"city": city, "days": days}))
                },
            )
            .notify_action(
                spec(
                    LOG_FEEDBACK,
                    "Records a user's feedback and publishes it as userFeedbackReceived.",
                    feedback_schema(),
                    json!({"type": "object", "properties": {"recorded": {"type": "boolean"}}}),
                ),
                LogFeedback::default(),
            )
            .stream_action(
                spec(
                    TALK,
                    "Voice conversation: 20 ms PCM16 frames in, audio frames out.",
                    json!({"type": "object", "properties": {"voice": {"type": "string"}}}),
                    json!({"type": "object", "properties": {"frames": {"type": "integer"}}}),
                ),
                voice_stream(),
                |_input: Value, mut stream: StreamIo| async move {
                    let mut frames = 0u64;
                    while let Some(frame) = stream.receiver.next().await {
                        frames += 1;
                        let frame = frame.map_err(|error| ActionError::internal(error.to_string()))?;
                        stream
                            .sender
                            .send(halve_volume(&frame))
                            .await
                            .map_err(|error| ActionError::internal(error.to_string()))?;
                    }
                    stream
                        .sender
                        .finish()
                        .await
                        .map_err(|error| ActionError::internal(error.to_string()))?;
                    Ok(json!({"frames": frames}))
                },
            )
            .event(
                USER_FEEDBACK_RECEIVED,
                Event::new(feedback_schema()).description(
                    "Emitted when a user provides feedback on the service, with a rating from 1 to 5.",
                ),
            )
    }
}

#[cfg(feature = "node")]
pub use serve::{agent, voice_stream};
