//! The plan of a template module: its constants, mapping tables and contract functions as
//! data, statement by statement. [`super::js`] writes the module's JavaScript from it and
//! [`super::native`] runs it; neither decides anything the plan does not say.

use concord_sandbox::{round_trip, Role};
use serde_json::Value;

use crate::mapping::Plan;

/// A whole module.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ModulePlan {
    pub role: Role,
    /// The protocol's hash, named in the module's header.
    pub protocol: String,
    /// `ACTION`: the request's action, when the request has an action field.
    pub action: Option<Value>,
    /// `CODE_AT`: the path of a response's status code.
    pub code_at: Option<Vec<String>>,
    /// `MESSAGE_AT`: the path of a response's status message.
    pub message_at: Option<Vec<String>>,
    /// The response's status word, when it has one (`STATUS_FIELD` and its words).
    pub status: Option<StatusWords>,
    pub body: Body,
}

/// A response's status written as a word (`concord_negotiate::envelope::StatusText`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StatusWords {
    /// `STATUS_FIELD`: the response's top-level field.
    pub field: String,
    /// `STATUS_SUCCESS`: the word of a success.
    pub success: Value,
    /// `STATUS_SUCCESSES`: every word read as a success.
    pub successes: Vec<Value>,
    /// `STATUS_ERRORS`: `[low, high, word]`, the first range holding a code picks its word;
    /// a word is read as its range's low code.
    pub errors: Vec<(i64, i64, Value)>,
    /// `STATUS_ERROR`: the word of an error no range holds.
    pub fallback: Value,
}

impl ModulePlan {
    /// The plan with every constant as the engine holds it once the module is loaded (see
    /// [`round_trip`]): what a native run compares with and writes.
    pub fn in_engine_form(mut self) -> Self {
        if let Some(action) = &mut self.action {
            engine_form(action);
        }
        if let Some(status) = &mut self.status {
            engine_form(&mut status.success);
            status.successes.iter_mut().for_each(engine_form);
            engine_form(&mut status.fallback);
            for (_, _, word) in &mut status.errors {
                engine_form(word);
            }
        }
        match &mut self.body {
            Body::Provider(provider) => {
                engine_tables(&mut provider.input);
                engine_tables(&mut provider.result);
                for check in &mut provider.decode_request.checks {
                    engine_check(check);
                }
                let response = &mut provider.encode_response;
                for writes in [&mut response.common, &mut response.success]
                    .into_iter()
                    .chain(response.error.as_mut())
                {
                    writes.iter_mut().for_each(engine_write);
                }
            }
            Body::Requester(requester) => {
                engine_tables(&mut requester.request);
                engine_tables(&mut requester.output);
                requester.encode_request.iter_mut().for_each(engine_write);
                if let Some(check) = &mut requester.decode_response.check {
                    engine_check(check);
                }
            }
        }
        self
    }
}

fn engine_form(value: &mut Value) {
    *value = round_trip(value).into_owned();
}

fn engine_check(check: &mut Check) {
    match &mut check.expected {
        Expected::Literal(value) | Expected::Action(value) => engine_form(value),
    }
}

fn engine_write(write: &mut Write) {
    if let Write::Put(_, Source::Literal(value) | Source::Action(value)) = write {
        engine_form(value);
    }
}

fn engine_tables(plan: &mut Plan) {
    match plan {
        Plan::Copy => {}
        Plan::Items(items) => engine_tables(items),
        Plan::Fields(fields) => {
            for field in fields {
                if let Some(fallback) = &mut field.fallback {
                    engine_form(fallback);
                }
                engine_tables(&mut field.plan);
            }
        }
    }
}

/// The role's constants, tables and two functions.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Body {
    Provider(ProviderPlan),
    Requester(RequesterPlan),
}

/// How a request carries the action's data.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Data {
    /// As fields of the message, mapped to and from an object.
    Fields,
    /// As the value of this one field: a single value, or an object nested there.
    Single(String),
}

/// The provider's constants, tables and functions.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ProviderPlan {
    /// `SUCCESS_CODE`, when responses carry a status code.
    pub success_code: Option<i64>,
    /// Whether responses carry a status message (`SUCCESS_MESSAGE`).
    pub success_message: bool,
    /// The response's data fields, in schema order.
    pub payload: Vec<String>,
    /// `INPUT`: the request's data → the action's input.
    pub input: Plan,
    /// `RESULT`: the action's result → the response's data.
    pub result: Plan,
    pub decode_request: DecodeRequest,
    pub encode_response: EncodeResponse,
}

