//! The LLM negotiator: every step asks an OpenAI-compatible model, with prompts built
//! from data messages, strict JSON answers and per-step accounting.

mod answer;
mod capability;
mod error;
mod prompt;

use std::future::Future;
use std::time::Instant;

use concord_context::PeerLabel;
use concord_llm::{AnswerFormat, ChatRequest, LlmClient, Message, ToolChoice};
use concord_proto::{Decision, FixDecision};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::action::{ActionSpec, Need};
use crate::complexity::SchemaLimits;
use crate::deterministic::too_complex;
use crate::document::{DocumentError, ProtocolDocument};
use crate::policy::{
    Decided, JudgeContext, NegotiateError, Negotiator, PolicyKind, Previous, Step, StepRecord,
    StructuredOutput,
};

use answer::{
    diagnose_schema, draft_schema, full_protocol, judge_schema, test_cases_judge_schema,
    test_cases_schema, valid_test_cases, DiagnoseAnswer, DraftAnswer, JudgeAnswer, TestCasesAnswer,
    TestCasesJudgeAnswer,
};
pub use answer::{MAX_DOCUMENT_CHARS, MAX_NOTE_CHARS};
pub use capability::CAPABILITY_TOOL;
pub use error::{LlmFailure, LlmStepError};
use prompt::{intro, Prompt, Task};

/// Tool rounds the provider's judge step answers before it insists on a decision.
pub const MAX_TOOL_ROUNDS: u32 = 4;

/// The label peer text carries in prompts unless [`LlmNegotiator::with_peer`] sets one.
pub const DEFAULT_PEER_LABEL: &str = "remote-agent";

/// Negotiates with an LLM, through an OpenAI-compatible chat-completions server.
///
/// Every step builds its prompt as a concord-context [`Context`](concord_context::Context):
/// a fixed system message (the task and the JSON shape of the answer), our own facts as
/// data messages (our need, our actions, our recent messages), and everything the peer
/// wrote (its action from its description, the candidate protocol, test cases, an error
/// report, and the agreed protocol, which the peer may have written) as fenced
/// [`PeerText`](concord_context::PeerText) only. It asks for JSON with the answer's JSON
/// Schema as `response_format` (strings bounded by [`MAX_DOCUMENT_CHARS`] and
/// [`MAX_NOTE_CHARS`], which a server that honours it keeps to; the prompt-only fallback
/// when the server refuses it, where those bounds are asked for in the prompt only and the
/// answer is bounded by the client's `MAX_RESPONSE_BYTES` and the checks below; the
/// [`StepRecord`] says which was used) and reads the answer
/// strictly (unknown keys are errors), with one corrective retry, then checks it: a
/// protocol it writes must be a full [`ProtocolDocument`] whose schemas compile, test
/// cases must parse (and follow the agreed schemas), a counter-proposal needs a summary
/// and a rejection a reason. Anything else is a [`NegotiateError::Llm`] carrying an
/// [`LlmStepError`].
///
/// On the provider's judge step the model gets the tool [`CAPABILITY_TOOL`] to read our
/// actions' schemas by name or by requirement; we answer from our [`ActionSpec`]s, for at
/// most [`MAX_TOOL_ROUNDS`] rounds.
///
/// Each step records into a child of the client's [`Usage`](concord_llm::Usage) ledger,
/// so its [`StepRecord`] has exactly its own calls and tokens; the client's ledger still
/// sees them all.
///
/// ```no_run
/// use concord_llm::{LlmClient, LlmConfig};
/// use concord_negotiate::{ActionSpec, JudgeContext, LlmNegotiator, Negotiator, Previous};
///
/// # async fn demo(actions: Vec<ActionSpec>, candidate: &str) -> Result<(), Box<dyn std::error::Error>> {
/// let Some(config) = LlmConfig::from_env()? else {
///     return Ok(()); // no LLM configured: use the DeterministicNegotiator
/// };
/// let negotiator = LlmNegotiator::new(LlmClient::new(config)?);
/// let decided = negotiator
///     .judge(JudgeContext::Provider { actions: &actions }, candidate, Previous::default())
///     .await?;
/// println!("{:?} after {} LLM calls", decided.value, decided.record.llm_calls);
/// # Ok(()) }
/// ```
///
/// A candidate whose schemas are over its [`SchemaLimits`] (the defaults, or
/// [`LlmNegotiator::with_schema_limits`]) never reaches the model: the judge step rejects
/// it, as [`DeterministicNegotiator`](crate::DeterministicNegotiator) does, with no LLM call.
#[derive(Debug, Clone)]
pub struct LlmNegotiator {
    client: LlmClient,
    peer: Option<PeerLabel>,
    limits: SchemaLimits,
}

impl LlmNegotiator {
    /// A negotiator asking `client`'s model, with the default [`SchemaLimits`].
    pub fn new(client: LlmClient) -> Self {
        Self {
            client,
            peer: None,
            limits: SchemaLimits::default(),
        }
    }

