//! The test-case runner: each negotiated case through the requester's and the provider's
//! code, every wire message validated, every result compared with what the case implies.

use std::fmt;

use concord_negotiate::{TestCase, TestCases};
use concord_sandbox::{Function, SandboxError};
use serde_json::Value;

use crate::code::Code;
use crate::contract::{self, request_argument, response_argument};
use crate::diff::{diff, Difference};
use crate::expect::{self, Underivable};
use crate::local::Local;
use crate::verify::{Direction, InvalidMessage, Verifier};
use crate::wire::{self, WireError};

/// Runs negotiated test cases through one or both sides' handlers.
///
/// For each case (request `R`, response `S`):
///
/// 1. Both `R` and `S` must pass the [`Verifier`] (else the case itself is wrong).
/// 2. **Requester `encodeRequest`**: the input is derived from `R` by the mapping rule
///    (each field of our need's input schema takes `R`'s field of the same name, else of
///    the same name in another naming style), with `R`'s message id. The message produced
///    must survive the wire encoding, pass the request schema and equal `R` exactly.
/// 3. **Provider `decodeRequest`** of that message (or of `R` if step 2 failed) must return
///    `{messageId, input}` with `R`'s message id and the action input derived from `R`.
/// 4. **Action stub**: answers what makes `S` follow: `S`'s data mapped onto the action's
///    output schema, or `S`'s error status when its code is 400 or more.
/// 5. **Provider `encodeResponse`** of the stub's answer (with the message id step 3
///    returned) must survive the wire, pass the response schema and equal `S` exactly,
///    except that a success's status message is free text (present, but not compared).
/// 6. **Requester `decodeResponse`** of that message (or of `S`) must return `S`'s message
///    id with the output derived from `S`, or `S`'s error status.
///
/// With one side only, the other side's steps are skipped and the case's own messages stand
/// in for its output. A failed step does not stop the case: the next step gets the case's
/// message, so every side is judged on correct input and each failure is reported once.
///
/// ```
/// use concord_handlers::{template, CaseRunner, Code, Local, Verifier};
/// use concord_negotiate::{canonical_protocol, ActionSpec, ProtocolDocument, TestCases};
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
/// let cases = TestCases::parse(r#"# Test case 1
/// - Request: {"messageId": "m1", "type": "REQUEST", "action": "getPrice", "productId": "P1"}
/// - Response: {"messageId": "m1", "type": "RESPONSE", "status": {"code": 200, "message": "OK"}, "result": 12.5}
/// - Expected: the price
/// "#)?;
/// let provider = Local::Provider(action);
/// let requester = Local::Requester(concord_negotiate::Need { action: "getPrice".into(), input: None, output: None });
/// let mut provider_handler = Code::load(&template(&document, &provider)?, &document, &provider, Limits::default())?;
/// let mut requester_handler = Code::load(&template(&document, &requester)?, &document, &requester, Limits::default())?;
/// let verifier = Verifier::new(&document)?;
/// let report = CaseRunner::new(&verifier)
///     .with_side(&mut requester_handler, &requester)
///     .with_side(&mut provider_handler, &provider)
///     .run(&cases);
/// assert!(report.passed(), "{}", report.details());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CaseRunner<'a> {
    verifier: &'a Verifier,
    requester: Option<(&'a mut Code, &'a Local)>,
    provider: Option<(&'a mut Code, &'a Local)>,
}

impl fmt::Debug for CaseRunner<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaseRunner")
            .field("requester", &self.requester.is_some())
            .field("provider", &self.provider.is_some())
            .finish_non_exhaustive()
    }
}

/// A step of running a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CaseStep {
    /// The case's own messages.
    Case,
    /// The requester's `encodeRequest`.
    EncodeRequest,
    /// The provider's `decodeRequest`.
    DecodeRequest,
    /// The provider's `encodeResponse`.
    EncodeResponse,
    /// The requester's `decodeResponse`.
    DecodeResponse,
}

