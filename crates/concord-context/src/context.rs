//! The context: an ordered list of messages, grouped by identity and merged.

use std::collections::{HashMap, HashSet};

use concord_text::TextPosition;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::identity::{Identity, InstanceId, Kind, View};
use crate::merge::{apply_write, json_type, Conflict};
use crate::message::{ContextMessageError, DataMessage, Message};

/// An ordered list of messages: what an agent keeps across its loop and
/// renders for the LLM at every step.
///
/// ```
/// use concord_context::{Context, View};
///
/// let context = Context::from_json(br#"[
///   {"type": "data", "kind": "user", "data": {"name": "John Doe"}},
///   {"type": "data", "kind": "user", "data": {"age": 30}}
/// ]"#)?;
/// let user = context.data(&View::Global, &"user".parse()?)?;
/// assert_eq!(user, Some(serde_json::json!({"name": "John Doe", "age": 30})));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    messages: Vec<Message>,
}

/// Why bytes are not a context.
///
/// Like every error of this crate, its message says everything, causes included, and it
/// has no [`source`](std::error::Error::source): a chain printed in full says each once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// Not JSON.
    #[error("context is not valid JSON: {error}")]
    Json {
        /// Where in the text (the column counted in characters; serde_json's message counts
        /// bytes).
        position: TextPosition,
        /// serde_json's error.
        error: serde_json::Error,
    },
    /// JSON, but not an array.
    #[error("a context must be a JSON array of messages, found {found}")]
    NotAnArray {
        /// The JSON type found.
        found: &'static str,
    },
    /// One message is invalid.
    #[error("message at /{index}: {cause}")]
    Message {
        /// Its position in the array, from 0 (the JSON pointer is `/{index}`).
        index: usize,
        /// What is wrong with it.
        cause: ContextMessageError,
    },
}

/// Two messages of one identity that cannot be merged, such as a `push` onto an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("message at /{message} ({identity}): {conflict}")]
pub struct MergeError {
    /// Position of the message that could not be applied.
    pub message: usize,
    /// The identity being merged (for an instance view: the kind and that instance).
    pub identity: Identity,
    /// What went wrong.
    pub conflict: Conflict,
}

/// The data messages of one identity, as seen through a view.
pub(crate) struct Group<'c> {
    pub kind: &'c Kind,
    /// The instance of the identity (global view) or of the view (instance view).
    pub instance: Option<&'c InstanceId>,
    /// Position of the group's first message.
    pub first: usize,
    /// `(position, message)` in merge order.
    pub members: Vec<(usize, &'c DataMessage)>,
}

impl Group<'_> {
    pub(crate) fn identity(&self) -> Identity {
        Identity {
            kind: self.kind.clone(),
            instance: self.instance.cloned(),
        }
    }
}

