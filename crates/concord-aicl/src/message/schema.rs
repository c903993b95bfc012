//! The instruction set: required and optional fields per `msg_type` (whitepaper §2.2, §8).

use std::fmt;

use crate::error::{Error, ErrorKind, Result};
use crate::value::{Map, Value};

/// The instruction a message carries (`[s:msg_type]`).
///
/// Unknown instructions are kept as [`MsgType::Other`]: a newer peer's message still parses,
/// and only the header and extension fields are checked.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MsgType {
    /// `task_request`: starts a task. Requires `task`, `constraints`; optional `deadline`.
    TaskRequest,
    /// `data_query`: asks for data. Requires `query`; optional `data_format`.
    DataQuery,
    /// `tool_call`: calls a tool. Requires `tool`, `params`; optional `timeout`.
    ToolCall,
    /// `result`: returns a result. Requires `data` or `content`; optional `metadata`.
    Result,
    /// `error`: reports an error. Requires `code`, `reason`; optional `detail`.
    Error,
    /// `protocol_negotiate`: lists protocol versions. Requires `supported`; optional `selected`.
    ProtocolNegotiate,
    /// An instruction this implementation does not know.
    Other(String),
}

impl MsgType {
    /// The name written in `[s:msg_type]:[s:…]`.
    pub fn as_str(&self) -> &str {
        match self {
            MsgType::TaskRequest => "task_request",
            MsgType::DataQuery => "data_query",
            MsgType::ToolCall => "tool_call",
            MsgType::Result => "result",
            MsgType::Error => "error",
            MsgType::ProtocolNegotiate => "protocol_negotiate",
            MsgType::Other(name) => name,
        }
    }

    /// The instruction called `name`.
    pub fn from_name(name: &str) -> MsgType {
        match name {
            "task_request" => MsgType::TaskRequest,
            "data_query" => MsgType::DataQuery,
            "tool_call" => MsgType::ToolCall,
            "result" => MsgType::Result,
            "error" => MsgType::Error,
            "protocol_negotiate" => MsgType::ProtocolNegotiate,
            other => MsgType::Other(other.to_owned()),
        }
    }

    /// Whether the whitepaper defines this instruction.
    pub fn is_known(&self) -> bool {
        !matches!(self, MsgType::Other(_))
    }

    /// The fields this instruction requires; an inner slice of several names means "one of".
    pub fn required_fields(&self) -> Vec<&'static [&'static str]> {
        self.schema()
            .required
            .iter()
            .map(|choice| choice.names)
            .collect()
    }

    /// The optional fields this instruction defines.
    pub fn optional_fields(&self) -> Vec<&'static str> {
        self.schema()
            .optional
            .iter()
            .map(|rule| rule.name)
            .collect()
    }

    fn schema(&self) -> &'static Schema {
        match self {
            MsgType::TaskRequest => &TASK_REQUEST,
            MsgType::DataQuery => &DATA_QUERY,
            MsgType::ToolCall => &TOOL_CALL,
            MsgType::Result => &RESULT,
            MsgType::Error => &ERROR,
            MsgType::ProtocolNegotiate => &PROTOCOL_NEGOTIATE,
            MsgType::Other(_) => &OTHER,
        }
    }
}

impl fmt::Display for MsgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a field's value must be.
#[derive(Clone, Copy)]
enum Kind {
    Any,
    String,
    Int,
    Number,
    Bool,
    Dict,
    StringList,
}

impl Kind {
    fn check(self, value: &Value) -> std::result::Result<(), String> {
        let fits = match self {
            Kind::Any => true,
            Kind::String => matches!(value, Value::String(_)),
            Kind::Int => matches!(value, Value::Int(_)),
            Kind::Number => matches!(value, Value::Int(_) | Value::Float(_)),
            Kind::Bool => matches!(value, Value::Bool(_)),
            Kind::Dict => matches!(value, Value::Dict(_)),
            Kind::StringList => match value {
                Value::List(items) => {
                    if items.is_empty() {
                        return Err("must list at least one entry".to_owned());
                    }
                    items.iter().all(|item| matches!(item, Value::String(_)))
                }
                _ => false,
            },
        };
        if fits {
            Ok(())
        } else {
            Err(format!(
                "must be {}, found a {}",
                self.description(),
                value.kind()
            ))
        }
    }

