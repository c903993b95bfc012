//! What a [`Preparation`](super::Preparation) asks its driver to do, and why it gives up.

use std::fmt;
use std::time::Duration;

/// The bounds of a negotiation's preparation: how often our code may be regenerated, how
/// often the peer's may be sent back, and how long each phase may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreparationLimits {
    /// Generations of our code in one session: the first and each regeneration after the
    /// peer's accepted error report. One more accepted report gives up
    /// ([`CodeFailure::TooManyGenerations`]).
    pub max_generations: u32,
    /// Requester: error reports sent for the peer's code failing the agreed test cases;
    /// a failure after this many gives up ([`PeerCodeFailure::Fails`]).
    pub max_fix_rounds: u32,
    /// How long one generation of our code (with its test run) may take
    /// ([`CodeFailure::TimedOut`]).
    pub code_generation_timeout: Duration,
    /// Requester: how long the peer has to answer every verification request of a run
    /// ([`PeerCodeFailure::NoAnswer`]).
    pub verification_timeout: Duration,
}

impl Default for PreparationLimits {
    fn default() -> Self {
        Self {
            max_generations: 4,
            max_fix_rounds: 3,
            code_generation_timeout: Duration::from_secs(60),
            verification_timeout: Duration::from_secs(60),
        }
    }
}

/// What to do once the protocol is saved with our code. Exhaustive, like
/// [`PreparationCommand`]: a driver must execute every one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterSave {
    /// Announce the fresh code (call [`Preparation::saved`](super::Preparation::saved)).
    Announce,
    /// Requester: tell the application the connection is ready.
    ReportReady,
    /// Nothing more (a protocol settled in the hello, its use noted).
    Nothing,
}

/// One step the driver executes for the preparation, then reports back. Exhaustive on
/// purpose: a new step must not compile in a driver that does not execute it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreparationCommand {
    /// Requester: propose test cases for the agreed protocol (our own, or drafted by the
    /// negotiator); report [`Preparation::test_cases_proposed`](super::Preparation::test_cases_proposed)
    /// or [`Preparation::test_cases_dropped`](super::Preparation::test_cases_dropped).
    ProposeTestCases,
    /// Generate our code (generation `generation`), verified against `test_cases` when
    /// given; report [`Preparation::code_generated`](super::Preparation::code_generated) or
    /// [`Preparation::code_failed`](super::Preparation::code_failed) with the same number.
    Generate {
        /// Which generation this is (1 for the first).
        generation: u32,
        /// The agreed test cases the generator verifies our code against.
        test_cases: Option<String>,
    },
    /// Save the protocol with our code, then do `then`.
    Save {
        /// What follows the save.
        then: AfterSave,
    },
    /// Put the fresh code in force and say `generated` (`Session::code_ready`).
    Announce {
        /// The generation announced.
        generation: u32,
    },
    /// Our code cannot be made: say so and close (`Session::code_failed`).
    FailCode(CodeFailure),
    /// Requester: run the agreed test cases against the peer's code over the
    /// verification protocol; report
    /// [`Preparation::verification_started`](super::Preparation::verification_started),
    /// then each answer.
    Verify,
    /// Requester: report the peer's failing cases to it (`fixErrorNegotiation`).
    ReportFailures {
        /// The failures, one line.
        report: String,
    },
    /// Requester: the peer's code fails the agreed test cases for good: end the session.
    RefusePeerCode(PeerCodeFailure),
}

/// Why our code cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeFailure {
    /// The generator failed, saying this.
    #[error("{0}")]
    Generator(String),
    /// A generation took longer than `code_generation_timeout`.
    #[error("code generation took longer than {}", Human(*limit))]
    TimedOut {
        /// The limit.
        limit: Duration,
    },
    /// The peer reported errors we accepted after `max_generations` generations.
    #[error("the peer still reports errors after {limit} generations of our code")]
    TooManyGenerations {
        /// The limit.
        limit: u32,
    },
}

/// Requester: why the peer's code is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeerCodeFailure {
    /// It fails the agreed test cases, and no (further) fix round is possible: the peer
    /// does not negotiate fix-error, or `max_fix_rounds` were spent.
    #[error("{report}")]
    Fails {
        /// The failures, one line.
        report: String,
    },
    /// It failed them and the peer rejected our report.
    #[error("{report} (the peer rejected the fix: {reason})")]
    FixRejected {
        /// The failures reported.
        report: String,
        /// The peer's reason.
        reason: String,
    },
    /// Verification requests got no answer within `verification_timeout`.
    #[error("{missing} verification request(s) got no answer within {}", Human(*limit))]
    NoAnswer {
        /// How many.
        missing: usize,
        /// The limit.
        limit: Duration,
    },
}

/// A duration as people read it: `300 ms`, `15 s`, `2.5 s`.
struct Human(Duration);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = self.0.as_millis();
        if millis < 1000 {
            write!(f, "{millis} ms")
        } else if millis.is_multiple_of(1000) {
            write!(f, "{} s", millis / 1000)
        } else {
            write!(f, "{:.1} s", self.0.as_secs_f64())
        }
    }
}
