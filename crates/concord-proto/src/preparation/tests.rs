//! The preparation policy on a simulated clock: a requester's and a provider's policies
//! driven against each other (the sessions between them reduced to what the policies
//! see), and each bound alone.

use std::time::{Duration, Instant};

use super::*;

const CASES: &str = "the agreed cases";
const STEP: Duration = Duration::from_secs(1);

fn limits() -> PreparationLimits {
    PreparationLimits::default()
}

/// How the pair's preparation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// The requester reported the connection ready, `verified` cases passed.
    Ready { verified: usize },
    /// The requester refused the provider's code.
    Refused(PeerCodeFailure),
    /// The provider gave up on its own code.
    ProviderFailed(CodeFailure),
}

/// Two policies and what stands for the session between them: the provider's code passes
/// the cases from generation `good_from` on.
struct Pair {
    now: Instant,
    requester: Preparation,
    provider: Preparation,
    good_from: u32,
    cases: usize,
    requester_code: bool,
    provider_code: Option<u32>,
    ever_ready: bool,
    reports: u32,
    outcome: Option<Outcome>,
}

impl Pair {
    fn new(capabilities: Capabilities, limits: PreparationLimits, good_from: u32) -> Self {
        Self {
            now: Instant::now(),
            requester: Preparation::new(Role::Requester, capabilities, limits),
            provider: Preparation::new(Role::Provider, capabilities, limits),
            good_from,
            cases: 3,
            requester_code: false,
            provider_code: None,
            ever_ready: false,
            reports: 0,
            outcome: None,
        }
    }

    /// Agrees, then runs both policies until neither has anything to do.
    fn run(mut self) -> Self {
        self.requester.agreed(self.now, false);
        self.provider.agreed(self.now, false);
        loop {
            if let Some(command) = self.requester.poll_command() {
                self.on_requester(command);
            } else if let Some(command) = self.provider.poll_command() {
                self.on_provider(command);
            } else {
                return self;
            }
        }
    }

    fn on_requester(&mut self, command: PreparationCommand) {
        self.now += STEP;
        match command {
            PreparationCommand::ProposeTestCases => {
                self.requester.test_cases_proposed();
                self.provider.test_cases_received();
                self.requester.test_cases_agreed(self.now, CASES.to_owned());
                self.provider.test_cases_agreed(self.now, CASES.to_owned());
            }
            PreparationCommand::Generate {
                generation,
                test_cases,
            } => {
                assert_eq!(test_cases.as_deref(), Some(CASES));
                assert!(self.requester.code_generated(self.now, generation));
            }
            PreparationCommand::Announce { .. } => {
                self.requester_code = true;
                self.ready_when_both();
            }
            PreparationCommand::Verify => {
                self.requester.verification_started(self.now, self.cases);
                let good = self.provider_code.is_some_and(|g| g >= self.good_from);
                for case in 0..self.cases {
                    let result = if good {
                        Ok(())
                    } else {
                        Err(format!("case {case}: `servedBy` missing"))
                    };
                    self.requester.case_answered(self.now, result);
                }
            }
            PreparationCommand::ReportFailures { report } => {
                assert!(report.contains("`servedBy` missing"), "{report}");
                self.reports += 1;
                // The provider's driver diagnoses the report and accepts it.
                self.provider_code = None;
                self.provider.error_report_accepted(self.now);
            }
            PreparationCommand::Save {
                then: AfterSave::ReportReady,
            } => {
                self.outcome = Some(Outcome::Ready {
                    verified: self.requester.verified_cases(),
                });
            }
            PreparationCommand::RefusePeerCode(failure) => {
                self.outcome = Some(Outcome::Refused(failure));
            }
            other => panic!("the requester asked for {other:?}"),
        }
    }

