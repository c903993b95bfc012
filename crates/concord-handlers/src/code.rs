//! A handler module ready to run: natively when it is our template, else in the sandbox.

use std::fmt;
use std::sync::Arc;

use concord_negotiate::ProtocolDocument;
use concord_sandbox::{
    check_input, check_output, Function, Handler, Limits, Role, Sandbox, SandboxError,
};
use serde_json::{json, Value};

use crate::contract::Outcome;
use crate::local::Local;
use crate::template::{quoted_len, Decoded, Template};

/// A handler module loaded for one side of a protocol.
///
/// [`Code::load`] decides how it runs, by its text alone: a module that is byte for byte
/// the [`Template`] our generator writes for this protocol and side (a pure function of the
/// protocol's schemas and our side's, whatever the peer named things) runs natively, as
/// that template's plan, with no JavaScript engine; any other module (written by an LLM,
/// received from a peer, edited, or from another version of the generator) runs in the
/// sandbox under its limits. Either way a call gives the same value or error.
///
/// ```
/// use concord_handlers::{template, Code, Local};
/// use concord_negotiate::{canonical_protocol, ActionSpec, ProtocolDocument};
/// use concord_sandbox::{Function, Limits};
/// use serde_json::json;
/// use std::time::Duration;
///
/// let action = ActionSpec {
///     name: "getPrice".into(),
///     description: "The price of a product.".into(),
///     input: json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
///     output: json!({"type": "number"}),
/// };
/// let document = ProtocolDocument::parse(&canonical_protocol(&action, Duration::from_secs(15)))?;
/// let local = Local::Provider(action);
/// let module = template(&document, &local)?;
///
/// let mut native = Code::load(&module, &document, &local, Limits::default())?;
/// assert!(native.is_native());
/// let edited = format!("{module}\n// edited");
/// let mut sandboxed = Code::load(&edited, &document, &local, Limits::default())?;
/// assert!(!sandboxed.is_native());
///
/// let response = json!({"messageId": "m1", "result": 12.5});
/// assert_eq!(
///     native.call(Function::EncodeResponse, &response)?,
///     sandboxed.call(Function::EncodeResponse, &response)?,
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Code {
    run: Run,
}

enum Run {
    /// Our template, run natively under the sandbox's input and output caps.
    Native {
        template: Arc<Template>,
        limits: Limits,
    },
    Sandboxed(Box<Handler>),
}

impl Code {
    /// Loads `source` as the handler for `local`'s side of `document`, under `limits`:
    /// natively when it is our template for them, else in the sandbox.
    ///
    /// # Errors
    /// What [`Sandbox::load`] reports for the module (an invalid limit, a source too
    /// large, a compile error, a missing function, a failing top level). Our template's
    /// source is checked against the same limits and source size.
    pub fn load(
        source: &str,
        document: &ProtocolDocument,
        local: &Local,
        limits: Limits,
    ) -> Result<Code, SandboxError> {
        if limits.validate().is_ok() && source.len() <= limits.source_bytes {
            if let Ok(template) = Template::new(document, local) {
                if template.source() == source {
                    let template = Arc::new(template);
                    return Ok(Code {
                        run: Run::Native { template, limits },
                    });
                }
            }
        }
        Ok(Code::from(Sandbox::load(source, local.role(), limits)?))
    }

    /// Whether the module runs natively (it is our template).
    pub fn is_native(&self) -> bool {
        matches!(self.run, Run::Native { .. })
    }

