//! The body of a chat-completions request.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Message, ToolKind};

/// A chat-completions request, without the model (the client fills it in from its
/// [`LlmConfig`](crate::LlmConfig) unless [`ChatRequest::model`] overrides it).
///
/// Fields that are `None` or empty are left out of the JSON, as the OpenAI API expects.
///
/// ```
/// use concord_llm::{ChatRequest, Message, ResponseFormat};
///
/// let request = ChatRequest::new(vec![
///     Message::system("Answer in JSON."),
///     Message::user("Name a colour."),
/// ])
/// .with_response_format(ResponseFormat::JsonObject)
/// .with_temperature(0.0);
///
/// let json = serde_json::to_value(&request).unwrap();
/// assert_eq!(json["response_format"]["type"], "json_object");
/// assert!(json.get("tools").is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatRequest {
    /// A model for this request only, instead of the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The form the answer must take (JSON mode, a JSON Schema, or text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// The tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// Whether and which tool the model must call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Sampling temperature (0 is the most deterministic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The most tokens the answer may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The sampling seed, for servers that make answers repeatable with one (llama.cpp,
    /// Ollama, vLLM; OpenAI on a best-effort basis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl ChatRequest {
    /// A request with these messages and nothing else set.
    pub fn new(messages: Vec<Message>) -> Self {
        ChatRequest {
            model: None,
            messages,
            response_format: None,
            tools: Vec::new(),
            tool_choice: None,
            temperature: None,
            max_tokens: None,
            seed: None,
        }
    }

    /// Uses `model` for this request instead of the configured model.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the answer's format.
    pub fn with_response_format(mut self, format: ResponseFormat) -> Self {
        self.response_format = Some(format);
        self
    }

    /// Sets the tools the model may call.
    pub fn with_tools(mut self, tools: Vec<Tool>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets whether and which tool the model must call.
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// Sets the sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Sets the most tokens the answer may have.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets the sampling seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Asks for JSON that follows `schema` (`response_format: {"type": "json_schema", …}`,
    /// strict), named `name`.
    ///
    /// Bound every array (`maxItems`) and string (`maxLength`) in it: a small model fills
    /// an unbounded one until `max_tokens` cuts it off.
    pub fn with_json_schema(self, name: impl Into<String>, schema: Value) -> Self {
        self.with_response_format(ResponseFormat::json_schema(name, schema))
    }

    /// The form of JSON this request asks for, if it asks for JSON.
    pub fn answer_format(&self) -> Option<AnswerFormat> {
        match self.response_format {
            Some(ResponseFormat::JsonSchema { .. }) => Some(AnswerFormat::JsonSchema),
            Some(ResponseFormat::JsonObject) => Some(AnswerFormat::JsonObject),
            Some(ResponseFormat::Text) | None => None,
        }
    }
}

/// How a JSON answer was asked for, as recorded in the [`Usage`](crate::Usage) ledger and
/// in a [`JsonCompletion`](crate::JsonCompletion).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum AnswerFormat {
    /// `response_format: {"type": "json_schema"}`: the server constrains the answer to the
    /// schema ("structured output").
    JsonSchema,
    /// `response_format: {"type": "json_object"}`: any JSON object ("JSON mode").
    JsonObject,
    /// No `response_format`: the prompt alone says what JSON to write, because the server
    /// refused the format asked for.
    PromptOnly,
}

impl AnswerFormat {
    /// The name reports use: `json_schema`, `json_object` or `prompt_only`.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerFormat::JsonSchema => "json_schema",
            AnswerFormat::JsonObject => "json_object",
            AnswerFormat::PromptOnly => "prompt_only",
        }
    }
}

impl std::fmt::Display for AnswerFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The form the model's answer must take (`response_format`).
///
/// With [`ResponseFormat::JsonObject`], OpenAI requires the word "JSON" somewhere in the
/// messages and answers HTTP 400 otherwise; say in the prompt what JSON you expect.
///
/// ```
/// use concord_llm::ResponseFormat;
/// use serde_json::json;
///
/// let format = ResponseFormat::json_schema("decision", json!({"type": "object"}));
/// assert_eq!(
///     serde_json::to_value(&format).unwrap(),
///     json!({"type": "json_schema",
///            "json_schema": {"name": "decision", "schema": {"type": "object"}, "strict": true}}),
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResponseFormat {
    /// Free text (the default when no format is given).
    Text,
    /// Any JSON object ("JSON mode").
    JsonObject,
    /// JSON that matches a schema ("structured outputs").
    JsonSchema {
        /// The schema and its name.
        json_schema: JsonSchemaFormat,
    },
}

