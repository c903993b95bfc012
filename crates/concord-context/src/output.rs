//! Appending a tool call's result to the context under its `_outputPath`.

use serde_json::Value;

use crate::context::{Context, MergeError};
use crate::expression::Expression;
use crate::identity::{InstanceId, View};
use crate::merge::{json_type, OutputMethod};
use crate::message::{ContextMessageError, DataMessage};

/// A call's result and where to write it: the input of [`Context::append_output`].
///
/// ```
/// use concord_context::{Context, OutputWrite, View};
/// use serde_json::json;
///
/// let mut context = Context::from_json(br#"[
///   {"type": "data", "data": {"user": {"name": "Alex", "status": "active"}}}
/// ]"#)?;
/// let call = json!({"_tool": "updateUserStatus", "newStatus": "inactive", "_outputPath": "†data.user.status"});
/// context.append_output(OutputWrite::for_call(&call, json!("inactive"))?.date("2025-10-26T12:00:00Z"))?;
/// let status = context.resolve(&View::Global, &"†data.user.status".parse()?)?;
/// assert_eq!(status.into_result()?, json!("inactive"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct OutputWrite {
    target: Expression,
    result: Value,
    method: Option<OutputMethod>,
    instance: Option<InstanceId>,
    call: Option<Value>,
    date: Option<String>,
}

/// Why an output could not be appended.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// The target has `||` alternatives: the tool must say which branch it took.
    #[error("output path `{0}` has alternatives (`||`): write to the branch the tool chose")]
    Alternatives(Expression),
    /// The call has no `_outputPath`.
    #[error("the call has no `_outputPath`")]
    NoOutputPath,
    /// A meta key of the call, or the message built from it, is invalid.
    #[error(transparent)]
    Message(#[from] ContextMessageError),
    /// The write conflicts with the data already there (nothing was appended).
    #[error(transparent)]
    Merge(#[from] MergeError),
}

impl OutputWrite {
    /// Writes `result` to `target`: one reference, or several joined by `&&`
    /// to fan the same result out to each of them.
    pub fn new(target: Expression, result: Value) -> Self {
        Self {
            target,
            result,
            method: None,
            instance: None,
            call: None,
            date: None,
        }
    }

    /// The write a tool call asks for: its `_outputPath`, `_outputMethod` and
    /// `_instance`, with the call itself recorded as `_call`.
    pub fn for_call(call: &Value, result: Value) -> Result<Self, OutputError> {
        let meta = |field: &'static str| -> Result<Option<&str>, ContextMessageError> {
            match call.get(field) {
                None => Ok(None),
                Some(Value::String(text)) => Ok(Some(text)),
                Some(other) => Err(ContextMessageError::WrongType {
                    field,
                    expected: "a string",
                    found: json_type(other),
                }),
            }
        };
        let target = meta("_outputPath")?.ok_or(OutputError::NoOutputPath)?;
        let target = Expression::parse(target).map_err(ContextMessageError::BadOutputPath)?;
        let mut write = Self::new(target, result).call(call.clone());
        if let Some(method) = meta("_outputMethod")? {
            write.method = Some(method.parse().map_err(ContextMessageError::BadMethod)?);
        }
        if let Some(instance) = meta("_instance")? {
            write.instance =
                Some(
                    InstanceId::new(instance).map_err(|cause| ContextMessageError::BadName {
                        field: "_instance",
                        cause,
                    })?,
                );
        }
        Ok(write)
    }

    /// Sets the output method (default `set`).
    pub fn method(mut self, method: OutputMethod) -> Self {
        self.method = Some(method);
        self
    }

    /// Scopes the write to one instance.
    pub fn instance(mut self, instance: InstanceId) -> Self {
        self.instance = Some(instance);
        self
    }

    /// Records the call that produced the result (`_call`).
    pub fn call(mut self, call: Value) -> Self {
        self.call = Some(call);
        self
    }

    /// Records when the result was written (`_date`; the caller supplies the clock).
    pub fn date(mut self, date: impl Into<String>) -> Self {
        self.date = Some(date.into());
        self
    }
}

impl Context {
    /// Appends `write` as new data messages, one per `&&` target, each with
    /// `_outputPath`, `_outputMethod`, `_instance`, `_call` and `_date` as given.
    ///
    /// Outputs are appended, never merged into older messages: reading a path
    /// back finds the newest write that covers it. The write is checked against
    /// the data it lands on (in its instance's view); on any error nothing is
    /// appended. Returns the number of messages appended.
    pub fn append_output(&mut self, write: OutputWrite) -> Result<usize, OutputError> {
        let [conjunction] = write.target.alternatives() else {
            return Err(OutputError::Alternatives(write.target.clone()));
        };
        let mut messages = Vec::with_capacity(conjunction.len());
        for reference in conjunction {
            let mut message = DataMessage::new(reference.kind().clone(), write.result.clone())
                .with_output_path(reference.clone())?;
            if let Some(method) = write.method {
                message = message.with_method(method)?;
            }
            if let Some(instance) = &write.instance {
                message = message.with_instance(instance.clone());
            }
            if let Some(call) = &write.call {
                message = message.with_call(call.clone());
            }
            if let Some(date) = &write.date {
                message = message.with_date(date.clone());
            }
            messages.push(message);
        }
        let start = self.messages().len();
        let count = messages.len();
        for message in messages {
            self.push(message);
        }
        let view = match &write.instance {
            Some(instance) => View::Instance(instance.clone()),
            None => View::Global,
        };
        for reference in conjunction {
            if let Err(error) = self.data(&view, reference.kind()) {
                self.truncate(start);
                return Err(error.into());
            }
        }
        Ok(count)
    }
}
