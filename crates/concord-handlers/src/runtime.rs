//! The message path at run time: the runtime's side of the contract, around a loaded
//! handler. Every message out is produced by the handler, checked against the schema and
//! encoded; every message in is size-checked, decoded, checked, then given to the handler.
//! A handler that runs natively ([`Code::is_native`]) is called without building the
//! contract's argument objects; what it returns is read exactly as the contract reads a
//! sandboxed handler's answer.

use std::sync::Arc;

use concord_sandbox::{Function, Role, SandboxError};
use serde_json::{json, Value};

use crate::code::Code;
use crate::contract::{
    self, request_argument, response_argument, ContractViolation, Incoming, Outcome, Reply,
};
use crate::template::Decoded;
use crate::verify::{Direction, InvalidMessage, Verifier};
use crate::wire::{self, WireError};

/// Why a message could not be produced or taken in.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The handler was loaded for the other role.
    #[error("a {expected} handler is needed, but this one was loaded as {actual}")]
    WrongRole {
        /// The role this side needs.
        expected: Role,
        /// The role the handler was loaded for.
        actual: Role,
    },
    /// The handler function failed: it threw, or hit a sandbox limit.
    #[error("`{function}` failed: {source}")]
    Handler {
        /// The function.
        function: Function,
        /// The sandbox's error (see [`SandboxError::is_limit`]).
        #[source]
        source: SandboxError,
    },
    /// The handler's return value breaks the contract.
    #[error(transparent)]
    Contract(#[from] ContractViolation),
    /// Our handler produced a message that breaks the protocol's schema: our code is wrong
    /// (regenerate it).
    #[error("our handler produced an invalid message: {0}")]
    InvalidOutgoing(InvalidMessage),
    /// The peer sent a message that breaks the protocol's schema: answer with
    /// [`InvalidMessage::error_description`] in a fix-error negotiation.
    #[error("the peer sent an invalid message: {0}")]
    InvalidIncoming(InvalidMessage),
    /// A message that cannot be encoded, or received bytes that do not decode.
    #[error("{direction} message: {source}")]
    Wire {
        /// Which message.
        direction: Direction,
        /// What failed.
        #[source]
        source: WireError,
    },
}

/// The requester's message path: our input → request bytes, response bytes → [`Reply`].
///
/// ```
/// use std::sync::Arc;
/// use concord_handlers::{template, Code, Local, Reply, Requester, Verifier};
/// use concord_negotiate::{canonical_protocol, ActionSpec, Need, ProtocolDocument};
/// use concord_sandbox::Limits;
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
/// let local = Local::requester_for(&action);
/// let code = Code::load(&template(&document, &local)?, &document, &local, Limits::default())?;
/// let mut requester = Requester::new(code, Arc::new(Verifier::new(&document)?))?;
///
/// let bytes = requester.encode_request("Xk3uQ9aTz0LmB7vc", &json!({"productId": "P1"}))?;
/// assert_eq!(bytes, br#"{"messageId":"Xk3uQ9aTz0LmB7vc","type":"REQUEST","action":"getPrice","productId":"P1"}"#);
/// let reply = requester.decode_response(
///     br#"{"messageId":"Xk3uQ9aTz0LmB7vc","type":"RESPONSE","status":{"code":200,"message":"OK"},"result":12.5}"#,
/// )?;
/// assert_eq!(reply, Reply::Output { message_id: "Xk3uQ9aTz0LmB7vc".into(), output: json!(12.5) });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Requester {
    code: Code,
    verifier: Arc<Verifier>,
}

impl Requester {
    /// The requester path around a handler loaded as [`Role::Requester`]: a [`Code`], or a
    /// sandboxed [`Handler`](concord_sandbox::Handler).
    ///
    /// # Errors
    /// [`RuntimeError::WrongRole`].
    pub fn new(code: impl Into<Code>, verifier: Arc<Verifier>) -> Result<Self, RuntimeError> {
        let code = code.into();
        check_role(&code, Role::Requester)?;
        Ok(Self { code, verifier })
    }

    /// The request message for `input`, encoded for the wire. `message_id` is the runtime's
    /// (16 random characters per the meta-protocol); handlers cannot make random ids.
    ///
    /// # Errors
    /// [`RuntimeError::Handler`], [`RuntimeError::Contract`],
    /// [`RuntimeError::InvalidOutgoing`], [`RuntimeError::Wire`].
    pub fn encode_request(
        &mut self,
        message_id: &str,
        input: &Value,
    ) -> Result<Vec<u8>, RuntimeError> {
        let function = Function::EncodeRequest;
        let produced = match self.code.native() {
            Some(native) => native
                .encode_request(message_id, input)
                .map_err(|source| RuntimeError::Handler { function, source }),
            None => call(
                &mut self.code,
                function,
                &request_argument(message_id, input),
            ),
        }?;
        send(&self.verifier, function, produced)
    }