    fn description(self) -> &'static str {
        match self {
            Kind::Any => "a value",
            Kind::String => "a string `[s:…]`",
            Kind::Int => "an int `[i:…]`",
            Kind::Number => "a number `[i:…]` or `[f:…]`",
            Kind::Bool => "a bool `[b:…]`",
            Kind::Dict => "a dictionary `[d:…]`",
            Kind::StringList => "a list of strings `[l:[s:…],…]`",
        }
    }
}

struct Rule {
    name: &'static str,
    kind: Kind,
}

/// One required entry: a field, or one of several (`data` or `content`).
struct Choice {
    names: &'static [&'static str],
    kind: Kind,
}

struct Schema {
    required: &'static [Choice],
    optional: &'static [Rule],
}

const TASK_REQUEST: Schema = Schema {
    required: &[
        Choice {
            names: &["task"],
            kind: Kind::String,
        },
        Choice {
            names: &["constraints"],
            kind: Kind::Dict,
        },
    ],
    optional: &[Rule {
        name: "deadline",
        kind: Kind::Any,
    }],
};

const DATA_QUERY: Schema = Schema {
    required: &[Choice {
        names: &["query"],
        kind: Kind::Any,
    }],
    optional: &[Rule {
        name: "data_format",
        kind: Kind::String,
    }],
};

const TOOL_CALL: Schema = Schema {
    required: &[
        Choice {
            names: &["tool"],
            kind: Kind::String,
        },
        Choice {
            names: &["params"],
            kind: Kind::Dict,
        },
    ],
    optional: &[Rule {
        name: "timeout",
        kind: Kind::Number,
    }],
};

const RESULT: Schema = Schema {
    required: &[Choice {
        names: &["data", "content"],
        kind: Kind::Any,
    }],
    optional: &[Rule {
        name: "metadata",
        kind: Kind::Dict,
    }],
};

const ERROR: Schema = Schema {
    required: &[
        Choice {
            names: &["code"],
            kind: Kind::Int,
        },
        Choice {
            names: &["reason"],
            kind: Kind::String,
        },
    ],
    optional: &[Rule {
        name: "detail",
        kind: Kind::String,
    }],
};

const PROTOCOL_NEGOTIATE: Schema = Schema {
    required: &[Choice {
        names: &["supported"],
        kind: Kind::StringList,
    }],
    optional: &[Rule {
        name: "selected",
        kind: Kind::String,
    }],
};

const OTHER: Schema = Schema {
    required: &[],
    optional: &[],
};

/// Extension fields any message may carry (whitepaper §8).
const EXTENSIONS: &[Rule] = &[
    Rule {
        name: "signature",
        kind: Kind::String,
    },
    Rule {
        name: "stream_id",
        kind: Kind::String,
    },
    Rule {
        name: "is_final",
        kind: Kind::Bool,
    },
];

/// A field of the wrong type or with an invalid value (error 4001).
pub(super) fn bad_field(field: &str, reason: String) -> Error {
    Error::new(ErrorKind::BadField {
        field: field.to_owned(),
        reason,
    })
}

/// Checks the required fields of `msg_type` (error 2001 when absent) and the types of the
/// fields it and the extensions define (error 4001). Other fields are allowed.
pub(super) fn check_fields(msg_type: &MsgType, fields: &Map) -> Result<()> {
    let schema = msg_type.schema();
    for choice in schema.required {
        let present: Vec<&str> = choice
            .names
            .iter()
            .copied()
            .filter(|name| fields.contains_key(name))
            .collect();
        if present.is_empty() {
            return Err(Error::new(ErrorKind::MissingField {
                msg_type: msg_type.to_string(),
                field: choice.names.join("` or `"),
            }));
        }
        for name in present {
            if let Some(value) = fields.get(name) {
                choice
                    .kind
                    .check(value)
                    .map_err(|reason| bad_field(name, reason))?;
            }
        }
    }
    for rule in schema.optional.iter().chain(EXTENSIONS) {
        if let Some(value) = fields.get(rule.name) {
            rule.kind
                .check(value)
                .map_err(|reason| bad_field(rule.name, reason))?;
        }
    }
    Ok(())
}