impl CaseStep {
    /// `requester encodeRequest`, …, or `the case` for the case's own messages.
    pub fn describe(self) -> &'static str {
        match self {
            CaseStep::Case => "the case",
            CaseStep::EncodeRequest => "requester encodeRequest",
            CaseStep::DecodeRequest => "provider decodeRequest",
            CaseStep::EncodeResponse => "provider encodeResponse",
            CaseStep::DecodeResponse => "requester decodeResponse",
        }
    }
}

impl fmt::Display for CaseStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// What went wrong at a step.
#[derive(Debug)]
#[non_exhaustive]
pub enum Problem {
    /// One of the case's own messages breaks the protocol's schema.
    InvalidCase(InvalidMessage),
    /// Our side's value cannot be derived from the case (a field our schema requires has no
    /// counterpart in the case's message, in any naming style).
    Underivable(String),
    /// The function failed: it threw, or hit a sandbox limit.
    Sandbox(SandboxError),
    /// The function's return value breaks the handler contract.
    Contract(contract::ContractViolation),
    /// The message produced cannot be put on the wire in the protocol's encoding.
    Wire(WireError),
    /// The message produced breaks the protocol's schema.
    Schema(InvalidMessage),
    /// The function produced something other than what the case implies.
    Mismatch {
        /// What the case implies.
        expected: Value,
        /// What the function produced.
        actual: Value,
        /// Where they differ.
        differences: Vec<Difference>,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::InvalidCase(invalid) => write!(f, "{invalid}"),
            Problem::Underivable(reason) => write!(f, "cannot run this side: {reason}"),
            Problem::Sandbox(error) => write!(f, "{error}"),
            Problem::Contract(violation) => write!(f, "{violation}"),
            Problem::Wire(error) => write!(f, "cannot be sent: {error}"),
            Problem::Schema(invalid) => write!(f, "{invalid}"),
            Problem::Mismatch { differences, .. } => {
                write!(f, "differs from the case at ")?;
                for (index, difference) in differences.iter().enumerate() {
                    if index > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{difference}")?;
                }
                Ok(())
            }
        }
    }
}

/// A failed step.
#[derive(Debug)]
pub struct Failure {
    /// Where.
    pub step: CaseStep,
    /// What.
    pub problem: Problem,
}

/// The result of one case.
#[derive(Debug)]
pub struct CaseReport {
    /// The case's heading.
    pub name: String,
    /// The case's expected result, in words.
    pub expected: String,
    /// Every failed step, in run order (empty: the case passed).
    pub failures: Vec<Failure>,
}

impl CaseReport {
    /// Whether every step passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The results of a set of cases; see [`CasesReport::table`], [`CasesReport::details`] and
/// [`CasesReport::fix_error_report`] for text.
#[derive(Debug)]
pub struct CasesReport {
    /// One report per case, in case order.
    pub cases: Vec<CaseReport>,
}

impl CasesReport {
    /// Whether every case passed.
    pub fn passed(&self) -> bool {
        self.cases.iter().all(CaseReport::passed)
    }

    /// The failed cases.
    pub fn failed(&self) -> impl Iterator<Item = &CaseReport> {
        self.cases.iter().filter(|case| !case.passed())
    }
}

impl<'a> CaseRunner<'a> {
    /// A runner checking messages with `verifier`.
    pub fn new(verifier: &'a Verifier) -> Self {
        Self {
            verifier,
            requester: None,
            provider: None,
        }
    }

    /// Runs `code` as the side `local` describes (its role decides which steps it takes);
    /// a sandboxed [`Handler`](concord_sandbox::Handler) runs as `Code::from(handler)`. A
    /// second side of the same role replaces the first.
    pub fn with_side(mut self, code: &'a mut Code, local: &'a Local) -> Self {
        match local {
            Local::Requester(_) => self.requester = Some((code, local)),
            Local::Provider(_) => self.provider = Some((code, local)),
        }
        self
    }

