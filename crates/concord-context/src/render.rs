//! Rendering a context as the OpenAI-style chat messages the LLM sees.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::{fold, Context, Group, MergeError};
use crate::identity::{Identity, View};
use crate::json_layout::prompt_json;
use crate::message::{Message, Role, HIDDEN_KEYS};

/// The line that opens every input block (chapter 006).
pub const INPUT_INSTRUCTION: &str = "Input data MUST be treated as a structured prompt";

/// One chat message as OpenAI-compatible APIs take it: `{"role", "content"}`.
///
/// The seed writes `content` as a single `{type: "text", text}` part; the
/// plain-string form used here is what that part means on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: Role,
    /// The text.
    pub content: String,
}

impl Context {
    /// The chat messages the LLM sees through `view`, deterministically.
    ///
    /// - A text message is passed through unchanged, in its role (default `user`).
    /// - A peer message becomes a fenced, labelled `user` block
    ///   ([`crate::PeerText::to_prompt_block`]).
    /// - The data messages of each identity are merged and rendered as one
    ///   `user` message (the seed's role for data), placed where the identity's
    ///   first message is. Kind `input` uses the input layout of chapter 006;
    ///   every other kind the data layout of chapter 005:
    ///
    /// ```text
    /// ## Data: ¶user
    /// {
    ///   "name": "John Doe",
    ///   "age": 30
    /// }
    /// Represents the current user.
    /// Schema for ¶user:
    /// {
    ///   "type": "object",
    ///   "properties": {
    ///     "name": { "type": "string" },
    ///     "age": { "type": "number" },
    ///     "city": { "type": "string" }
    ///   }
    /// }
    /// ```
    ///
    /// The description line appears only when some message of the identity has
    /// one, the schema lines only when some message has a schema (the newest
    /// wins). Data is laid out by [`crate::prompt_json`]; [`HIDDEN_KEYS`] are
    /// removed from it at every depth. In [`View::Global`], instanced
    /// identities are labelled `¶state (_instance: ①)` and show their own
    /// messages merged; in an instance view each kind shows its global messages
    /// merged with the instance's, labelled `¶state`.
    ///
    /// Descriptions and text messages are trusted: put text from a peer in a
    /// [`crate::PeerText`] or in data (where it is a JSON string), never there.
    pub fn render(&self, view: &View) -> Result<Vec<ChatMessage>, MergeError> {
        let groups = self.groups(view);
        let mut groups = groups.iter().peekable();
        let mut chat = Vec::with_capacity(self.messages().len());
        for (index, message) in self.messages().iter().enumerate() {
            match message {
                Message::Text(text) => chat.push(ChatMessage {
                    role: text.role,
                    content: text.text.clone(),
                }),
                Message::Peer(peer) => chat.push(ChatMessage {
                    role: Role::User,
                    content: peer.to_prompt_block(),
                }),
                Message::Data(_) => {
                    if let Some(group) = groups.next_if(|group| group.first == index) {
                        chat.push(ChatMessage {
                            role: Role::User,
                            content: render_group(group, view)?,
                        });
                    }
                }
            }
        }
        Ok(chat)
    }
}

fn render_group(group: &Group<'_>, view: &View) -> Result<String, MergeError> {
    let folded = fold(group)?;
    let mut value = folded.value;
    strip_hidden(&mut value);
    let label = match view {
        View::Global => group.identity().to_string(),
        View::Instance(_) => Identity {
            kind: group.kind.clone(),
            instance: None,
        }
        .to_string(),
    };
    let schema = folded.schema.map(|(_, schema)| schema);
    Ok(if group.kind.is_input() {
        input_block(&label, &value, folded.description, schema)
    } else {
        data_block(&label, &value, folded.description, schema)
    })
}

/// Removes [`HIDDEN_KEYS`] from every object inside `value`.
fn strip_hidden(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, _| !HIDDEN_KEYS.contains(&key.as_str()));
            map.values_mut().for_each(strip_hidden);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_hidden),
        _ => {}
    }
}

/// Chapter 005's layout: heading, data, description, schema.
fn data_block(
    label: &str,
    value: &Value,
    description: Option<&str>,
    schema: Option<&Value>,
) -> String {
    let mut block = format!("## Data: {label}\n{}", prompt_json(value));
    if let Some(description) = description {
        block.push('\n');
        block.push_str(description);
    }
    if let Some(schema) = schema {
        block.push_str(&format!("\nSchema for {label}:\n{}", prompt_json(schema)));
    }
    block
}

/// Chapter 006's layout: heading, instruction, schema, blank line, data, description.
fn input_block(
    label: &str,
    value: &Value,
    description: Option<&str>,
    schema: Option<&Value>,
) -> String {
    let mut block = format!("## Data: {label}\n{INPUT_INSTRUCTION}");
    if let Some(schema) = schema {
        block.push_str("\nSchema: ");
        block.push_str(&prompt_json(schema));
    }
    block.push_str("\n\n");
    block.push_str(&prompt_json(value));
    if let Some(description) = description {
        block.push('\n');
        block.push_str(description);
    }
    block
}
