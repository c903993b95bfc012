//! When an agent registers with a directory, refreshes its entry, backs off and gives up: a
//! sans-IO rule (it takes `now` and a jitter draw; the registrar task executes it).
//!
//! - At start, register at once.
//! - Registered with a TTL: register again (a `PUT` of the current description, which also
//!   refreshes the directory's `expires`) at half the TTL.
//! - The directory away (no connection, a timeout, 408, 429, 5xx): retry after an
//!   exponential backoff, `first_retry` doubled per failure up to `max_retry`, each delay
//!   drawn in its upper half (`delay × (0.5 + jitter / 2)`) so that agents a directory
//!   lost at once do not come back at once; a `Retry-After` longer than that is honoured, up
//!   to `max_retry`. An entry whose TTL ran out meanwhile counts as gone.
//! - A signed registration answered 401 (a challenge the node cannot meet: the directory
//!   cannot resolve or verify its DID) with signing `Auto`: register unsigned at once, and
//!   from then on. A 401 to an unsigned registration (or to a signed one with `Always`):
//!   give up, the directory requires a signature the node cannot give.
//! - 403 for an entry whose id is a DID: a conflict (the directory keeps that entry to
//!   another writer); no more attempts, reported as such rather than as a refusal.
//! - The directory refused the entry (any other 4xx: an invalid description, a signature
//!   refused): give up; retrying would be refused again.

use std::time::{Duration, Instant};

/// How an agent keeps its entry in a directory: the TTL it registers with and the backoff
/// while the directory is away. The defaults: a TTL of 300 s (refreshed every 150 s), a first
/// retry after 1 s, at most 60 s between retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistrationSettings {
    /// The entry's time to live (`registration.ttl`, whole seconds, at least 2): the
    /// directory drops the entry when the agent stops refreshing it.
    pub ttl: Duration,
    /// The first retry's delay after a failure (doubled per failure).
    pub first_retry: Duration,
    /// The longest delay between two retries (also the cap on a `Retry-After`).
    pub max_retry: Duration,
    /// Whether the registrations are signed with the node's DID (RFC 9421): see
    /// [`RegistrationSigning`] (default [`RegistrationSigning::Auto`]).
    pub sign: RegistrationSigning,
}

/// Whether an agent signs its registrations with its DID (RFC 9421).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RegistrationSigning {
    /// Signed when the node has a DID; when the directory answers a signed registration
    /// with 401 (it cannot resolve or verify the DID: a `localhost` DID, to a directory
    /// not in the loopback test mode), unsigned from then on, said in the log.
    #[default]
    Auto,
    /// Always signed when the node has a DID: a 401 gives up.
    Always,
    /// Never signed.
    Never,
}

impl Default for RegistrationSettings {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(300),
            first_retry: Duration::from_secs(1),
            max_retry: Duration::from_secs(60),
            sign: RegistrationSigning::Auto,
        }
    }
}

impl RegistrationSettings {
    /// Settings with this TTL and the default backoff.
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            ttl,
            ..Self::default()
        }
    }

    /// Checks the settings: a TTL of at least 2 whole seconds (the directory counts in
    /// seconds and the agent refreshes at half), a non-zero first retry, a `max_retry` not
    /// below it. `Err` names the field and the rule.
    pub fn validate(&self) -> Result<(), String> {
        if self.ttl < Duration::from_secs(2) {
            return Err(format!(
                "ttl must be at least 2 s (whole seconds, refreshed at half), not {:?}",
                self.ttl
            ));
        }
        if self.first_retry.is_zero() {
            return Err("first_retry must be greater than zero".to_owned());
        }
        if self.max_retry < self.first_retry {
            return Err(format!(
                "max_retry ({:?}) must be at least first_retry ({:?})",
                self.max_retry, self.first_retry
            ));
        }
        Ok(())
    }

    /// The TTL in whole seconds, as the directory reads it.
    pub fn ttl_secs(&self) -> u64 {
        self.ttl.as_secs()
    }
}

/// What one registration attempt came to, as the schedule needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The directory holds the entry (201 or 204).
    Registered,
    /// The directory is away or overloaded: retry later (after at least `retry_after`, when
    /// it said so).
    Away { retry_after: Option<Duration> },
    /// The directory answered 401: it wants a signature it can verify.
    Unauthorized,
    /// The directory answered 403 for an entry whose id is a DID: it keeps that entry to
    /// another writer.
    Conflict,
    /// The directory refused the entry for a reason retrying does not change.
    Refused,
}

/// Where a registration stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Not held by the directory (yet, or any more): the next attempt registers.
    Pending,
    /// Held by the directory until about the instant given (our clock).
    Registered { until: Instant },
    /// Refused: no more attempts.
    GivenUp,
    /// The directory keeps the entry's id (a DID) to another writer: no more attempts.
    Conflict,
}