    fn on_provider(&mut self, command: PreparationCommand) {
        self.now += STEP;
        match command {
            PreparationCommand::Generate { generation, .. } => {
                assert!(self.provider.code_generated(self.now, generation));
            }
            PreparationCommand::Save {
                then: AfterSave::Announce,
            } => self.provider.saved(),
            PreparationCommand::Announce { generation } => {
                self.provider_code = Some(generation);
                self.ready_when_both();
            }
            PreparationCommand::FailCode(failure) => {
                self.outcome = Some(Outcome::ProviderFailed(failure));
            }
            other => panic!("the provider asked for {other:?}"),
        }
    }

    /// The session is ready once both sides said `generated`.
    fn ready_when_both(&mut self) {
        if self.requester_code && self.provider_code.is_some() {
            let first = !self.ever_ready;
            self.ever_ready = true;
            self.requester.ready(self.now, first);
            self.provider.ready(self.now, first);
        }
    }
}

fn pair(good_from: u32) -> Pair {
    Pair::new(Capabilities::all(), limits(), good_from).run()
}

#[test]
fn both_roles_prepare_and_the_cases_pass() {
    let pair = pair(1);
    assert_eq!(pair.outcome, Some(Outcome::Ready { verified: 3 }));
    assert_eq!(pair.requester.generation(), 1);
    assert_eq!(pair.provider.generation(), 1);
    assert_eq!(pair.reports, 0);
    assert_eq!(pair.requester.poll_timeout(), None);
    assert_eq!(pair.provider.poll_timeout(), None);
}

#[test]
fn a_failing_provider_is_fixed_within_the_rounds() {
    let pair = pair(3);
    assert_eq!(pair.outcome, Some(Outcome::Ready { verified: 3 }));
    assert_eq!(pair.reports, 2);
    assert_eq!(pair.provider.generation(), 3);
    // The requester's own code was made once.
    assert_eq!(pair.requester.generation(), 1);
}

#[test]
fn the_fix_rounds_are_bounded() {
    // Default bounds: 3 reports, and the provider's 4 generations cover them.
    let pair = pair(u32::MAX);
    assert_eq!(pair.reports, 3);
    assert_eq!(pair.provider.generation(), 4);
    match pair.outcome {
        Some(Outcome::Refused(PeerCodeFailure::Fails { report })) => {
            assert!(report.starts_with("your responses to the agreed test cases differ"));
        }
        other => panic!("{other:?}"),
    }
    // One round fewer, one report fewer.
    let limits = PreparationLimits {
        max_fix_rounds: 1,
        ..limits()
    };
    let pair = Pair::new(Capabilities::all(), limits, u32::MAX).run();
    assert_eq!(pair.reports, 1);
    assert!(matches!(
        pair.outcome,
        Some(Outcome::Refused(PeerCodeFailure::Fails { .. }))
    ));
}

#[test]
fn the_generations_are_bounded() {
    let limits = PreparationLimits {
        max_generations: 2,
        max_fix_rounds: 5,
        ..limits()
    };
    let pair = Pair::new(Capabilities::all(), limits, u32::MAX).run();
    assert_eq!(pair.reports, 2);
    assert_eq!(pair.provider.generation(), 2);
    let failure = CodeFailure::TooManyGenerations { limit: 2 };
    assert_eq!(pair.outcome, Some(Outcome::ProviderFailed(failure.clone())));
    assert_eq!(pair.provider.last_failure(), Some(&failure));
}

#[test]
fn without_fix_error_a_failure_ends_it() {
    let capabilities: Capabilities = [
        Capability::TestCasesNegotiation,
        Capability::VerificationProtocol,
    ]
    .into_iter()
    .collect();
    let pair = Pair::new(capabilities, limits(), u32::MAX).run();
    assert_eq!(pair.reports, 0);
    assert!(matches!(
        pair.outcome,
        Some(Outcome::Refused(PeerCodeFailure::Fails { .. }))
    ));
}

#[test]
fn without_verification_the_requester_is_ready_unverified() {
    let capabilities: Capabilities = [Capability::TestCasesNegotiation].into_iter().collect();
    let pair = Pair::new(capabilities, limits(), u32::MAX).run();
    assert_eq!(pair.outcome, Some(Outcome::Ready { verified: 0 }));
}

