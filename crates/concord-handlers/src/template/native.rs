//! Running a template's plan natively: the module's two contract functions and its helpers
//! (`mapValue`, `findSource`, `dataFields`, `pick`, `own`, `put`, `setAt`, `getAt`, the
//! `expect…` checks), statement by statement as the emitted JavaScript runs them, on values
//! in the engine's form ([`concord_sandbox::round_trip`]), so that every result and every
//! thrown `TypeError` is the one the module gives in the sandbox.

use std::borrow::Cow;

use concord_sandbox::{property_order, round_trip, Function, SandboxError};
use serde_json::{Map, Value};

use super::plan::{
    Body, Branch, Check, Data, ModulePlan, ProviderPlan, ReadId, RequestInput, RequesterPlan,
    ResponseOutput, Source, StatusWords, Write,
};
use super::text::{describe, quote, stringify};
use crate::contract::Outcome;
use crate::mapping::{find_source, FieldPlan, Plan};
use concord_negotiate::envelope::UNKNOWN_WORD_CODE;
use concord_negotiate::naming::key;

/// A `TypeError` the module throws, with its message.
struct Thrown(String);

type Run<T> = Result<T, Thrown>;

impl From<Thrown> for SandboxError {
    fn from(Thrown(message): Thrown) -> Self {
        SandboxError::Thrown {
            message: format!("TypeError: {message}"),
        }
    }
}

/// What `decodeResponse` returns.
pub(crate) enum Decoded {
    /// `{ messageId, output }`.
    Output { message_id: String, output: Value },
    /// `{ messageId, error: { code, message } }`.
    Error {
        message_id: String,
        code: Value,
        message: String,
    },
}

/// Calls `function` of the module `plan` describes with `argument`: the argument read as
/// the function's first lines read it, then the function's body.
///
/// # Errors
/// [`SandboxError::WrongRole`] for the other role's functions; [`SandboxError::Thrown`]
/// with `TypeError: <message>` where the module throws.
pub(super) fn call(
    plan: &ModulePlan,
    function: Function,
    argument: &Value,
) -> Result<Value, SandboxError> {
    let argument = round_trip(argument);
    let argument = argument.as_ref();
    match (&plan.body, function) {
        (Body::Provider(provider), Function::DecodeRequest) => {
            let (message_id, input) = decode_request_body(provider, argument)?;
            Ok(reply(message_id, "input", input))
        }
        (Body::Provider(provider), Function::EncodeResponse) => {
            expect_object(Some(argument), "encodeResponse's argument")?;
            let message_id =
                expect_string(own(Some(argument), "messageId"), "the argument's messageId")?;
            let error = own(Some(argument), "error");
            let result = own(Some(argument), "result");
            Ok(encode_response_body(
                plan, provider, message_id, error, result,
            )?)
        }
        (Body::Requester(requester), Function::EncodeRequest) => {
            expect_object(Some(argument), "encodeRequest's argument")?;
            let message_id =
                expect_string(own(Some(argument), "messageId"), "the argument's messageId")?;
            let input = own(Some(argument), "input");
            Ok(encode_request_body(plan, requester, message_id, input)?)
        }
        (Body::Requester(requester), Function::DecodeResponse) => Ok(
            match decode_response_body(plan, requester, Cow::Borrowed(argument))? {
                Decoded::Output { message_id, output } => reply(&message_id, "output", output),
                Decoded::Error {
                    message_id,
                    code,
                    message,
                } => {
                    let mut error = Map::new();
                    error.insert("code".to_owned(), code);
                    error.insert("message".to_owned(), Value::String(message));
                    reply(&message_id, "error", Value::Object(error))
                }
            },
        ),
        _ => Err(wrong_role(plan, function)),
    }
}

fn wrong_role(plan: &ModulePlan, function: Function) -> SandboxError {
    SandboxError::WrongRole {
        function,
        role: plan.role,
    }
}