    /// The same negotiator, reading candidates' schemas within `limits`.
    pub fn with_schema_limits(mut self, limits: SchemaLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits candidates' schemas are read within.
    pub fn schema_limits(&self) -> &SchemaLimits {
        &self.limits
    }

    /// Labels peer text in prompts with `peer` (a DID or an agent name) instead of
    /// [`DEFAULT_PEER_LABEL`].
    pub fn with_peer(mut self, peer: PeerLabel) -> Self {
        self.peer = Some(peer);
        self
    }

    /// The client (its [`usage`](LlmClient::usage) ledger counts every step's calls).
    pub fn client(&self) -> &LlmClient {
        &self.client
    }

    fn prompt(&self, task: Task) -> Result<Prompt, LlmFailure> {
        let peer = match &self.peer {
            Some(peer) => peer.clone(),
            None => PeerLabel::new(DEFAULT_PEER_LABEL).map_err(|error| LlmFailure::Prompt {
                reason: error.to_string(),
            })?,
        };
        Ok(Prompt::new(task, peer))
    }

    /// Runs one step on a client recording into a child ledger, and accounts for it.
    async fn step<T, F, Fut>(&self, step: Step, run: F) -> Result<Decided<T>, NegotiateError>
    where
        F: FnOnce(LlmClient) -> Fut,
        Fut: Future<Output = Result<T, LlmFailure>>,
    {
        let start = Instant::now();
        let client = self.client.with_usage(self.client.usage().child());
        let result = run(client.clone()).await;
        let usage = client.usage().summary();
        let structured_output = if usage.prompt_only_calls > 0 {
            Some(StructuredOutput::PromptOnly)
        } else if usage.json_schema_calls > 0 {
            Some(StructuredOutput::JsonSchema)
        } else if usage.json_object_calls > 0 {
            Some(StructuredOutput::JsonObject)
        } else {
            None
        };
        let record = StepRecord {
            step,
            policy: PolicyKind::Llm,
            llm_calls: u32::try_from(usage.calls).unwrap_or(u32::MAX),
            tokens_in: usage.prompt_tokens,
            tokens_out: usage.completion_tokens,
            wall: start.elapsed(),
            structured_output,
            corrective_retries: u32::try_from(usage.corrective_calls).unwrap_or(u32::MAX),
        };
        match result {
            Ok(value) => Ok(Decided { value, record }),
            Err(failure) => Err(NegotiateError::Llm(Box::new(LlmStepError {
                step,
                record,
                failure,
            }))),
        }
    }
}

/// One call asking for JSON that follows `schema` (named `name`), parsed strictly into `T`,
/// with concord-llm's prompt-only fallback and one corrective retry.
async fn ask<T: DeserializeOwned>(
    client: &LlmClient,
    messages: Vec<Message>,
    name: &str,
    schema: Value,
) -> Result<T, LlmFailure> {
    Ok(client
        .complete_json::<T>(ChatRequest::new(messages).with_json_schema(name, schema))
        .await?
        .value)
}

/// The provider's judge conversation: the model may call [`CAPABILITY_TOOL`] for up to
/// [`MAX_TOOL_ROUNDS`] rounds (the request after the last round sets `tool_choice: none`),
/// then must answer with a [`JudgeAnswer`]. The answer is read as strictly as
/// [`LlmClient::complete_json`] reads (one JSON value, unknown keys rejected), with one
/// corrective retry naming the parse error.
async fn judge_with_tools(
    client: &LlmClient,
    actions: &[ActionSpec],
    mut messages: Vec<Message>,
) -> Result<JudgeAnswer, LlmFailure> {
    let tools = vec![capability::capability_tool()];
    let mut rounds = 0;
    let mut rejected: Option<String> = None;
    // Whether the next request is the corrective retry (only the one right after the
    // rejection, not the tool rounds after it).
    let mut correcting = false;
    // Once the server refuses the schema, later rounds ask in the prompt only.
    let mut schema = Some(judge_schema());
    loop {
        let choice = if rounds < MAX_TOOL_ROUNDS {
            ToolChoice::Auto
        } else {
            ToolChoice::None
        };
        let mut request = ChatRequest::new(messages.clone())
            .with_tools(tools.clone())
            .with_tool_choice(choice);
        if let Some(schema) = &schema {
            request = request.with_json_schema("judgement", schema.clone());
        }
        let (response, format) = client
            .chat_json(request, std::mem::take(&mut correcting))
            .await?;
        if format == AnswerFormat::PromptOnly {
            schema = None;
        }
        let calls = response.tool_calls().to_vec();
        if !calls.is_empty() {
            if rounds >= MAX_TOOL_ROUNDS {
                return Err(LlmFailure::ToolRounds { rounds });
            }
            rounds += 1;
            messages.push(Message::Assistant {
                content: response.content().map(str::to_owned),
                tool_calls: calls.clone(),
            });
            for call in &calls {
                messages.push(Message::tool_result(
                    &call.id,
                    capability::answer(actions, call),
                ));
            }
            continue;
        }
        let content = response.content().unwrap_or_default();
        match serde_json::from_str::<JudgeAnswer>(content) {
            Ok(answer) => return Ok(answer),
            Err(error) => {
                let why = if content.is_empty() {
                    "the answer has no text".to_owned()
                } else {
                    error.to_string()
                };
                if let Some(first) = rejected {
                    return Err(LlmFailure::UnusableAnswer { first, second: why });
                }
                messages.push(Message::assistant(content));
                messages.push(Message::user(format!(
                    "Your previous answer could not be used: {why}. Answer again with only the \
                     JSON object asked for, exactly as specified: no prose, no code fences."
                )));
                rejected = Some(why);
                correcting = true;
            }
        }
    }
}

impl Negotiator for LlmNegotiator {
    async fn draft(
        &self,
        need: &Need,
        peer_action: &ActionSpec,
    ) -> Result<Decided<String>, NegotiateError> {
        self.step(Step::Draft, |client| async move {
            let messages = self
                .prompt(Task::Draft)?
                .data("need", prompt::need_data(need), prompt::NEED_DESCRIPTION)?
                .peer_text(intro::PEER_ACTION, &prompt::peer_action_text(peer_action))
                .messages()?;
            let answer: DraftAnswer = ask(&client, messages, "draft", draft_schema()).await?;
            full_protocol(answer.candidate_protocol)
        })
        .await
    }

