//! Why our code for a protocol cannot be made, loaded or run: [`CodeError`].

use std::fmt;

use concord_handlers::{
    Difference, GenerateError, InvalidMessage, RuntimeError, SchemaError, WireError,
};
use concord_negotiate::{DocumentError, TestCasesError};
use concord_sandbox::SandboxError;

use crate::interface::PayloadError;

/// Why our code for a protocol cannot be made, loaded or run. The message is the one the
/// peer or the log sees (a reason, a close reason, a fix report); the error under it, when
/// there is one, is part of that message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CodeError {
    /// The protocol's text cannot be read as a protocol document.
    #[error("the protocol cannot be read: {0}")]
    Protocol(DocumentError),
    /// The protocol's schemas do not compile.
    #[error("{0}")]
    Schemas(SchemaError),
    /// The protocol calls none of the actions we serve (the reason says why).
    #[error("the protocol calls no action we serve: {0}")]
    NoAction(String),
    /// The agreed test cases cannot be read.
    #[error("the agreed test cases cannot be read: {0}")]
    TestCases(TestCasesError),
    /// No handler could be generated for the protocol.
    #[error("{0}")]
    Generate(Box<GenerateError>),
    /// The handler module does not load in the sandbox (or natively).
    #[error("the handler module does not load: {0}")]
    Load(SandboxError),
    /// The handler failed on the message path (starting, encoding).
    #[error("{0}")]
    Runtime(RuntimeError),
    /// An interface protocol's payload schemas do not load, or an input is not what our
    /// side's schema accepts.
    #[error("{0}")]
    Payload(PayloadError),
    /// A message cannot be put on the wire in the protocol's encoding.
    #[error("{0}")]
    Wire(WireError),
    /// A test case's request has no messageId.
    #[error("the case's request has no messageId")]
    CaseWithoutMessageId,
    /// The stored handler of an interface protocol is not the native interaction layer.
    #[error("the stored handler of an interface protocol is not the native interaction layer")]
    NotNativeLayer,
    /// The code is the other role's (`role` is the one the call needed).
    #[error("this session is not the {role}")]
    WrongRole {
        /// `requester` or `provider`.
        role: &'static str,
    },
}

/// How the peer's answer to a verification request fails the agreed test case it answers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CaseMismatch {
    /// Its messageId is no agreed test case's.
    #[error("it answers no agreed test case")]
    NoCase,
    /// It breaks the protocol's response schema.
    #[error("{0}")]
    Schema(InvalidMessage),
    /// It differs from the case's response (a success's status message aside): each place,
    /// in the order `diff` found them (never empty), `; `-separated.
    #[error("{}", Differences(.0))]
    Differs(Vec<Difference>),
}

/// Differences, `; `-separated.
struct Differences<'a>(&'a [Difference]);

impl fmt::Display for Differences<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, difference) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{difference}")?;
        }
        Ok(())
    }
}
