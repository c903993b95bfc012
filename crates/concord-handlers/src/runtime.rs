//! The message path at run time: the runtime's side of the contract, around a loaded
//! handler. Every message out is produced by the handler, checked against the schema and
//! encoded; every message in is size-checked, decoded, checked, then given to the handler.

use std::sync::Arc;

use concord_sandbox::{Function, Handler, Role, SandboxError};
use serde_json::Value;

use crate::contract::{
    self, request_argument, response_argument, ContractViolation, Incoming, Outcome, Reply,
};
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
/// use concord_handlers::{template, Local, Reply, Requester, Verifier};
/// use concord_negotiate::{canonical_protocol, ActionSpec, Need, ProtocolDocument};
/// use concord_sandbox::{Limits, Role, Sandbox};
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
/// let handler = Sandbox::load(&template(&document, &local)?, Role::Requester, Limits::default())?;
/// let mut requester = Requester::new(handler, Arc::new(Verifier::new(&document)?))?;
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
    handler: Handler,
    verifier: Arc<Verifier>,
}

impl Requester {
    /// The requester path around a handler loaded as [`Role::Requester`].
    ///
    /// # Errors
    /// [`RuntimeError::WrongRole`].
    pub fn new(handler: Handler, verifier: Arc<Verifier>) -> Result<Self, RuntimeError> {
        check_role(&handler, Role::Requester)?;
        Ok(Self { handler, verifier })
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
        let argument = request_argument(message_id, input);
        produce(
            &mut self.handler,
            &self.verifier,
            Function::EncodeRequest,
            &argument,
        )
    }

    /// What a received response means: the output or the error status, with the message
    /// id it carries (match it with the request's).
    ///
    /// # Errors
    /// [`RuntimeError::Wire`], [`RuntimeError::InvalidIncoming`],
    /// [`RuntimeError::Handler`], [`RuntimeError::Contract`].
    pub fn decode_response(&mut self, bytes: &[u8]) -> Result<Reply, RuntimeError> {
        let message = receive(&self.handler, &self.verifier, Direction::Response, bytes)?;
        let value = call(&mut self.handler, Function::DecodeResponse, &message)?;
        Ok(Reply::from_value(&value)?)
    }

    /// The handler (its limits, or a clone for another thread).
    pub fn handler(&self) -> &Handler {
        &self.handler
    }
}

/// The provider's message path: request bytes → [`Incoming`], our action's [`Outcome`] →
/// response bytes.
#[derive(Debug)]
pub struct Provider {
    handler: Handler,
    verifier: Arc<Verifier>,
}

impl Provider {
    /// The provider path around a handler loaded as [`Role::Provider`].
    ///
    /// # Errors
    /// [`RuntimeError::WrongRole`].
    pub fn new(handler: Handler, verifier: Arc<Verifier>) -> Result<Self, RuntimeError> {
        check_role(&handler, Role::Provider)?;
        Ok(Self { handler, verifier })
    }

    /// The message id and action input of a received request.
    ///
    /// # Errors
    /// [`RuntimeError::Wire`], [`RuntimeError::InvalidIncoming`],
    /// [`RuntimeError::Handler`], [`RuntimeError::Contract`].
    pub fn decode_request(&mut self, bytes: &[u8]) -> Result<Incoming, RuntimeError> {
        let message = receive(&self.handler, &self.verifier, Direction::Request, bytes)?;
        let value = call(&mut self.handler, Function::DecodeRequest, &message)?;
        Ok(Incoming::from_value(&value)?)
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
        let argument = response_argument(message_id, outcome);
        produce(
            &mut self.handler,
            &self.verifier,
            Function::EncodeResponse,
            &argument,
        )
    }

    /// The handler (its limits, or a clone for another thread).
    pub fn handler(&self) -> &Handler {
        &self.handler
    }
}

fn check_role(handler: &Handler, expected: Role) -> Result<(), RuntimeError> {
    if handler.role() == expected {
        Ok(())
    } else {
        Err(RuntimeError::WrongRole {
            expected,
            actual: handler.role(),
        })
    }
}

fn call(
    handler: &mut Handler,
    function: Function,
    argument: &Value,
) -> Result<Value, RuntimeError> {
    handler
        .call(function, argument)
        .map_err(|source| RuntimeError::Handler { function, source })
}

fn produce(
    handler: &mut Handler,
    verifier: &Verifier,
    function: Function,
    argument: &Value,
) -> Result<Vec<u8>, RuntimeError> {
    let direction = match function {
        Function::EncodeRequest => Direction::Request,
        _ => Direction::Response,
    };
    let message = contract::message(call(handler, function, argument)?, function)?;
    verifier
        .check(direction, &message)
        .map_err(RuntimeError::InvalidOutgoing)?;
    wire::encode(verifier.encoding(), &message)
        .map_err(|source| RuntimeError::Wire { direction, source })
}

fn receive(
    handler: &Handler,
    verifier: &Verifier,
    direction: Direction,
    bytes: &[u8],
) -> Result<Value, RuntimeError> {
    let message = wire::decode(verifier.encoding(), bytes, handler.limits().input_bytes)
        .map_err(|source| RuntimeError::Wire { direction, source })?;
    verifier
        .check(direction, &message)
        .map_err(RuntimeError::InvalidIncoming)?;
    Ok(message)
}