/// `encodeRequest({ messageId, input })`, without building the argument.
pub(super) fn encode_request(
    plan: &ModulePlan,
    message_id: &str,
    input: &Value,
) -> Result<Value, SandboxError> {
    let Body::Requester(requester) = &plan.body else {
        return Err(wrong_role(plan, Function::EncodeRequest));
    };
    let input = round_trip(input);
    Ok(encode_request_body(
        plan,
        requester,
        message_id,
        Some(input.as_ref()),
    )?)
}

/// `decodeRequest(message)`: the message id and input it returns.
pub(super) fn decode_request(
    plan: &ModulePlan,
    message: &Value,
) -> Result<(String, Value), SandboxError> {
    let Body::Provider(provider) = &plan.body else {
        return Err(wrong_role(plan, Function::DecodeRequest));
    };
    let message = round_trip(message);
    let (message_id, input) = decode_request_body(provider, message.as_ref())?;
    Ok((message_id.to_owned(), input))
}

/// `encodeResponse({ messageId, result })` or `encodeResponse({ messageId, error })`,
/// without building the argument.
pub(super) fn encode_response(
    plan: &ModulePlan,
    message_id: &str,
    outcome: &Outcome,
) -> Result<Value, SandboxError> {
    let Body::Provider(provider) = &plan.body else {
        return Err(wrong_role(plan, Function::EncodeResponse));
    };
    match outcome {
        Outcome::Result(result) => {
            let result = round_trip(result);
            Ok(encode_response_body(
                plan,
                provider,
                message_id,
                None,
                Some(result.as_ref()),
            )?)
        }
        Outcome::Error(status) => {
            let error = status.to_value();
            let error = round_trip(&error);
            Ok(encode_response_body(
                plan,
                provider,
                message_id,
                Some(error.as_ref()),
                None,
            )?)
        }
    }
}

/// `decodeResponse(message)`: what it returns. The message is the caller's: its output is
/// moved out of it, not copied, where the output table leaves it as it is.
pub(super) fn decode_response(plan: &ModulePlan, message: Value) -> Result<Decoded, SandboxError> {
    let Body::Requester(requester) = &plan.body else {
        return Err(wrong_role(plan, Function::DecodeResponse));
    };
    let converted = match round_trip(&message) {
        Cow::Owned(converted) => Some(converted),
        Cow::Borrowed(_) => None,
    };
    let message = converted.unwrap_or(message);
    Ok(decode_response_body(plan, requester, Cow::Owned(message))?)
}

// ----- the contract functions' bodies --------------------------------------------------------

fn decode_request_body<'m>(provider: &ProviderPlan, message: &'m Value) -> Run<(&'m str, Value)> {
    let function = &provider.decode_request;
    expect_object(Some(message), "the request")?;
    for check in &function.checks {
        expect_const(own(Some(message), &check.field), check)?;
    }
    let message_id = read_id(message, &function.id)?;
    let at = At::Root("the request");
    let input = match (&function.input, &provider.input, message) {
        (RequestInput::Fields { envelope }, Plan::Fields(fields), Value::Object(members)) => {
            map_fields(
                fields,
                |name| find_data_source(members, envelope, name),
                &at,
            )?
        }
        (RequestInput::Fields { envelope }, table, _) => {
            map_owned(data_fields(message, envelope), table, &at)?
        }
        (RequestInput::Single(field), table, _) => {
            map_value(&or_null(own(Some(message), field)), table, &at)?
        }
    };
    Ok((message_id, input))
}

/// `encodeResponse`'s body, after its first lines read `messageId`, `error` and (when
/// there is no error) `result`.
fn encode_response_body(
    module: &ModulePlan,
    provider: &ProviderPlan,
    message_id: &str,
    error: Option<&Value>,
    result: Option<&Value>,
) -> Run<Value> {
    let function = &provider.encode_response;
    let fields = function.common.len() + function.success.len();
    let mut message = Message::new(module, message_id, fields);
    message.write_all(&function.common, &mut Scope::None)?;
    if let Some(error) = error {
        expect_object(Some(error), "the argument's error")?;
        let Some(writes) = &function.error else {
            return Err(Thrown(
                "this protocol has no status code to report an error with".to_owned(),
            ));
        };
        message.write_all(writes, &mut Scope::Error(error))?;
    } else {
        let Some(result) = result else {
            return Err(Thrown(
                "encodeResponse's argument has neither result nor error".to_owned(),
            ));
        };
        let data = if function.maps_result {
            Some(map_value(
                result,
                &provider.result,
                &At::Root("the result"),
            )?)
        } else {
            None
        };
        let mut scope = Scope::Result {
            result,
            table: &provider.result,
            data,
        };
        message.write_all(&function.success, &mut scope)?;
    }
    Ok(message.finish())
}