#[test]
fn a_generation_times_out_and_its_late_result_is_ignored() {
    let now = Instant::now();
    let mut provider = Preparation::new(Role::Provider, Capabilities::all(), limits());
    provider.agreed(now, false);
    assert_eq!(
        provider.poll_command(),
        Some(PreparationCommand::Generate {
            generation: 1,
            test_cases: None
        })
    );
    let deadline = now + limits().code_generation_timeout;
    assert_eq!(provider.poll_timeout(), Some(deadline));
    provider.handle_timeout(deadline - STEP);
    assert_eq!(provider.poll_command(), None);
    provider.handle_timeout(deadline);
    let failure = CodeFailure::TimedOut {
        limit: limits().code_generation_timeout,
    };
    assert_eq!(
        provider.poll_command(),
        Some(PreparationCommand::FailCode(failure.clone()))
    );
    assert_eq!(provider.last_failure(), Some(&failure));
    assert_eq!(provider.poll_timeout(), None);
    assert!(!provider.code_generated(deadline + STEP, 1));
    assert_eq!(provider.poll_command(), None);
}

#[test]
fn a_failed_generation_gives_up_with_the_generators_reason() {
    let now = Instant::now();
    let mut requester = Preparation::new(Role::Requester, Capabilities::none(), limits());
    requester.agreed(now, false);
    assert!(matches!(
        requester.poll_command(),
        Some(PreparationCommand::Generate { generation: 1, .. })
    ));
    // A stale generation's failure is no failure of the current one.
    requester.code_failed(now, 7, "old".to_owned());
    assert_eq!(requester.poll_command(), None);
    requester.code_failed(now, 1, "no LLM".to_owned());
    let failure = CodeFailure::Generator("no LLM".to_owned());
    assert_eq!(
        requester.poll_command(),
        Some(PreparationCommand::FailCode(failure))
    );
}

#[test]
fn verification_answers_are_awaited_for_the_verification_timeout() {
    let now = Instant::now();
    let mut requester = Preparation::settled(
        Role::Requester,
        Capabilities::all(),
        limits(),
        Some(CASES.to_owned()),
    );
    requester.ready(now, true);
    assert_eq!(requester.poll_command(), Some(PreparationCommand::Verify));
    requester.verification_started(now, 3);
    requester.case_answered(now + STEP, Ok(()));
    assert!(requester.is_verifying());
    let deadline = now + limits().verification_timeout;
    assert_eq!(requester.poll_timeout(), Some(deadline));
    requester.handle_timeout(deadline - STEP);
    assert_eq!(requester.poll_command(), None);
    requester.handle_timeout(deadline);
    assert_eq!(
        requester.poll_command(),
        Some(PreparationCommand::RefusePeerCode(
            PeerCodeFailure::NoAnswer {
                missing: 2,
                limit: limits().verification_timeout
            }
        ))
    );
    assert!(!requester.is_verifying());
}

#[test]
fn a_rejected_fix_ends_it_with_the_report_and_the_reason() {
    let now = Instant::now();
    let mut requester = Preparation::settled(
        Role::Requester,
        Capabilities::all(),
        limits(),
        Some(CASES.to_owned()),
    );
    // A rejection with no report of ours pending changes nothing.
    requester.fix_rejected(now, None);
    assert_eq!(requester.poll_command(), None);
    requester.ready(now, true);
    assert_eq!(requester.poll_command(), Some(PreparationCommand::Verify));
    requester.verification_started(now, 1);
    requester.verification_problem("an unreadable answer".to_owned());
    requester.case_answered(now, Ok(()));
    let Some(PreparationCommand::ReportFailures { report }) = requester.poll_command() else {
        panic!("no report");
    };
    assert!(report.ends_with("an unreadable answer"), "{report}");
    requester.fix_rejected(now, None);
    assert_eq!(
        requester.poll_command(),
        Some(PreparationCommand::RefusePeerCode(
            PeerCodeFailure::FixRejected {
                report,
                reason: "no reason given".to_owned()
            }
        ))
    );
}