/// An identity's messages merged, oldest to newest.
pub(crate) struct Folded<'c> {
    pub value: Value,
    /// The newest schema, and the position of the message carrying it.
    pub schema: Option<(usize, &'c Value)>,
    /// The newest description.
    pub description: Option<&'c str>,
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a JSON array of messages (see [`Message::from_value`] for the shapes).
    ///
    /// Errors give the line and column of bad JSON, or the position of the bad
    /// message and the key at fault.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ContextError> {
        let value = serde_json::from_slice::<Value>(bytes).map_err(|error| ContextError::Json {
            position: TextPosition::of_json_error(bytes, &error).unwrap_or(TextPosition::START),
            error,
        })?;
        let items = match value {
            Value::Array(items) => items,
            other => {
                return Err(ContextError::NotAnArray {
                    found: json_type(&other),
                })
            }
        };
        let messages = items
            .into_iter()
            .enumerate()
            .map(|(index, item)| {
                Message::from_value(item).map_err(|cause| ContextError::Message { index, cause })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { messages })
    }

    /// Appends a message.
    pub fn push(&mut self, message: impl Into<Message>) {
        self.messages.push(message.into());
    }

    /// Drops the messages from position `len` on.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.messages.truncate(len);
    }

    /// The messages, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Every `_instance` in the context, in order of first appearance.
    pub fn instances(&self) -> Vec<&InstanceId> {
        let mut seen = HashSet::new();
        let mut instances = Vec::new();
        for message in &self.messages {
            if let Message::Data(data) = message {
                if let Some(instance) = data.instance() {
                    if seen.insert(instance) {
                        instances.push(instance);
                    }
                }
            }
        }
        instances
    }

    /// The merged value of `kind` in `view`, or `None` when no message of that
    /// kind is visible there.
    ///
    /// In [`View::Global`] this is the global identity; in an instance view,
    /// the global messages and then the instance's, merged in that order.
    pub fn data(&self, view: &View, kind: &Kind) -> Result<Option<Value>, MergeError> {
        match self.group(view, kind) {
            None => Ok(None),
            Some(group) => Ok(Some(fold(&group)?.value)),
        }
    }

    /// The data messages visible in `view`, each with the instance of the
    /// group it belongs to.
    fn visible<'c>(
        &'c self,
        view: &'c View,
    ) -> impl Iterator<Item = (usize, &'c DataMessage, Option<&'c InstanceId>)> + 'c {
        self.messages
            .iter()
            .enumerate()
            .filter_map(move |(index, message)| {
                let Message::Data(data) = message else {
                    return None;
                };
                let group_instance = match (view, data.instance()) {
                    (View::Global, own) => own,
                    (View::Instance(id), None) => Some(id),
                    (View::Instance(id), Some(own)) if own == id => Some(id),
                    (View::Instance(_), Some(_)) => return None,
                };
                Some((index, &**data, group_instance))
            })
    }

    /// The identities visible in `view`, in order of first appearance.
    pub(crate) fn groups<'c>(&'c self, view: &'c View) -> Vec<Group<'c>> {
        let mut slots: HashMap<(&Kind, Option<&InstanceId>), usize> = HashMap::new();
        let mut groups: Vec<Group<'c>> = Vec::new();
        for (index, data, instance) in self.visible(view) {
            let slot = *slots.entry((data.kind(), instance)).or_insert_with(|| {
                groups.push(Group {
                    kind: data.kind(),
                    instance,
                    first: index,
                    members: Vec::new(),
                });
                groups.len() - 1
            });
            if let Some(group) = groups.get_mut(slot) {
                group.members.push((index, data));
            }
        }
        if matches!(view, View::Instance(_)) {
            for group in &mut groups {
                // Stable: global messages first, then the instance's, each in context order.
                group
                    .members
                    .sort_by_key(|(_, data)| data.instance().is_some());
            }
        }
        groups
    }

    /// The group of one kind in `view`, if any message of it is visible.
    pub(crate) fn group<'c>(&'c self, view: &'c View, kind: &Kind) -> Option<Group<'c>> {
        let mut members: Vec<(usize, &DataMessage)> = Vec::new();
        for (index, data, group_instance) in self.visible(view) {
            if data.kind() != kind {
                continue;
            }
            // In the global view only the global identity of a kind is read.
            if matches!(view, View::Global) && group_instance.is_some() {
                continue;
            }
            members.push((index, data));
        }
        let (first, data) = *members.first()?;
        if matches!(view, View::Instance(_)) {
            members.sort_by_key(|(_, data)| data.instance().is_some());
        }
        Some(Group {
            kind: data.kind(),
            instance: view.instance(),
            first,
            members,
        })
    }
}

/// Merges a group's messages, oldest to newest.
pub(crate) fn fold<'c>(group: &Group<'c>) -> Result<Folded<'c>, MergeError> {
    let mut root: Option<Value> = None;
    let mut schema = None;
    let mut description = None;
    for &(index, message) in &group.members {
        let describe = |len: usize| match message.output_path() {
            Some(path) => path.prefix_text(len),
            None => format!("†{}", message.kind()),
        };
        apply_write(
            &mut root,
            message.write_path(),
            message.method(),
            message.data(),
            &describe,
        )
        .map_err(|conflict| MergeError {
            message: index,
            identity: group.identity(),
            conflict,
        })?;
        if let Some(message_schema) = message.schema() {
            schema = Some((index, message_schema));
        }
        if let Some(message_description) = message.description() {
            description = Some(message_description);
        }
    }
    Ok(Folded {
        value: root.unwrap_or(Value::Null),
        schema,
        description,
    })
}

impl FromIterator<Message> for Context {
    fn from_iter<I: IntoIterator<Item = Message>>(messages: I) -> Self {
        Self {
            messages: messages.into_iter().collect(),
        }
    }
}

impl Extend<Message> for Context {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, messages: I) {
        self.messages.extend(messages);
    }
}

/// Serializes as the JSON array [`Context::from_json`] reads back.
impl Serialize for Context {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.messages.serialize(serializer)
    }
}