/// `encodeRequest`'s body, after its first lines read `messageId` and `input`.
fn encode_request_body(
    module: &ModulePlan,
    requester: &RequesterPlan,
    message_id: &str,
    input: Option<&Value>,
) -> Run<Value> {
    let data = match requester.request_data {
        Data::Fields => {
            let input = expect_object(input, "the argument's input")?;
            Some(map_value(
                input,
                &requester.request,
                &At::Root("the input"),
            )?)
        }
        Data::Single(_) => None,
    };
    let mut message = Message::new(module, message_id, requester.encode_request.len());
    let table = &requester.request;
    message.write_all(
        &requester.encode_request,
        &mut Scope::Input { input, data, table },
    )?;
    Ok(message.finish())
}

/// `decodeResponse`'s body; an owned message gives its output up (moved, where the output
/// table leaves it as it is).
fn decode_response_body(
    module: &ModulePlan,
    requester: &RequesterPlan,
    message: Cow<'_, Value>,
) -> Run<Decoded> {
    let function = &requester.decode_response;
    let owned = message;
    let message = owned.as_ref();
    expect_object(Some(message), "the response")?;
    if let Some(check) = &function.check {
        expect_const(own(Some(message), &check.field), check)?;
    }
    let message_id = read_id(message, &function.id)?.to_owned();
    if let (Some(status), Some(code_at)) = (&function.status, &module.code_at) {
        let code = get_at(message, code_at);
        if let Some(code) = code.filter(|code| is_integer(code) && at_least(code, 400.0)) {
            let text = match (status.message, &module.message_at) {
                (true, Some(message_at)) => get_at(message, message_at)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                _ => String::new(),
            };
            return Ok(Decoded::Error {
                message_id,
                code: code.clone(),
                message: text,
            });
        }
    }
    if let Some(status) = &module.status {
        let word = own(Some(message), &status.field);
        if !word.is_some_and(|word| status.successes.contains(word)) {
            let text = match &module.message_at {
                Some(message_at) => get_at(message, message_at)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                None => String::new(),
            };
            return Ok(Decoded::Error {
                message_id,
                code: round_trip(&Value::from(status_code(status, word))).into_owned(),
                message: text,
            });
        }
    }
    let output = match &function.output {
        ResponseOutput::Single { field, what } => match owned {
            Cow::Owned(Value::Object(mut members)) => match members.swap_remove(field.as_str()) {
                Some(value) => map_owned(value, &requester.output, &At::Root(what))?,
                None => Value::Null,
            },
            message => match own(Some(message.as_ref()), field) {
                Some(value) => map_value(value, &requester.output, &At::Root(what))?,
                None => Value::Null,
            },
        },
        ResponseOutput::Pick(names) => {
            let mut picked = Map::with_capacity(names.len());
            for name in names {
                if let Some(value) = own(Some(message), name) {
                    picked.insert(name.clone(), value.clone());
                }
            }
            let picked = Value::Object(property_order(picked));
            map_owned(picked, &requester.output, &At::Root("the response"))?
        }
    };
    Ok(Decoded::Output { message_id, output })
}

/// `statusWord(code)`: the word of the first range holding `code`, else `STATUS_ERROR`
/// (compared as JavaScript numbers).
fn status_word<'s>(status: &'s StatusWords, code: &Value) -> &'s Value {
    let code = code.as_f64().unwrap_or(f64::NAN);
    status
        .errors
        .iter()
        .find(|(low, high, _)| code >= *low as f64 && code <= *high as f64)
        .map_or(&status.fallback, |(_, _, word)| word)
}