#[test]
fn the_requester_generates_only_once_the_test_case_talk_is_over() {
    let now = Instant::now();
    let mut requester = Preparation::new(Role::Requester, Capabilities::all(), limits());
    requester.agreed(now, false);
    assert_eq!(
        requester.poll_command(),
        Some(PreparationCommand::ProposeTestCases)
    );
    requester.test_cases_proposed();
    assert_eq!(requester.poll_command(), None);
    assert_eq!(requester.poll_timeout(), None);
    // Rejected: our code is made without them, and the session is ready unverified.
    requester.test_cases_dropped(now);
    assert_eq!(
        requester.poll_command(),
        Some(PreparationCommand::Generate {
            generation: 1,
            test_cases: None
        })
    );
    assert!(requester.code_generated(now, 1));
    assert_eq!(
        requester.poll_command(),
        Some(PreparationCommand::Announce { generation: 1 })
    );
    requester.ready(now, true);
    assert_eq!(
        requester.poll_command(),
        Some(PreparationCommand::Save {
            then: AfterSave::ReportReady
        })
    );
    // A later ready period (the provider's regeneration) asks nothing more.
    requester.ready(now, false);
    assert_eq!(requester.poll_command(), None);
}

#[test]
fn an_interface_is_generated_at_once_without_test_cases() {
    let now = Instant::now();
    let mut requester = Preparation::new(Role::Requester, Capabilities::all(), limits());
    requester.agreed(now, true);
    assert_eq!(
        requester.poll_command(),
        Some(PreparationCommand::Generate {
            generation: 1,
            test_cases: None
        })
    );
}

#[test]
fn the_provider_saves_before_announcing_and_notes_a_settled_protocol() {
    let now = Instant::now();
    let mut provider = Preparation::new(Role::Provider, Capabilities::all(), limits());
    provider.agreed(now, false);
    provider.poll_command();
    assert!(provider.code_generated(now, 1));
    assert_eq!(
        provider.poll_command(),
        Some(PreparationCommand::Save {
            then: AfterSave::Announce
        })
    );
    assert_eq!(provider.poll_command(), None);
    provider.saved();
    assert_eq!(
        provider.poll_command(),
        Some(PreparationCommand::Announce { generation: 1 })
    );
    provider.saved();
    assert_eq!(provider.poll_command(), None);
    provider.ready(now, true);
    assert_eq!(provider.poll_command(), None);

    let mut settled = Preparation::settled(Role::Provider, Capabilities::all(), limits(), None);
    settled.ready(now, true);
    assert_eq!(
        settled.poll_command(),
        Some(PreparationCommand::Save {
            then: AfterSave::Nothing
        })
    );
    settled.ready(now, false);
    assert_eq!(settled.poll_command(), None);
}

#[test]
fn no_cases_pass_at_once() {
    let now = Instant::now();
    let mut requester = Preparation::settled(
        Role::Requester,
        Capabilities::all(),
        limits(),
        Some(CASES.to_owned()),
    );
    requester.ready(now, true);
    requester.poll_command();
    requester.verification_started(now, 0);
    assert_eq!(
        requester.poll_command(),
        Some(PreparationCommand::Save {
            then: AfterSave::ReportReady
        })
    );
    assert_eq!(requester.poll_timeout(), None);
}

#[test]
fn failures_name_the_limit() {
    let failure = CodeFailure::TimedOut {
        limit: Duration::from_millis(2500),
    };
    assert_eq!(
        failure.to_string(),
        "code generation took longer than 2.5 s"
    );
    let failure = PeerCodeFailure::NoAnswer {
        missing: 2,
        limit: Duration::from_millis(300),
    };
    assert_eq!(
        failure.to_string(),
        "2 verification request(s) got no answer within 300 ms"
    );
    let failure = CodeFailure::TooManyGenerations { limit: 4 };
    assert_eq!(
        failure.to_string(),
        "the peer still reports errors after 4 generations of our code"
    );
    assert_eq!(
        CodeFailure::TimedOut {
            limit: Duration::from_secs(60)
        }
        .to_string(),
        "code generation took longer than 60 s"
    );
}