    /// Runs every case.
    pub fn run(&mut self, cases: &TestCases) -> CasesReport {
        CasesReport {
            cases: cases.cases.iter().map(|case| self.run_case(case)).collect(),
        }
    }

    fn run_case(&mut self, case: &TestCase) -> CaseReport {
        let mut failures = Vec::new();
        for (direction, message) in [
            (Direction::Request, &case.request),
            (Direction::Response, &case.response),
        ] {
            if let Err(invalid) = self.verifier.check(direction, message) {
                failures.push(Failure {
                    step: CaseStep::Case,
                    problem: Problem::InvalidCase(invalid),
                });
            }
        }
        if failures.is_empty() {
            self.run_steps(case, &mut failures);
        }
        CaseReport {
            name: case.name.clone(),
            expected: case.expected.clone(),
            failures,
        }
    }

    fn run_steps(&mut self, case: &TestCase, failures: &mut Vec<Failure>) {
        let verifier = self.verifier;
        let envelope = verifier.envelope();
        let mut fail = |step: CaseStep, problem: Problem| failures.push(Failure { step, problem });

        let mut request = case.request.clone();
        if let Some((handler, local)) = &mut self.requester {
            let call =
                expect::message_id(&case.request, &envelope.request_id, "request").and_then(|id| {
                    let input = expect::input_of(envelope, local.input_schema(), &case.request)?;
                    Ok(request_argument(&id, &input))
                });
            match call {
                Err(Underivable { reason }) => {
                    fail(CaseStep::EncodeRequest, Problem::Underivable(reason))
                }
                Ok(argument) => match produce(
                    verifier,
                    handler,
                    Function::EncodeRequest,
                    &argument,
                    &case.request,
                ) {
                    Ok(produced) => request = produced,
                    Err(problem) => fail(CaseStep::EncodeRequest, *problem),
                },
            }
        }

        let mut response = case.response.clone();
        if let Some((handler, Local::Provider(action))) = &mut self.provider {
            let mut message_id = None;
            match expect::incoming(envelope, &action.input, &case.request) {
                // The case's fields do not map onto our input by name (the protocol names
                // them otherwise; an LLM wrote our code): the input the code decodes must
                // be one our action takes, with the case's message id.
                Err(underivable) => match decoded_input_fits(
                    handler,
                    &request,
                    envelope,
                    &action.input,
                    &case.request,
                    underivable,
                ) {
                    Ok(id) => message_id = Some(id),
                    Err(problem) => fail(CaseStep::DecodeRequest, *problem),
                },
                Ok(expected) => {
                    match compare(
                        handler,
                        Function::DecodeRequest,
                        &request,
                        &expected.to_value(),
                    ) {
                        Ok(()) => message_id = Some(expected.message_id),
                        Err(problem) => fail(CaseStep::DecodeRequest, *problem),
                    }
                }
            }
            let answer = expect::message_id(&case.request, &envelope.request_id, "request")
                .and_then(|id| {
                    let outcome = expect::outcome(envelope, Some(&action.output), &case.response)?;
                    Ok((message_id.unwrap_or(id), outcome))
                });
            match answer {
                Err(Underivable { reason }) => {
                    fail(CaseStep::EncodeResponse, Problem::Underivable(reason))
                }
                Ok((id, outcome)) => {
                    let argument = response_argument(&id, &outcome);
                    match produce(
                        verifier,
                        handler,
                        Function::EncodeResponse,
                        &argument,
                        &case.response,
                    ) {
                        Ok(produced) => response = produced,
                        Err(problem) => fail(CaseStep::EncodeResponse, *problem),
                    }
                }
            }
        }

        if let Some((handler, local)) = &mut self.requester {
            match expect::reply(envelope, local.output_schema(), &case.response) {
                Err(Underivable { reason }) => {
                    fail(CaseStep::DecodeResponse, Problem::Underivable(reason))
                }
                Ok(expected) => {
                    if let Err(problem) = compare(
                        handler,
                        Function::DecodeResponse,
                        &response,
                        &expected.to_value(),
                    ) {
                        fail(CaseStep::DecodeResponse, *problem);
                    }
                }
            }
        }
    }
}

/// Calls an encode function and checks its message: a JSON object that survives the wire
/// encoding, passes the schema, and equals the case's message. Returns the message as
/// received on the other side.
fn produce(
    verifier: &Verifier,
    handler: &mut Code,
    function: Function,
    argument: &Value,
    expected: &Value,
) -> Result<Value, Box<Problem>> {
    let direction = match function {
        Function::EncodeRequest => Direction::Request,
        _ => Direction::Response,
    };
    let produced = handler.call(function, argument).map_err(Problem::Sandbox)?;
    let produced = contract::message(produced, function).map_err(Problem::Contract)?;
    let bytes = wire::encode(verifier.encoding(), &produced).map_err(Problem::Wire)?;
    let received = wire::decode(verifier.encoding(), &bytes, usize::MAX).map_err(Problem::Wire)?;
    verifier
        .check(direction, &received)
        .map_err(Problem::Schema)?;
    let envelope = verifier.envelope();
    let free_text = (direction == Direction::Response && !envelope.is_error(expected))
        .then_some(envelope.message_at.as_deref())
        .flatten();
    let differences: Vec<Difference> = diff(expected, &received)
        .into_iter()
        .filter(|difference| {
            !(Some(difference.pointer.as_str()) == free_text
                && difference.expected.as_ref().is_some_and(Value::is_string)
                && difference.actual.as_ref().is_some_and(Value::is_string))
        })
        .collect();
    if differences.is_empty() {
        Ok(received)
    } else {
        Err(Box::new(Problem::Mismatch {
            expected: expected.clone(),
            actual: received,
            differences,
        }))
    }
}

/// Calls a decode function and compares its result with the expected one.
/// Runs `decodeRequest` on `request` and checks what it returns against our action's input
/// schema and the case's message id; the message id when it passes.
fn decoded_input_fits(
    handler: &mut Code,
    request: &Value,
    envelope: &crate::envelope::Envelope,
    input_schema: &Value,
    case_request: &Value,
    underivable: Underivable,
) -> Result<String, Box<Problem>> {
    let expected_id = expect::message_id(case_request, &envelope.request_id, "request")
        .map_err(|Underivable { reason }| Problem::Underivable(reason))?;
    let actual = handler
        .call(Function::DecodeRequest, request)
        .map_err(Problem::Sandbox)?;
    let input = actual.get("input").cloned().unwrap_or(Value::Null);
    let mut problems: Vec<String> = concord_negotiate::check_against(input_schema, &input)
        .map_err(|error| Problem::Underivable(error.to_string()))?
        .iter()
        .map(|violation| format!("the decoded input at {violation}"))
        .collect();
    if actual.get("messageId").and_then(Value::as_str) != Some(expected_id.as_str()) {
        problems.push(format!("the messageId is not the case's {expected_id:?}"));
    }
    if problems.is_empty() {
        Ok(expected_id)
    } else {
        Err(Box::new(Problem::Underivable(format!(
            "{}; and what decodeRequest returns does not fit our action's input: {}",
            underivable.reason,
            problems.join("; ")
        ))))
    }
}

fn compare(
    handler: &mut Code,
    function: Function,
    message: &Value,
    expected: &Value,
) -> Result<(), Box<Problem>> {
    let actual = handler.call(function, message).map_err(Problem::Sandbox)?;
    let differences = diff(expected, &actual);
    if differences.is_empty() {
        Ok(())
    } else {
        Err(Box::new(Problem::Mismatch {
            expected: expected.clone(),
            actual,
            differences,
        }))
    }
}