/// One registration's schedule on the agent's clock.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    settings: RegistrationSettings,
    phase: Phase,
    /// When the next attempt is due (meaningless once given up).
    next: Instant,
    /// Failed attempts since the last success.
    failures: u32,
    /// Whether the next attempt is signed.
    signs: bool,
}

impl Schedule {
    /// A schedule whose first attempt is due at `now`, signed when the node `can_sign`
    /// (it has a DID) and the settings do not say never.
    pub(crate) fn new(settings: RegistrationSettings, can_sign: bool, now: Instant) -> Self {
        Self {
            settings,
            phase: Phase::Pending,
            next: now,
            failures: 0,
            signs: can_sign && settings.sign != RegistrationSigning::Never,
        }
    }

    /// When the next attempt is due; `None` once given up or in conflict.
    pub(crate) fn next_attempt(&self) -> Option<Instant> {
        (!matches!(self.phase, Phase::GivenUp | Phase::Conflict)).then_some(self.next)
    }

    /// Whether the next attempt is signed.
    pub(crate) fn signs(&self) -> bool {
        self.signs
    }

    /// Where the registration stands at `now` (an entry whose TTL ran out is pending again).
    pub(crate) fn phase(&self, now: Instant) -> Phase {
        match self.phase {
            Phase::Registered { until } if now >= until => Phase::Pending,
            phase => phase,
        }
    }

    /// Failed attempts since the last success.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// Whether a graceful shutdown should remove the entry: the directory may hold it.
    pub(crate) fn should_deregister(&self, now: Instant) -> bool {
        matches!(self.phase(now), Phase::Registered { .. })
    }

    /// Records what the attempt made at `now` came to; `jitter` is a draw in `[0, 1)` that
    /// spreads the retry delay.
    pub(crate) fn record(&mut self, now: Instant, outcome: Outcome, jitter: f64) {
        match outcome {
            Outcome::Registered => {
                self.failures = 0;
                self.phase = Phase::Registered {
                    until: now + self.settings.ttl,
                };
                self.next = now + self.settings.ttl / 2;
            }
            Outcome::Unauthorized
                if self.signs && self.settings.sign == RegistrationSigning::Auto =>
            {
                self.failures = self.failures.saturating_add(1);
                self.phase = self.phase(now);
                self.signs = false;
                self.next = now;
            }
            Outcome::Unauthorized | Outcome::Refused => {
                self.failures = self.failures.saturating_add(1);
                self.phase = Phase::GivenUp;
            }
            Outcome::Conflict => {
                self.failures = self.failures.saturating_add(1);
                self.phase = Phase::Conflict;
            }
            Outcome::Away { retry_after } => {
                self.failures = self.failures.saturating_add(1);
                self.phase = self.phase(now);
                let backoff = self.backoff(jitter);
                let wait = match retry_after {
                    Some(asked) => backoff.max(asked.min(self.settings.max_retry)),
                    None => backoff,
                };
                self.next = now + wait;
            }
        }
    }

