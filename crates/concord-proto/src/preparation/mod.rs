//! The negotiation's preparation policy: what follows agreement (test cases, code
//! generations, the `generated` announcement, verifying the peer's code, fix rounds) and
//! when to give up, as a sans-IO state machine beside [`Session`](crate::Session).
//!
//! ```text
//!  agreed ─▶ [requester, test cases negotiated] ProposeTestCases ─▶ agreed / dropped ─┐
//!    │                                                                                  │
//!    └──────────────────────────────▶ Generate(1) ◀─────────────────────────────────────┘
//!  Generate(n) ─ generated ─▶ [provider] Save{Announce} ─ saved ─▶ Announce(n)
//!              ─ failed, or code_generation_timeout ─▶ FailCode
//!  peer's report accepted ─▶ Generate(n+1), or FailCode past max_generations
//!  ready ─▶ [requester, cases agreed] Verify ─ every case answered ─▶ Save{ReportReady}
//!                                            ─ failures ─▶ ReportFailures (≤ max_fix_rounds)
//!                                                          or RefusePeerCode
//! ```

mod command;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::Instant;

pub use command::{AfterSave, CodeFailure, PeerCodeFailure, PreparationCommand, PreparationLimits};

use crate::hello::{Capabilities, Capability};
use crate::session::Role;

/// Where the agreed test cases stand.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TestPlan {
    /// Not negotiated (capability missing, nothing to test, or dropped).
    NotUsed,
    /// Requester: ours are being written or drafted.
    Drafting,
    /// Proposed or received, not yet agreed.
    Talking,
    /// Agreed: this text.
    Agreed(String),
}

/// Requester: the verification of the peer's code.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verification {
    /// Not run (yet).
    Idle,
    /// Requests sent; `outstanding` unanswered by `deadline`.
    Running {
        cases: usize,
        outstanding: usize,
        failures: Vec<String>,
        deadline: Instant,
    },
    /// We reported the failures; waiting for the fix and the next ready period.
    AwaitingFix { report: String },
    /// Every case passed.
    Passed,
}

/// The preparation policy of one session, for either role: fed what happened (agreement,
/// test cases settled, code generated or failed, the peer's reports, ready periods,
/// verification answers, expired deadlines), it queues the [`PreparationCommand`]s the
/// driver executes ([`Preparation::poll_command`]) and names its next deadline
/// ([`Preparation::poll_timeout`]). No I/O, no clock: `now` is an input.
#[derive(Debug, Clone)]
pub struct Preparation {
    role: Role,
    capabilities: Capabilities,
    limits: PreparationLimits,
    /// The protocol was settled in the hello (0-RTT or consensus): our code is in force.
    settled_in_hello: bool,
    tests: TestPlan,
    generation: u32,
    /// While generating: when that generation times out.
    generating: Option<Instant>,
    /// A generated code not yet announced.
    fresh: bool,
    /// Provider: the fresh code is being saved before it is announced.
    saving: bool,
    announced: bool,
    verification: Verification,
    fix_rounds: u32,
    verified_cases: usize,
    last_failure: Option<CodeFailure>,
    commands: VecDeque<PreparationCommand>,
}

impl Preparation {
    /// A session that will negotiate its protocol.
    pub fn new(role: Role, capabilities: Capabilities, limits: PreparationLimits) -> Self {
        Self {
            role,
            capabilities,
            limits,
            settled_in_hello: false,
            tests: TestPlan::NotUsed,
            generation: 0,
            generating: None,
            fresh: false,
            saving: false,
            announced: false,
            verification: Verification::Idle,
            fix_rounds: 0,
            verified_cases: 0,
            last_failure: None,
            commands: VecDeque::new(),
        }
    }

    /// A session whose protocol was settled in the hello (0-RTT or consensus), our code
    /// in force, with the test cases agreed for it when they were stored.
    pub fn settled(
        role: Role,
        capabilities: Capabilities,
        limits: PreparationLimits,
        test_cases: Option<String>,
    ) -> Self {
        let mut preparation = Self::new(role, capabilities, limits);
        preparation.settled_in_hello = true;
        preparation.tests = test_cases.map_or(TestPlan::NotUsed, TestPlan::Agreed);
        preparation
    }

    // ----- what the driver reads ----------------------------------------------------------

    /// The next step to execute.
    pub fn poll_command(&mut self) -> Option<PreparationCommand> {
        self.commands.pop_front()
    }