    async fn judge(
        &self,
        context: JudgeContext<'_>,
        candidate: &str,
        previous: Previous<'_>,
    ) -> Result<Decided<Decision>, NegotiateError> {
        let start = Instant::now();
        if let Err(error @ DocumentError::TooComplex { .. }) =
            ProtocolDocument::parse_within(candidate, &self.limits)
        {
            return Ok(Decided::deterministic(
                Step::Judge,
                start,
                too_complex(&error),
            ));
        }
        self.step(Step::Judge, |client| async move {
            let answer = match context {
                JudgeContext::Provider { actions } => {
                    let messages = self
                        .prompt(Task::JudgeAsProvider)?
                        .data(
                            "ourActions",
                            prompt::actions_index(actions),
                            prompt::ACTIONS_DESCRIPTION,
                        )?
                        .previous(previous)
                        .peer_text(intro::CANDIDATE, candidate)
                        .messages()?;
                    judge_with_tools(&client, actions, messages).await?
                }
                JudgeContext::Requester { need, peer_action } => {
                    let messages = self
                        .prompt(Task::JudgeAsRequester)?
                        .data("need", prompt::need_data(need), prompt::NEED_DESCRIPTION)?
                        .peer_text(intro::PEER_ACTION, &prompt::peer_action_text(peer_action))
                        .previous(previous)
                        .peer_text(intro::CANDIDATE, candidate)
                        .messages()?;
                    ask::<JudgeAnswer>(&client, messages, "judgement", judge_schema()).await?
                }
            };
            answer.into_decision()
        })
        .await
    }

    async fn draft_test_cases(
        &self,
        protocol: &ProtocolDocument,
    ) -> Result<Decided<String>, NegotiateError> {
        self.step(Step::DraftTestCases, |client| async move {
            let messages = self
                .prompt(Task::DraftTestCases)?
                .peer_text(intro::AGREED, protocol.text())
                .messages()?;
            let answer: TestCasesAnswer =
                ask(&client, messages, "test_cases", test_cases_schema()).await?;
            valid_test_cases(protocol, &answer.test_cases)
        })
        .await
    }

    async fn judge_test_cases(
        &self,
        protocol: &ProtocolDocument,
        test_cases: &str,
    ) -> Result<Decided<Decision>, NegotiateError> {
        self.step(Step::JudgeTestCases, |client| async move {
            let messages = self
                .prompt(Task::JudgeTestCases)?
                .peer_text(intro::AGREED, protocol.text())
                .peer_text(intro::TEST_CASES, test_cases)
                .messages()?;
            let answer: TestCasesJudgeAnswer = ask(
                &client,
                messages,
                "test_cases_judgement",
                test_cases_judge_schema(),
            )
            .await?;
            answer.into_decision(protocol)
        })
        .await
    }

    async fn diagnose(
        &self,
        protocol: &ProtocolDocument,
        error_description: &str,
        our_messages: &[Value],
    ) -> Result<Decided<FixDecision>, NegotiateError> {
        self.step(Step::Diagnose, |client| async move {
            let messages = self
                .prompt(Task::Diagnose)?
                .peer_text(intro::AGREED, protocol.text())
                .data(
                    "ourMessages",
                    Value::Array(our_messages.to_vec()),
                    prompt::OUR_MESSAGES_DESCRIPTION,
                )?
                .peer_text(intro::ERROR_REPORT, error_description)
                .messages()?;
            let answer: DiagnoseAnswer =
                ask(&client, messages, "diagnosis", diagnose_schema()).await?;
            answer.into_decision()
        })
        .await
    }
}