/// The requester's tables and functions.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RequesterPlan {
    pub request_data: Data,
    /// The response's data fields, in schema order.
    pub payload: Vec<String>,
    /// `REQUEST`: our input → the request's data.
    pub request: Plan,
    /// `OUTPUT`: the response's data → our output.
    pub output: Plan,
    /// `encodeRequest`: the request's fields, in schema order.
    pub encode_request: Vec<Write>,
    pub decode_response: DecodeResponse,
}

/// `expectConst(own(message, field), expected, what)`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Check {
    pub field: String,
    pub expected: Expected,
    pub what: String,
}

/// What a [`Check`] compares with.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expected {
    /// This constant.
    Literal(Value),
    /// `ACTION`, which is this value.
    Action(Value),
}

impl Expected {
    /// The value compared with.
    pub fn value(&self) -> &Value {
        match self {
            Expected::Literal(value) | Expected::Action(value) => value,
        }
    }
}

/// `expectString(own(message, field), what)`: the message id.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ReadId {
    pub field: String,
    pub what: String,
}

/// `decodeRequest`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DecodeRequest {
    pub checks: Vec<Check>,
    pub id: ReadId,
    pub input: RequestInput,
}

/// Where `decodeRequest` takes the action's input from.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RequestInput {
    /// `mapValue(dataFields(message, envelope), INPUT, "the request")`: every field outside
    /// these envelope names.
    Fields { envelope: Vec<String> },
    /// `mapValue(own(message, field) ?? null, INPUT, "the request")`: the input is in this
    /// one field (a single value, or an object nested there).
    Single(String),
}

/// `encodeResponse`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct EncodeResponse {
    /// Written first, the same on success and on error.
    pub common: Vec<Write>,
    /// Written for an error; `None` when the protocol has no status code (an error throws).
    pub error: Option<Vec<Write>>,
    /// Whether a success maps the result first (`const data = mapValue(result, RESULT, …)`).
    pub maps_result: bool,
    /// Written for a success.
    pub success: Vec<Write>,
}

/// `decodeResponse`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DecodeResponse {
    pub check: Option<Check>,
    pub id: ReadId,
    /// Whether an error status (an integer code of 400 or more at `CODE_AT`) is read, and
    /// its message at `MESSAGE_AT`.
    pub status: Option<StatusRead>,
    pub output: ResponseOutput,
}

/// Reading an error status code.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StatusRead {
    /// Whether the message is read from `MESSAGE_AT` (else it is `""`).
    pub message: bool,
}

/// Where `decodeResponse` takes the output from.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum ResponseOutput {
    /// `mapValue(own(message, field) ?? null, OUTPUT, what)`.
    Single { field: String, what: String },
    /// `mapValue(pick(message, names), OUTPUT, "the response")`.
    Pick(Vec<String>),
}

/// One statement writing a field of the message being built.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Write {
    /// `put(message, field, <source>)`.
    Put(String, Source),
    /// `putPresent(message, field, own(data, field))`.
    PutData(String),
    /// `setAt(message, CODE_AT, SUCCESS_CODE | expectInteger(own(error, "code"), …))`.
    SetCode(Branch),
    /// `setAt(message, MESSAGE_AT, SUCCESS_MESSAGE | expectString(own(error, "message"), …))`.
    SetMessage(Branch),
    /// `put(message, STATUS_FIELD, STATUS_SUCCESS | statusWord(expectInteger(own(error,
    /// "code"), …)))`.
    SetStatus(Branch),
}

/// What a [`Write::Put`] writes.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Source {
    /// `messageId`.
    MessageId,
    /// A constant.
    Literal(Value),
    /// `ACTION`, which is this value.
    Action(Value),
    /// `null`.
    Null,
    /// `mapValue(input ?? null, REQUEST, "the input")` (the requester's input, carried in
    /// the request's one data field).
    MappedInput,
    /// `mapValue(result, RESULT, "the result")` (the provider's single result value).
    MappedResult,
}

/// Which outcome an `encodeResponse` statement writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Branch {
    Success,
    Error,
}