impl ResponseFormat {
    /// JSON matching `schema`, named `name`, with strict adherence requested.
    pub fn json_schema(name: impl Into<String>, schema: Value) -> Self {
        ResponseFormat::JsonSchema {
            json_schema: JsonSchemaFormat {
                name: name.into(),
                description: None,
                schema,
                strict: Some(true),
            },
        }
    }

    /// Whether this format asks for JSON.
    pub fn is_json(&self) -> bool {
        matches!(
            self,
            ResponseFormat::JsonObject | ResponseFormat::JsonSchema { .. }
        )
    }
}

/// A named JSON Schema for [`ResponseFormat::JsonSchema`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JsonSchemaFormat {
    /// The schema's name (letters, digits, `_` and `-`).
    pub name: String,
    /// What the answer is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema.
    pub schema: Value,
    /// Whether the server must follow the schema exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// A tool the model may call.
///
/// ```
/// use concord_llm::Tool;
/// use serde_json::json;
///
/// let tool = Tool::function(
///     "get_product",
///     "Looks a product up by SKU",
///     json!({"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}),
/// );
/// let json = serde_json::to_value(&tool).unwrap();
/// assert_eq!(json["type"], "function");
/// assert_eq!(json["function"]["name"], "get_product");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Tool {
    /// The kind of tool.
    #[serde(rename = "type", default)]
    pub kind: ToolKind,
    /// The function.
    pub function: FunctionTool,
}

impl Tool {
    /// A function tool named `name` whose arguments follow the JSON Schema `parameters`.
    pub fn function(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        Tool {
            kind: ToolKind::Function,
            function: FunctionTool {
                name: name.into(),
                description: Some(description.into()),
                parameters,
                strict: None,
            },
        }
    }
}

/// The function of a [`Tool`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FunctionTool {
    /// The function's name.
    pub name: String,
    /// What the function does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the arguments.
    pub parameters: Value,
    /// Whether the server must follow `parameters` exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// Whether and which tool the model must call (`tool_choice`).
///
/// ```
/// use concord_llm::ToolChoice;
///
/// assert_eq!(serde_json::to_string(&ToolChoice::Required).unwrap(), r#""required""#);
/// assert_eq!(
///     serde_json::to_string(&ToolChoice::Function("lookup".into())).unwrap(),
///     r#"{"type":"function","function":{"name":"lookup"}}"#,
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "WireToolChoice", into = "WireToolChoice")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model must not call tools (`"none"`).
    None,
    /// The model decides (`"auto"`).
    Auto,
    /// The model must call at least one tool (`"required"`).
    Required,
    /// The model must call the function with this name.
    Function(String),
}

/// `tool_choice` as it is on the wire: a mode string or a named function.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum WireToolChoice {
    Mode(WireToolMode),
    Function {
        #[serde(rename = "type")]
        kind: ToolKind,
        function: WireToolName,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum WireToolMode {
    None,
    Auto,
    Required,
}

#[derive(Serialize, Deserialize)]
struct WireToolName {
    name: String,
}

impl From<WireToolChoice> for ToolChoice {
    fn from(wire: WireToolChoice) -> Self {
        match wire {
            WireToolChoice::Mode(WireToolMode::None) => ToolChoice::None,
            WireToolChoice::Mode(WireToolMode::Auto) => ToolChoice::Auto,
            WireToolChoice::Mode(WireToolMode::Required) => ToolChoice::Required,
            WireToolChoice::Function { function, .. } => ToolChoice::Function(function.name),
        }
    }
}

impl From<ToolChoice> for WireToolChoice {
    fn from(choice: ToolChoice) -> Self {
        match choice {
            ToolChoice::None => WireToolChoice::Mode(WireToolMode::None),
            ToolChoice::Auto => WireToolChoice::Mode(WireToolMode::Auto),
            ToolChoice::Required => WireToolChoice::Mode(WireToolMode::Required),
            ToolChoice::Function(name) => WireToolChoice::Function {
                kind: ToolKind::Function,
                function: WireToolName { name },
            },
        }
    }
}