/// `statusCode(word)`: the low code of the range of `word`, else the unknown word's code.
fn status_code(status: &StatusWords, word: Option<&Value>) -> i64 {
    status
        .errors
        .iter()
        .find(|(_, _, known)| Some(known) == word)
        .map_or(UNKNOWN_WORD_CODE, |(low, _, _)| *low)
}

/// `{ messageId, <key>: value }`.
fn reply(message_id: &str, key: &str, value: Value) -> Value {
    let mut reply = Map::new();
    reply.insert("messageId".to_owned(), Value::String(message_id.to_owned()));
    reply.insert(key.to_owned(), value);
    Value::Object(reply)
}

fn read_id<'v>(message: &'v Value, id: &ReadId) -> Run<&'v str> {
    expect_string(own(Some(message), &id.field), &id.what)
}

// ----- building a message --------------------------------------------------------------------

/// What the statements of a function body read besides the message id.
enum Scope<'a> {
    /// The statements written before the outcome is known.
    None,
    /// `encodeResponse` on error: the `error` object.
    Error(&'a Value),
    /// `encodeResponse` on success: `result`, and `data` when it was mapped first.
    Result {
        result: &'a Value,
        table: &'a Plan,
        data: Option<Value>,
    },
    /// `encodeRequest`: `input`, `data` when it is mapped as fields, and the `REQUEST`
    /// table.
    Input {
        input: Option<&'a Value>,
        data: Option<Value>,
        table: &'a Plan,
    },
}

impl Scope<'_> {
    /// `own(data, field)`, taken out: each data field is written once at most (a
    /// message's fields have distinct names), so it is moved rather than copied.
    fn take_data(&mut self, field: &str) -> Option<Value> {
        match self {
            Scope::Result {
                data: Some(Value::Object(data)),
                ..
            }
            | Scope::Input {
                data: Some(Value::Object(data)),
                ..
            } => data.swap_remove(field),
            _ => None,
        }
    }
}

/// The message a function builds (`const message = {}` and its `put`s and `setAt`s).
struct Message<'a> {
    module: &'a ModulePlan,
    message_id: &'a str,
    fields: Map<String, Value>,
}

impl<'a> Message<'a> {
    fn new(module: &'a ModulePlan, message_id: &'a str, fields: usize) -> Self {
        Self {
            module,
            message_id,
            fields: Map::with_capacity(fields),
        }
    }

    fn write_all(&mut self, writes: &[Write], scope: &mut Scope<'_>) -> Run<()> {
        writes.iter().try_for_each(|write| self.write(write, scope))
    }

    fn write(&mut self, write: &Write, scope: &mut Scope<'_>) -> Run<()> {
        match write {
            Write::Put(field, source) => {
                let value = match source {
                    Source::MessageId => Value::String(self.message_id.to_owned()),
                    Source::Literal(value) | Source::Action(value) => value.clone(),
                    Source::Null => Value::Null,
                    Source::MappedInput => match scope {
                        Scope::Input { input, table, .. } => {
                            map_value(&or_null(*input), table, &At::Root("the input"))?
                        }
                        _ => Value::Null,
                    },
                    Source::MappedResult => match scope {
                        Scope::Result { result, table, .. } => {
                            map_value(result, table, &At::Root("the result"))?
                        }
                        _ => Value::Null,
                    },
                };
                self.fields.insert(field.clone(), value);
            }
            Write::PutData(field) => {
                if let Some(value) = scope.take_data(field) {
                    self.fields.insert(field.clone(), value);
                }
            }
            Write::SetCode(branch) => {
                let code = match (branch, scope) {
                    (Branch::Error, Scope::Error(error)) => {
                        expect_integer(own(Some(error), "code"), "the error's code")?.clone()
                    }
                    _ => round_trip(&Value::from(self.success_code())).into_owned(),
                };
                if let Some(path) = &self.module.code_at {
                    set_at(&mut self.fields, path, code);
                }
            }
            Write::SetStatus(branch) => {
                let Some(status) = &self.module.status else {
                    return Ok(());
                };
                let word = match (branch, scope) {
                    (Branch::Error, Scope::Error(error)) => {
                        let code = expect_integer(own(Some(error), "code"), "the error's code")?;
                        status_word(status, code).clone()
                    }
                    _ => status.success.clone(),
                };
                self.fields.insert(status.field.clone(), word);
            }
            Write::SetMessage(branch) => {
                let text = match (branch, scope) {
                    (Branch::Error, Scope::Error(error)) => {
                        expect_string(own(Some(error), "message"), "the error's message")?
                            .to_owned()
                    }
                    _ => super::SUCCESS_MESSAGE.to_owned(),
                };
                if let Some(path) = &self.module.message_at {
                    set_at(&mut self.fields, path, Value::String(text));
                }
            }
        }
        Ok(())
    }