    /// The earliest deadline: call [`Preparation::handle_timeout`] once it has passed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let verification = match &self.verification {
            Verification::Running { deadline, .. } => Some(*deadline),
            _ => None,
        };
        [self.generating, verification].into_iter().flatten().min()
    }

    /// The agreed test cases, if any.
    pub fn test_cases(&self) -> Option<&str> {
        match &self.tests {
            TestPlan::Agreed(text) => Some(text),
            _ => None,
        }
    }

    /// The latest generation of our code started (0 before the first).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Requester: how many agreed test cases the peer's code passed (0 until it has).
    pub fn verified_cases(&self) -> usize {
        self.verified_cases
    }

    /// Why our code could not be made, once it could not.
    pub fn last_failure(&self) -> Option<&CodeFailure> {
        self.last_failure.as_ref()
    }

    /// Requester: whether a verification run is waiting for answers.
    pub fn is_verifying(&self) -> bool {
        matches!(self.verification, Verification::Running { .. })
    }

    // ----- what the driver feeds in -------------------------------------------------------

    /// The protocol is agreed (`interface`: an interface document, which has no handler
    /// to test). The requester negotiates test cases first when both sides can; otherwise
    /// our code is generated now (the provider's is verified over the verification
    /// protocol against the cases the requester agrees with it).
    pub fn agreed(&mut self, now: Instant, interface: bool) {
        *self = Self::new(self.role, self.capabilities, self.limits);
        let negotiate_cases = self.role == Role::Requester
            && !interface
            && self.capabilities.contains(Capability::TestCasesNegotiation);
        if negotiate_cases {
            self.tests = TestPlan::Drafting;
            self.commands
                .push_back(PreparationCommand::ProposeTestCases);
        } else {
            self.generate(now);
        }
    }

    /// Requester: our test cases went out.
    pub fn test_cases_proposed(&mut self) {
        self.tests = TestPlan::Talking;
    }

    /// Provider: the peer proposed test cases (being judged).
    pub fn test_cases_received(&mut self) {
        self.tests = TestPlan::Talking;
    }

    /// The test cases are agreed: the requester generates its code against them.
    pub fn test_cases_agreed(&mut self, now: Instant, test_cases: String) {
        self.tests = TestPlan::Agreed(test_cases);
        self.generate_once_settled(now);
    }

    /// The test cases were rejected, or could not be drafted or proposed: the session
    /// goes on without them.
    pub fn test_cases_dropped(&mut self, now: Instant) {
        self.tests = TestPlan::NotUsed;
        self.generate_once_settled(now);
    }

    /// Generation `generation` of our code is made (and passed the cases it was given).
    /// Returns whether it is the current one (a late result of an abandoned generation
    /// is ignored).
    pub fn code_generated(&mut self, _now: Instant, generation: u32) -> bool {
        if generation != self.generation || self.generating.is_none() {
            return false;
        }
        self.generating = None;
        self.fresh = true;
        self.advance();
        true
    }

    /// Generation `generation` of our code failed, saying `reason`.
    pub fn code_failed(&mut self, _now: Instant, generation: u32, reason: String) {
        if generation != self.generation || self.generating.is_none() {
            return;
        }
        self.generating = None;
        self.fail(CodeFailure::Generator(reason));
    }

    /// Provider: the protocol is saved with our fresh code: it may be announced.
    pub fn saved(&mut self) {
        if !self.saving {
            return;
        }
        self.saving = false;
        self.announce();
    }

    /// We accepted the peer's report of an error in our messages: regenerate our code,
    /// unless it has had `max_generations` already.
    pub fn error_report_accepted(&mut self, now: Instant) {
        if self.generation >= self.limits.max_generations {
            self.fail(CodeFailure::TooManyGenerations {
                limit: self.limits.max_generations,
            });
            return;
        }
        self.announced = false;
        self.generate(now);
    }

    /// The session is ready (`first`: for the first time). The provider notes the use
    /// of a protocol settled in the hello; the requester verifies the peer's code against
    /// the agreed cases when both sides can (the first time, and after each fix), else
    /// reports the connection ready.
    pub fn ready(&mut self, _now: Instant, first: bool) {
        match self.role {
            Role::Provider => {
                if first && self.settled_in_hello {
                    self.commands.push_back(PreparationCommand::Save {
                        then: AfterSave::Nothing,
                    });
                }
            }
            Role::Requester => {
                let awaiting_fix = matches!(self.verification, Verification::AwaitingFix { .. });
                if !(first || awaiting_fix) {
                    return;
                }
                let verify = self.test_cases().is_some()
                    && self.capabilities.contains(Capability::VerificationProtocol);
                self.commands.push_back(if verify {
                    PreparationCommand::Verify
                } else {
                    PreparationCommand::Save {
                        then: AfterSave::ReportReady,
                    }
                });
            }
        }
    }

    /// Requester: `cases` verification requests went out.
    pub fn verification_started(&mut self, now: Instant, cases: usize) {
        self.verification = Verification::Running {
            cases,
            outstanding: cases,
            failures: Vec::new(),
            deadline: now + self.limits.verification_timeout,
        };
        self.settle_verification();
    }

    /// Requester: the peer answered one verification request; `Err` carries how the
    /// answer differs from the case's (its name first).
    pub fn case_answered(&mut self, _now: Instant, result: Result<(), String>) {
        let Verification::Running {
            outstanding,
            failures,
            ..
        } = &mut self.verification
        else {
            return;
        };
        if let Err(failure) = result {
            failures.push(failure);
        }
        *outstanding = outstanding.saturating_sub(1);
        self.settle_verification();
    }

    /// Requester: something wrong in the verification answers that is no one case's
    /// result (an unreadable answer, an unknown messageId): it counts as a failure.
    pub fn verification_problem(&mut self, problem: String) {
        if let Verification::Running { failures, .. } = &mut self.verification {
            failures.push(problem);
        }
    }

    /// Requester: the peer rejected our error report (`reason`, if it gave one).
    pub fn fix_rejected(&mut self, _now: Instant, reason: Option<String>) {
        if let Verification::AwaitingFix { report } = &self.verification {
            let failure = PeerCodeFailure::FixRejected {
                report: report.clone(),
                reason: reason.unwrap_or_else(|| "no reason given".to_owned()),
            };
            self.verification = Verification::Idle;
            self.commands
                .push_back(PreparationCommand::RefusePeerCode(failure));
        }
    }

    /// Gives up on what is past its deadline at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.generating.is_some_and(|deadline| deadline <= now) {
            self.generating = None;
            self.fail(CodeFailure::TimedOut {
                limit: self.limits.code_generation_timeout,
            });
        }
        if let Verification::Running {
            outstanding,
            deadline,
            ..
        } = &self.verification
        {
            if *deadline <= now {
                let failure = PeerCodeFailure::NoAnswer {
                    missing: *outstanding,
                    limit: self.limits.verification_timeout,
                };
                self.verification = Verification::Idle;
                self.commands
                    .push_back(PreparationCommand::RefusePeerCode(failure));
            }
        }
    }

    // ----- decisions ----------------------------------------------------------------------

    /// Requester: generates our first code once the test-case talk is over.
    fn generate_once_settled(&mut self, now: Instant) {
        if self.role == Role::Requester
            && self.generation == 0
            && !matches!(self.tests, TestPlan::Drafting | TestPlan::Talking)
        {
            self.generate(now);
        }
    }

    fn generate(&mut self, now: Instant) {
        self.generation += 1;
        self.generating = Some(now + self.limits.code_generation_timeout);
        self.fresh = false;
        self.commands.push_back(PreparationCommand::Generate {
            generation: self.generation,
            test_cases: self.test_cases().map(str::to_owned),
        });
    }

    /// Announces the fresh code; the provider saves the protocol first, so that the
    /// requester's next connection finds it for 0-RTT.
    fn advance(&mut self) {
        if self.announced || self.generating.is_some() || self.saving || !self.fresh {
            return;
        }
        match self.role {
            Role::Requester => self.announce(),
            Role::Provider => {
                self.saving = true;
                self.commands.push_back(PreparationCommand::Save {
                    then: AfterSave::Announce,
                });
            }
        }
    }

    fn announce(&mut self) {
        if !self.fresh {
            return;
        }
        self.fresh = false;
        self.announced = true;
        self.commands.push_back(PreparationCommand::Announce {
            generation: self.generation,
        });
    }

    fn fail(&mut self, failure: CodeFailure) {
        self.last_failure = Some(failure.clone());
        self.commands
            .push_back(PreparationCommand::FailCode(failure));
    }

    /// Settles a verification run once every case is answered: passed, reported for a
    /// fix round, or refused when no round is left.
    fn settle_verification(&mut self) {
        let Verification::Running {
            cases,
            outstanding: 0,
            failures,
            ..
        } = &mut self.verification
        else {
            return;
        };
        let (cases, failures) = (*cases, std::mem::take(failures));
        if failures.is_empty() {
            self.verification = Verification::Passed;
            self.verified_cases = cases;
            self.commands.push_back(PreparationCommand::Save {
                then: AfterSave::ReportReady,
            });
            return;
        }
        let report = format!(
            "your responses to the agreed test cases differ from the expected ones: {}",
            failures.join("; ")
        );
        let can_fix = self.capabilities.contains(Capability::FixErrorNegotiation);
        if !can_fix || self.fix_rounds >= self.limits.max_fix_rounds {
            self.verification = Verification::Idle;
            self.commands
                .push_back(PreparationCommand::RefusePeerCode(PeerCodeFailure::Fails {
                    report,
                }));
            return;
        }
        self.fix_rounds += 1;
        self.verification = Verification::AwaitingFix {
            report: report.clone(),
        };
        self.commands
            .push_back(PreparationCommand::ReportFailures { report });
    }
}
