//! Chat messages and the tool calls an assistant message can carry.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// One message of a conversation, tagged by its `role` on the wire.
///
/// ```
/// use concord_llm::Message;
///
/// let json = serde_json::to_string(&Message::user("Say hello as JSON")).unwrap();
/// assert_eq!(json, r#"{"role":"user","content":"Say hello as JSON"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
#[non_exhaustive]
pub enum Message {
    /// Instructions that frame the conversation.
    System {
        /// The instructions.
        content: String,
    },
    /// A message from the user (or, for Concord, from the program acting for an agent).
    User {
        /// The text.
        content: String,
    },
    /// An earlier answer of the model: text, tool calls, or both.
    Assistant {
        /// The text, absent when the model only called tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        /// The tools the model called.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of a tool call, sent back to the model.
    Tool {
        /// The [`ToolCall::id`] this result answers.
        tool_call_id: String,
        /// The result, usually JSON text.
        content: String,
    },
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message::Assistant {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }

    /// An assistant message that called tools (as the model answered it).
    pub fn assistant_tool_calls(tool_calls: Vec<ToolCall>) -> Self {
        Message::Assistant {
            content: None,
            tool_calls,
        }
    }

    /// The result of the tool call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }
}

/// A call of a function tool, as the model writes it in an assistant message.
///
/// ```
/// use concord_llm::ToolCall;
///
/// let call: ToolCall = serde_json::from_str(
///     r#"{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"sku\":\"A-1\"}"}}"#,
/// ).unwrap();
/// let args: serde_json::Value = call.parse_arguments().unwrap();
/// assert_eq!(args["sku"], "A-1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The id the model gave this call; a [`Message::Tool`] answer refers to it.
    pub id: String,
    /// The kind of tool called.
    #[serde(rename = "type", default)]
    pub kind: ToolKind,
    /// The function and its arguments.
    pub function: FunctionCall,
}

impl ToolCall {
    /// A call of function `name` with `arguments` (JSON text).
    pub fn function(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: ToolKind::Function,
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }

    /// Parses the arguments strictly into `T`.
    ///
    /// The arguments come from the model: treat a failure as the model's mistake, not a bug.
    pub fn parse_arguments<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.function.arguments)
    }
}

/// The kind of a tool. Chat completions know only function tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ToolKind {
    /// A function tool.
    #[default]
    Function,
}

/// The function part of a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FunctionCall {
    /// The function's name.
    pub name: String,
    /// The arguments as JSON text, exactly as the model wrote them (they may not be valid JSON).
    pub arguments: String,
}