    fn success_code(&self) -> i64 {
        match &self.module.body {
            Body::Provider(provider) => provider.success_code.unwrap_or_default(),
            Body::Requester(_) => 0,
        }
    }

    fn finish(self) -> Value {
        Value::Object(property_order(self.fields))
    }
}

/// `setAt(object, path, value)`: through (or creating) the objects on the path.
fn set_at(object: &mut Map<String, Value>, path: &[String], value: Value) {
    match path {
        // `path[path.length - 1]` of an empty path is `undefined`: a key named "undefined".
        [] => {
            object.insert("undefined".to_owned(), value);
        }
        [last] => {
            object.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let next = object
                .entry(first.clone())
                .and_modify(|next| {
                    if !next.is_object() {
                        *next = Value::Object(Map::new());
                    }
                })
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(next) = next {
                set_at(next, rest, value);
            }
        }
    }
    reorder(object);
}

/// Puts an object's members back in property order after an insertion.
fn reorder(object: &mut Map<String, Value>) {
    *object = property_order(std::mem::take(object));
}

// ----- the helpers -----------------------------------------------------------------------------

/// Where a value sits, for error messages: written out only when one is thrown.
enum At<'a> {
    Root(&'a str),
    Field(&'a At<'a>, &'a str),
    Item(&'a At<'a>, usize),
}

impl At<'_> {
    fn text(&self) -> String {
        match self {
            At::Root(text) => (*text).to_owned(),
            At::Field(parent, name) => format!("{}.{name}", parent.text()),
            At::Item(parent, index) => format!("{}[{index}]", parent.text()),
        }
    }
}

/// `mapValue(value, table, where)`.
fn map_value(value: &Value, table: &Plan, at: &At<'_>) -> Run<Value> {
    if maps_to_itself(value, table) {
        // Cloned whole: the clone keeps each member's hash, a rebuild hashes every key.
        return Ok(value.clone());
    }
    match (table, value) {
        (Plan::Items(items), Value::Array(values)) => values
            .iter()
            .enumerate()
            .map(|(index, item)| map_value(item, items, &At::Item(at, index)))
            .collect::<Run<Vec<_>>>()
            .map(Value::Array),
        (Plan::Fields(fields), Value::Object(object)) => {
            map_fields(fields, |name| find_source(object, name), at)
        }
        _ => Ok(value.clone()),
    }
}

/// Whether `mapValue(value, table)` gives `value` itself: an object whose members are the
/// table's fields, in its order (each found under its own name), each mapping to itself,
/// with no key that starts with a digit (JavaScript would move an array index first); an
/// array whose items map to themselves; anything else a table leaves as it is. No field
/// is then missing (no fallback is written) and none is dropped.
fn maps_to_itself(value: &Value, table: &Plan) -> bool {
    match (table, value) {
        (Plan::Fields(fields), Value::Object(object)) => {
            object.len() == fields.len()
                && object.iter().zip(fields).all(|((name, value), field)| {
                    *name == field.name
                        && !name.starts_with(|c: char| c.is_ascii_digit())
                        && maps_to_itself(value, &field.plan)
                })
        }
        (Plan::Items(items), Value::Array(values)) => {
            values.iter().all(|item| maps_to_itself(item, items))
        }
        _ => true,
    }
}

/// `mapValue(value, table, where)` of a value the caller owns: moved, not copied, where
/// the table leaves it as it is.
fn map_owned(value: Value, table: &Plan, at: &At<'_>) -> Run<Value> {
    if maps_to_itself(&value, table) {
        return Ok(value);
    }
    match (table, &value) {
        (Plan::Items(_), Value::Array(_)) | (Plan::Fields(_), Value::Object(_)) => {
            map_value(&value, table, at)
        }
        _ => Ok(value),
    }
}