    /// The template it runs as, under its limits, when it runs natively.
    pub(crate) fn native(&self) -> Option<Native<'_>> {
        match &self.run {
            Run::Native { template, limits } => Some(Native { template, limits }),
            Run::Sandboxed(_) => None,
        }
    }

    /// The role the module plays.
    pub fn role(&self) -> Role {
        match &self.run {
            Run::Native { template, .. } => template.role(),
            Run::Sandboxed(handler) => handler.role(),
        }
    }

    /// The limits it was loaded with (the runtime refuses received messages over
    /// `input_bytes` before parsing them, whichever way the module runs).
    pub fn limits(&self) -> &Limits {
        match &self.run {
            Run::Native { limits, .. } => limits,
            Run::Sandboxed(handler) => handler.limits(),
        }
    }

    /// Calls `function` with `argument`.
    ///
    /// # Errors
    /// As [`Handler::call`]; natively, [`SandboxError::WrongRole`] and
    /// [`SandboxError::Thrown`] where the module throws.
    pub fn call(&mut self, function: Function, argument: &Value) -> Result<Value, SandboxError> {
        match &mut self.run {
            Run::Native { template, limits } => {
                if function.role() != template.role() {
                    return Err(SandboxError::WrongRole {
                        function,
                        role: template.role(),
                    });
                }
                check_input(argument, 0, 0, limits)?;
                let result = template.call(function, argument)?;
                check_output(&result, 0, limits)?;
                Ok(result)
            }
            Run::Sandboxed(handler) => handler.call(function, argument),
        }
    }

    /// A second copy, for another thread: the same template, or a sandboxed engine built
    /// from the compiled bytecode.
    ///
    /// # Errors
    /// As [`Handler::try_clone`].
    pub fn try_clone(&self) -> Result<Code, SandboxError> {
        let run = match &self.run {
            Run::Native { template, limits } => Run::Native {
                template: Arc::clone(template),
                limits: limits.clone(),
            },
            Run::Sandboxed(handler) => Run::Sandboxed(Box::new(handler.try_clone()?)),
        };
        Ok(Code { run })
    }
}

/// A template running natively under a handler's limits: the contract functions called
/// with their arguments' parts, as [`Code::call`] would call them with the whole
/// argument (`{messageId, input}`, …), without building it.
pub(crate) struct Native<'a> {
    template: &'a Template,
    limits: &'a Limits,
}

impl Native<'_> {
    /// `encodeRequest({ messageId, input })`: the request message.
    pub(crate) fn encode_request(
        &self,
        message_id: &str,
        input: &Value,
    ) -> Result<Value, SandboxError> {
        check_input(input, wrapper(message_id, "input"), 1, self.limits)?;
        let message = self.template.encode_request(message_id, input)?;
        check_output(&message, 0, self.limits)?;
        Ok(message)
    }

    /// `decodeRequest(message)`: its `messageId` and `input`.
    pub(crate) fn decode_request(&self, message: &Value) -> Result<(String, Value), SandboxError> {
        check_input(message, 0, 0, self.limits)?;
        let (message_id, input) = self.template.decode_request(message)?;
        check_output(&input, wrapper(&message_id, "input"), self.limits)?;
        Ok((message_id, input))
    }

    /// `encodeResponse({ messageId, result })` or `encodeResponse({ messageId, error })`:
    /// the response message.
    pub(crate) fn encode_response(
        &self,
        message_id: &str,
        outcome: &Outcome,
    ) -> Result<Value, SandboxError> {
        match outcome {
            Outcome::Result(result) => {
                check_input(result, wrapper(message_id, "result"), 1, self.limits)?;
            }
            Outcome::Error(status) => {
                let error = status.to_value();
                check_input(&error, wrapper(message_id, "error"), 1, self.limits)?;
            }
        }
        let message = self.template.encode_response(message_id, outcome)?;
        check_output(&message, 0, self.limits)?;
        Ok(message)
    }

    /// `decodeResponse(message)`: what it returns.
    pub(crate) fn decode_response(&self, message: Value) -> Result<Decoded, SandboxError> {
        check_input(&message, 0, 0, self.limits)?;
        let decoded = self.template.decode_response(message)?;
        match &decoded {
            Decoded::Output { message_id, output } => {
                check_output(output, wrapper(message_id, "output"), self.limits)?;
            }
            Decoded::Error {
                message_id,
                code,
                message,
            } => {
                let error = json!({"code": code, "message": message});
                check_output(&error, wrapper(message_id, "error"), self.limits)?;
            }
        }
        Ok(decoded)
    }
}

/// Bytes of compact JSON in `{"messageId":<id>,"<key>":<value>}` besides the value; the
/// sandbox counts them all (the braces and the comma first) before the value.
fn wrapper(message_id: &str, key: &str) -> usize {
    3 + quoted_len("messageId") + 1 + quoted_len(message_id) + quoted_len(key) + 1
}

impl From<Handler> for Code {
    /// A module already in the sandbox, as it is.
    fn from(handler: Handler) -> Self {
        Code {
            run: Run::Sandboxed(Box::new(handler)),
        }
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Code")
            .field("role", &self.role())
            .field("native", &self.is_native())
            .finish_non_exhaustive()
    }
}
