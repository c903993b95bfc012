//! The handler contract: which functions a module defines for which role.

use std::fmt;
use std::str::FromStr;

/// The side of a protocol a handler module speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The side that sends requests: `encodeRequest` and `decodeResponse`.
    Requester,
    /// The side that answers requests: `decodeRequest` and `encodeResponse`.
    Provider,
}

impl Role {
    /// The two functions a module for this role must define, in call order.
    pub const fn functions(self) -> [Function; 2] {
        match self {
            Role::Requester => [Function::EncodeRequest, Function::DecodeResponse],
            Role::Provider => [Function::DecodeRequest, Function::EncodeResponse],
        }
    }

    /// The role's name as written on the command line and in documents.
    pub const fn name(self) -> &'static str {
        match self {
            Role::Requester => "requester",
            Role::Provider => "provider",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Role {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "requester" => Ok(Role::Requester),
            "provider" => Ok(Role::Provider),
            other => Err(UnknownName {
                kind: "role",
                name: other.to_owned(),
                expected: "requester, provider",
            }),
        }
    }
}

/// One function of the handler contract. Every function maps one JSON value to one JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    /// Requester: the application's input → the request message to send.
    EncodeRequest,
    /// Requester: the response message received → the application's output.
    DecodeResponse,
    /// Provider: the request message received → the input of the local action.
    DecodeRequest,
    /// Provider: the local action's result (or error) → the response message to send.
    EncodeResponse,
}

impl Function {
    /// All contract functions, in the order the module wrapper reports them.
    pub const ALL: [Function; 4] = [
        Function::EncodeRequest,
        Function::DecodeResponse,
        Function::DecodeRequest,
        Function::EncodeResponse,
    ];

    /// The JavaScript name the module must declare.
    pub const fn name(self) -> &'static str {
        match self {
            Function::EncodeRequest => "encodeRequest",
            Function::DecodeResponse => "decodeResponse",
            Function::DecodeRequest => "decodeRequest",
            Function::EncodeResponse => "encodeResponse",
        }
    }

    /// The role this function belongs to.
    pub const fn role(self) -> Role {
        match self {
            Function::EncodeRequest | Function::DecodeResponse => Role::Requester,
            Function::DecodeRequest | Function::EncodeResponse => Role::Provider,
        }
    }

    /// Position in [`Function::ALL`], which is also the index in the wrapper's export array.
    pub(crate) const fn index(self) -> u32 {
        match self {
            Function::EncodeRequest => 0,
            Function::DecodeResponse => 1,
            Function::DecodeRequest => 2,
            Function::EncodeResponse => 3,
        }
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Function {
    type Err = UnknownName;

    /// Parses the JavaScript name, e.g. `"encodeRequest"`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Function::ALL
            .into_iter()
            .find(|function| function.name() == text)
            .ok_or_else(|| UnknownName {
                kind: "handler function",
                name: text.to_owned(),
                expected: "encodeRequest, decodeResponse, decodeRequest, encodeResponse",
            })
    }
}

/// A name that is not a [`Role`] or a [`Function`] of the contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{name}` (expected one of: {expected})")]
pub struct UnknownName {
    kind: &'static str,
    name: String,
    expected: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for function in Function::ALL {
            assert_eq!(function.name().parse::<Function>(), Ok(function));
            assert_eq!(Function::ALL[function.index() as usize], function);
            assert!(function.role().functions().contains(&function));
        }
        for role in [Role::Requester, Role::Provider] {
            assert_eq!(role.name().parse::<Role>(), Ok(role));
        }
    }

    #[test]
    fn unknown_names_say_what_was_expected() {
        let error = "encoderequest".parse::<Function>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown handler function `encoderequest` (expected one of: encodeRequest, \
             decodeResponse, decodeRequest, encodeResponse)"
        );
        assert!("Requester".parse::<Role>().is_err());
    }
}