    /// The delay before the next retry after `self.failures` failures in a row.
    fn backoff(&self, jitter: f64) -> Duration {
        let doublings = self.failures.saturating_sub(1).min(31);
        let full = self
            .settings
            .first_retry
            .saturating_mul(1u32 << doublings)
            .min(self.settings.max_retry);
        full.mul_f64(0.5 + jitter.clamp(0.0, 1.0) / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RegistrationSettings {
        RegistrationSettings {
            ttl: Duration::from_secs(60),
            first_retry: Duration::from_secs(1),
            max_retry: Duration::from_secs(30),
            sign: RegistrationSigning::Auto,
        }
    }

    const AWAY: Outcome = Outcome::Away { retry_after: None };

    #[test]
    fn registers_at_start_then_refreshes_at_half_the_ttl() {
        let start = Instant::now();
        let mut schedule = Schedule::new(settings(), true, start);
        assert_eq!(schedule.next_attempt(), Some(start));
        assert_eq!(schedule.phase(start), Phase::Pending);
        schedule.record(start, Outcome::Registered, 0.0);
        assert_eq!(
            schedule.next_attempt(),
            Some(start + Duration::from_secs(30))
        );
        assert_eq!(
            schedule.phase(start),
            Phase::Registered {
                until: start + Duration::from_secs(60)
            }
        );
        let refreshed = start + Duration::from_secs(30);
        schedule.record(refreshed, Outcome::Registered, 0.0);
        assert_eq!(
            schedule.next_attempt(),
            Some(refreshed + Duration::from_secs(30))
        );
        assert!(schedule.should_deregister(refreshed));
    }

    #[test]
    fn backs_off_exponentially_with_jitter_up_to_the_cap() {
        let start = Instant::now();
        let mut schedule = Schedule::new(settings(), true, start);
        let mut now = start;
        let mut delays = Vec::new();
        for _ in 0..8 {
            schedule.record(now, AWAY, 1.0);
            let next = schedule.next_attempt().expect("retrying");
            delays.push(next - now);
            now = next;
        }
        let secs: Vec<u64> = delays.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(schedule.failures(), 8);
        // The lowest draw waits half the delay: never less.
        let mut low = Schedule::new(settings(), true, start);
        low.record(start, AWAY, 0.0);
        low.record(start, AWAY, 0.0);
        assert_eq!(low.next_attempt(), Some(start + Duration::from_secs(1)));
        // A success starts the backoff over.
        schedule.record(now, Outcome::Registered, 0.5);
        schedule.record(now, AWAY, 1.0);
        assert_eq!(schedule.next_attempt(), Some(now + Duration::from_secs(1)));
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let start = Instant::now();
        let mut schedule = Schedule::new(settings(), true, start);
        schedule.record(
            start,
            Outcome::Away {
                retry_after: Some(Duration::from_secs(10)),
            },
            1.0,
        );
        assert_eq!(
            schedule.next_attempt(),
            Some(start + Duration::from_secs(10))
        );
        schedule.record(
            start,
            Outcome::Away {
                retry_after: Some(Duration::from_secs(365 * 24 * 3600)),
            },
            1.0,
        );
        assert_eq!(
            schedule.next_attempt(),
            Some(start + Duration::from_secs(30))
        );
    }

    #[test]
    fn an_entry_whose_ttl_ran_out_while_away_is_pending_again() {
        let start = Instant::now();
        let mut schedule = Schedule::new(settings(), true, start);
        schedule.record(start, Outcome::Registered, 0.0);
        let refresh = start + Duration::from_secs(30);
        schedule.record(refresh, AWAY, 1.0);
        assert!(matches!(schedule.phase(refresh), Phase::Registered { .. }));
        assert!(schedule.should_deregister(refresh));
        let late = start + Duration::from_secs(61);
        assert_eq!(schedule.phase(late), Phase::Pending);
        schedule.record(late, AWAY, 1.0);
        assert_eq!(schedule.phase(late), Phase::Pending);
        assert!(!schedule.should_deregister(late));
    }

    #[test]
    fn a_refusal_gives_up() {
        let start = Instant::now();
        let mut schedule = Schedule::new(settings(), true, start);
        schedule.record(start, Outcome::Refused, 0.3);
        assert_eq!(schedule.next_attempt(), None);
        assert_eq!(schedule.phase(start), Phase::GivenUp);
        assert!(!schedule.should_deregister(start));
    }

    #[test]
    fn a_signed_registration_answered_401_goes_unsigned_once_with_auto() {
        let start = Instant::now();
        let mut schedule = Schedule::new(settings(), true, start);
        assert!(schedule.signs());
        schedule.record(start, Outcome::Unauthorized, 0.3);
        assert!(!schedule.signs(), "unsigned from now on");
        assert_eq!(schedule.next_attempt(), Some(start), "at once");
        assert_eq!(schedule.phase(start), Phase::Pending);
        schedule.record(start, Outcome::Registered, 0.3);
        assert!(!schedule.signs());
        assert_eq!(schedule.failures(), 0);
        // Unsigned refused too: the directory requires what the node cannot give.
        let mut both = Schedule::new(settings(), true, start);
        both.record(start, Outcome::Unauthorized, 0.3);
        both.record(start, Outcome::Unauthorized, 0.3);
        assert_eq!(both.phase(start), Phase::GivenUp);
        assert_eq!(both.next_attempt(), None);
        // `Always` gives up on the first 401; without a DID nothing is signed.
        let always = RegistrationSettings {
            sign: RegistrationSigning::Always,
            ..settings()
        };
        let mut strict = Schedule::new(always, true, start);
        strict.record(start, Outcome::Unauthorized, 0.3);
        assert_eq!(strict.phase(start), Phase::GivenUp);
        assert!(!Schedule::new(settings(), false, start).signs());
        let never = RegistrationSettings {
            sign: RegistrationSigning::Never,
            ..settings()
        };
        assert!(!Schedule::new(never, true, start).signs());
    }

    #[test]
    fn a_403_on_a_did_named_entry_is_a_conflict() {
        let start = Instant::now();
        let mut schedule = Schedule::new(settings(), true, start);
        schedule.record(start, Outcome::Conflict, 0.3);
        assert_eq!(schedule.phase(start), Phase::Conflict);
        assert_eq!(schedule.next_attempt(), None);
        assert!(!schedule.should_deregister(start));
    }

    #[test]
    fn settings_are_checked() {
        assert!(RegistrationSettings::default().validate().is_ok());
        let short = RegistrationSettings::with_ttl(Duration::from_secs(1));
        assert!(short.validate().unwrap_err().contains("ttl"));
        let inverted = RegistrationSettings {
            first_retry: Duration::from_secs(10),
            max_retry: Duration::from_secs(5),
            ..RegistrationSettings::default()
        };
        assert!(inverted.validate().unwrap_err().contains("max_retry"));
    }
}