    /// What a received response means: the output or the error status, with the message
    /// id it carries (match it with the request's).
    ///
    /// # Errors
    /// [`RuntimeError::Wire`], [`RuntimeError::InvalidIncoming`],
    /// [`RuntimeError::Handler`], [`RuntimeError::Contract`].
    pub fn decode_response(&mut self, bytes: &[u8]) -> Result<Reply, RuntimeError> {
        let message = receive(&self.code, &self.verifier, Direction::Response, bytes)?;
        let function = Function::DecodeResponse;
        let Some(native) = self.code.native() else {
            let value = call(&mut self.code, function, &message)?;
            return Ok(Reply::from_value(&value)?);
        };
        match native
            .decode_response(message)
            .map_err(|source| RuntimeError::Handler { function, source })?
        {
            Decoded::Output { message_id, output } => Ok(Reply::Output { message_id, output }),
            Decoded::Error {
                message_id,
                code,
                message,
            } => {
                // Read as the contract reads any handler's error (its code must be an
                // integer).
                let value =
                    json!({"messageId": message_id, "error": {"code": code, "message": message}});
                Ok(Reply::from_value(&value)?)
            }
        }
    }

    /// The handler code (its limits, or a copy for another thread).
    pub fn code(&self) -> &Code {
        &self.code
    }
}

/// The provider's message path: request bytes → [`Incoming`], our action's [`Outcome`] →
/// response bytes.
#[derive(Debug)]
pub struct Provider {
    code: Code,
    verifier: Arc<Verifier>,
}

impl Provider {
    /// The provider path around a handler loaded as [`Role::Provider`]: a [`Code`], or a
    /// sandboxed [`Handler`](concord_sandbox::Handler).
    ///
    /// # Errors
    /// [`RuntimeError::WrongRole`].
    pub fn new(code: impl Into<Code>, verifier: Arc<Verifier>) -> Result<Self, RuntimeError> {
        let code = code.into();
        check_role(&code, Role::Provider)?;
        Ok(Self { code, verifier })
    }

    /// The message id and action input of a received request.
    ///
    /// # Errors
    /// [`RuntimeError::Wire`], [`RuntimeError::InvalidIncoming`],
    /// [`RuntimeError::Handler`], [`RuntimeError::Contract`].
    pub fn decode_request(&mut self, bytes: &[u8]) -> Result<Incoming, RuntimeError> {
        let message = receive(&self.code, &self.verifier, Direction::Request, bytes)?;
        let function = Function::DecodeRequest;
        let Some(native) = self.code.native() else {
            let value = call(&mut self.code, function, &message)?;
            return Ok(Incoming::from_value(&value)?);
        };
        let (message_id, input) = native
            .decode_request(&message)
            .map_err(|source| RuntimeError::Handler { function, source })?;
        Ok(Incoming { message_id, input })
    }

    /// The response to the request `message_id`, encoded for the wire.
    ///
    /// # Errors
    /// [`RuntimeError::Handler`], [`RuntimeError::Contract`],
    /// [`RuntimeError::InvalidOutgoing`], [`RuntimeError::Wire`].
    pub fn encode_response(
        &mut self,
        message_id: &str,
        outcome: &Outcome,
    ) -> Result<Vec<u8>, RuntimeError> {
        let function = Function::EncodeResponse;
        let produced = match self.code.native() {
            Some(native) => native
                .encode_response(message_id, outcome)
                .map_err(|source| RuntimeError::Handler { function, source }),
            None => call(
                &mut self.code,
                function,
                &response_argument(message_id, outcome),
            ),
        }?;
        send(&self.verifier, function, produced)
    }

    /// The handler code (its limits, or a copy for another thread).
    pub fn code(&self) -> &Code {
        &self.code
    }
}

fn check_role(code: &Code, expected: Role) -> Result<(), RuntimeError> {
    if code.role() == expected {
        Ok(())
    } else {
        Err(RuntimeError::WrongRole {
            expected,
            actual: code.role(),
        })
    }
}

fn call(code: &mut Code, function: Function, argument: &Value) -> Result<Value, RuntimeError> {
    code.call(function, argument)
        .map_err(|source| RuntimeError::Handler { function, source })
}

/// A message an encode function produced, checked against the schema and encoded.
fn send(verifier: &Verifier, function: Function, produced: Value) -> Result<Vec<u8>, RuntimeError> {
    let direction = match function {
        Function::EncodeRequest => Direction::Request,
        _ => Direction::Response,
    };
    let message = contract::message(produced, function)?;
    verifier
        .check(direction, &message)
        .map_err(RuntimeError::InvalidOutgoing)?;
    wire::encode(verifier.encoding(), &message)
        .map_err(|source| RuntimeError::Wire { direction, source })
}

fn receive(
    code: &Code,
    verifier: &Verifier,
    direction: Direction,
    bytes: &[u8],
) -> Result<Value, RuntimeError> {
    let message = wire::decode(verifier.encoding(), bytes, code.limits().input_bytes)
        .map_err(|source| RuntimeError::Wire { direction, source })?;
    verifier
        .check(direction, &message)
        .map_err(RuntimeError::InvalidIncoming)?;
    Ok(message)
}