/// The object `mapValue` builds for a `{ fields }` table, each field's source found by
/// `find` (`findSource` on the value being mapped).
fn map_fields<'v>(
    fields: &[FieldPlan],
    find: impl Fn(&str) -> Option<&'v Value>,
    at: &At<'_>,
) -> Run<Value> {
    let mut out = Map::with_capacity(fields.len());
    for field in fields {
        match find(&field.name) {
            Some(source) => {
                let mapped = map_value(source, &field.plan, &At::Field(at, &field.name))?;
                out.insert(field.name.clone(), mapped);
            }
            None if field.required => match &field.fallback {
                Some(fallback) => {
                    out.insert(field.name.clone(), fallback.clone());
                }
                None => {
                    return Err(Thrown(format!(
                        "{} lacks {}, which is required",
                        at.text(),
                        quote(&field.name)
                    )))
                }
            },
            None => {}
        }
    }
    Ok(Value::Object(property_order(out)))
}

/// `findSource(dataFields(message, envelope), name)`, without building the data object:
/// the same members, in the same order.
fn find_data_source<'v>(
    message: &'v Map<String, Value>,
    envelope: &[String],
    name: &str,
) -> Option<&'v Value> {
    let is_data = |field: &str| !envelope.iter().any(|envelope| envelope == field);
    if is_data(name) {
        if let Some(value) = message.get(name) {
            return Some(value);
        }
    }
    let wanted = key(name);
    message
        .iter()
        .filter(|(field, _)| is_data(field))
        .find(|(field, _)| key(field) == wanted)
        .map(|(_, value)| value)
}

/// `dataFields(message, envelope)`: the members outside the envelope, in order.
fn data_fields(message: &Value, envelope: &[String]) -> Value {
    let data = message
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| !envelope.contains(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    Value::Object(data)
}

/// `getAt(object, path)`.
fn get_at<'v>(object: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter()
        .try_fold(object, |value, name| own(Some(value), name))
}

/// `own(object, name)`: an own member of a (non-array) object, else `undefined`.
fn own<'v>(object: Option<&'v Value>, name: &str) -> Option<&'v Value> {
    object?.as_object()?.get(name)
}

/// `value ?? null`.
fn or_null(value: Option<&Value>) -> Value {
    value.cloned().unwrap_or(Value::Null)
}

/// `Number.isInteger(value)`.
fn is_integer(value: &Value) -> bool {
    value
        .as_f64()
        .is_some_and(|number| number.is_finite() && number.fract() == 0.0)
}

fn at_least(value: &Value, bound: f64) -> bool {
    value.as_f64().is_some_and(|number| number >= bound)
}

fn expect_object<'v>(value: Option<&'v Value>, what: &str) -> Run<&'v Value> {
    match value {
        Some(object @ Value::Object(_)) => Ok(object),
        other => Err(Thrown(format!(
            "{what} must be an object, not {}",
            describe(other)
        ))),
    }
}

fn expect_string<'v>(value: Option<&'v Value>, what: &str) -> Run<&'v str> {
    match value {
        Some(Value::String(text)) => Ok(text),
        other => Err(Thrown(format!(
            "{what} must be a string, not {}",
            describe(other)
        ))),
    }
}

fn expect_integer<'v>(value: Option<&'v Value>, what: &str) -> Run<&'v Value> {
    match value {
        Some(number) if is_integer(number) => Ok(number),
        other => Err(Thrown(format!(
            "{what} must be an integer, not {}",
            describe(other)
        ))),
    }
}

/// `expectConst(value, expected, what)`: equal as `JSON.stringify` writes them.
fn expect_const(value: Option<&Value>, check: &Check) -> Run<()> {
    let expected = check.expected.value();
    let same = match (value, expected) {
        (Some(Value::String(actual)), Value::String(expected)) => actual == expected,
        (Some(actual), expected) => stringify(actual) == stringify(expected),
        (None, _) => false,
    };
    if same {
        Ok(())
    } else {
        Err(Thrown(format!(
            "{} must be {}, not {}",
            check.what,
            stringify(expected),
            describe(value)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `mapValue` as it was before values that map to themselves were taken whole: every
    /// object rebuilt field by field.
    fn rebuilt(value: &Value, table: &Plan) -> Value {
        match (table, value) {
            (Plan::Items(items), Value::Array(values)) => {
                Value::Array(values.iter().map(|item| rebuilt(item, items)).collect())
            }
            (Plan::Fields(fields), Value::Object(object)) => {
                let mut out = Map::new();
                for field in fields {
                    match find_source(object, &field.name) {
                        Some(source) => {
                            out.insert(field.name.clone(), rebuilt(source, &field.plan));
                        }
                        None => {
                            if let (true, Some(fallback)) = (field.required, &field.fallback) {
                                out.insert(field.name.clone(), fallback.clone());
                            }
                        }
                    }
                }
                Value::Object(property_order(out))
            }
            _ => value.clone(),
        }
    }

    #[test]
    fn a_value_taken_whole_is_the_value_a_rebuild_gives() {
        let schema = json!({
            "type": "object",
            "properties": {
                "productId": {"type": "string"},
                "name": {"type": "string"},
                "price": {"type": "number"},
                "limit": {"type": "integer", "default": 10},
                "tags": {"type": "array", "items": {"type": "object", "properties": {
                    "tag_name": {"type": "string"}, "2": {"type": "integer"}
                }}},
                "dims": {"type": "object", "properties": {"w": {"type": "number"}, "h": {"type": "number"}}}
            },
            "required": ["productId", "limit"]
        });
        let table = Plan::for_target(Some(&schema));
        let values = [
            // Every field, in the table's order: the value itself.
            json!({"productId": "P1", "name": "Desk", "price": 12.5, "limit": 3,
                   "tags": [], "dims": {"w": 1, "h": 2}}),
            // Another order, a field missing (with and without a fallback), one extra,
            // another style of name, a nested object off the table, an array index key.
            json!({"name": "Desk", "productId": "P1", "price": 12.5, "limit": 3,
                   "tags": [], "dims": {"w": 1, "h": 2}}),
            json!({"productId": "P1", "name": "Desk", "price": 12.5,
                   "tags": [], "dims": {"w": 1, "h": 2}}),
            json!({"productId": "P1", "name": "Desk", "price": 12.5, "limit": 3,
                   "tags": [], "dims": {"w": 1, "h": 2}, "extra": true}),
            json!({"product_id": "P1", "name": "Desk", "price": 12.5, "limit": 3,
                   "tags": [], "dims": {"w": 1, "h": 2}}),
            json!({"productId": "P1", "name": "Desk", "price": 12.5, "limit": 3,
                   "tags": [{"tag_name": "a", "2": 7}], "dims": {"h": 2, "w": 1}}),
            json!({"productId": "P1", "name": "Desk", "price": 12.5, "limit": 3,
                   "tags": [{"tag_name": "a"}], "dims": {"w": 1, "h": 2}}),
            json!({"productId": "P1", "name": "Desk", "price": 12.5, "limit": 3,
                   "tags": "not an array", "dims": null}),
            json!("not an object"),
        ];
        for (index, value) in values.iter().enumerate() {
            let expected = serde_json::to_string(&rebuilt(value, &table)).unwrap();
            let at = At::Root("the value");
            let Ok(mapped) = map_value(value, &table, &at) else {
                panic!("value {index} does not map");
            };
            assert_eq!(
                serde_json::to_string(&mapped).unwrap(),
                expected,
                "value {index}"
            );
            let Ok(moved) = map_owned(value.clone(), &table, &at) else {
                panic!("value {index} does not map when owned");
            };
            assert_eq!(
                serde_json::to_string(&moved).unwrap(),
                expected,
                "value {index}"
            );
        }
        assert!(maps_to_itself(&values[0], &table));
        for value in &values[1..7] {
            assert!(!maps_to_itself(value, &table), "{value}");
        }
    }
}
