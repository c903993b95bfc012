//! The hard limits a handler runs under.

use std::time::Duration;

use crate::error::SandboxError;

/// Hard limits for one [`Handler`](crate::Handler). Every field is enforced by the engine or by
/// the call path, never by trusting the module.
///
/// The defaults suit protocol handlers that map one message of up to a few hundred kilobytes:
///
/// | limit | default | enforced by |
/// |---|---|---|
/// | `memory_bytes` | 32 MiB | the engine's allocator, for the handler's whole runtime (intrinsics included, about 0.3 MiB) |
/// | `stack_bytes` | 512 KiB | QuickJS native stack check (JS recursion, JSON nesting, parser nesting) |
/// | `call_timeout` | 100 ms | interrupt handler polled by the interpreter and the regexp engine, and checks while the input is built |
/// | `input_bytes` | 1 MiB | size of the input's compact JSON text, counted while it is built |
/// | `output_bytes` | 1 MiB | size of the output's compact JSON text, counted while it is taken out |
/// | `source_bytes` | 1 MiB | size of the module source, checked before compiling |
///
/// The calling thread must have at least `stack_bytes` plus about 256 KiB of stack free
/// (Rust's spawned threads get 2 MiB, the main thread 8 MiB).
///
/// ```
/// use std::time::Duration;
/// use concord_sandbox::Limits;
///
/// let mut limits = Limits::default();
/// limits.call_timeout = Duration::from_millis(20);
/// limits.memory_bytes = 8 << 20;
/// assert!(limits.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Cap on all memory the handler's engine allocates (bytes).
    pub memory_bytes: usize,
    /// Cap on the native stack one call may use (bytes).
    pub stack_bytes: usize,
    /// Wall-clock deadline for one call, including settling a returned promise and running
    /// every job the call queued.
    pub call_timeout: Duration,
    /// Cap on the input value's JSON text (bytes).
    pub input_bytes: usize,
    /// Cap on the output value's JSON text (bytes).
    pub output_bytes: usize,
    /// Cap on the module source text (bytes).
    pub source_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 32 << 20,
            stack_bytes: 512 << 10,
            call_timeout: Duration::from_millis(100),
            input_bytes: 1 << 20,
            output_bytes: 1 << 20,
            source_bytes: 1 << 20,
        }
    }
}

/// Smallest memory cap an engine with the allowed intrinsics can start in.
const MIN_MEMORY_BYTES: usize = 1 << 20;
/// Smallest stack cap that still runs ordinary handler code.
const MIN_STACK_BYTES: usize = 64 << 10;
/// Largest stack cap: QuickJS measures the real thread stack, so a cap beyond what threads
/// normally have would turn a clean `StackOverflow` into a crash.
const MAX_STACK_BYTES: usize = 4 << 20;

impl Limits {
    /// Checks that every limit is usable: none is zero (QuickJS reads 0 as "unlimited"), the
    /// memory cap fits the engine, the stack cap fits a normal thread.
    pub fn validate(&self) -> Result<(), SandboxError> {
        let invalid =
            |limit: &'static str, reason: String| Err(SandboxError::InvalidLimit { limit, reason });
        if self.memory_bytes < MIN_MEMORY_BYTES {
            return invalid(
                "memory_bytes",
                format!(
                    "{} is below the minimum of {MIN_MEMORY_BYTES}",
                    self.memory_bytes
                ),
            );
        }
        if !(MIN_STACK_BYTES..=MAX_STACK_BYTES).contains(&self.stack_bytes) {
            return invalid(
                "stack_bytes",
                format!(
                    "{} is outside {MIN_STACK_BYTES}..={MAX_STACK_BYTES}",
                    self.stack_bytes
                ),
            );
        }
        if self.call_timeout.is_zero() {
            return invalid("call_timeout", "must be greater than zero".to_owned());
        }
        for (limit, value) in [
            ("input_bytes", self.input_bytes),
            ("output_bytes", self.output_bytes),
            ("source_bytes", self.source_bytes),
        ] {
            if value == 0 {
                return invalid(limit, "must be greater than zero".to_owned());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(Limits::default().validate(), Ok(()));
    }

    #[test]
    fn unusable_limits_are_named() {
        let cases = [
            (
                "stack_bytes",
                Limits {
                    stack_bytes: 0,
                    ..Limits::default()
                },
            ),
            (
                "stack_bytes",
                Limits {
                    stack_bytes: 64 << 20,
                    ..Limits::default()
                },
            ),
            (
                "call_timeout",
                Limits {
                    call_timeout: Duration::ZERO,
                    ..Limits::default()
                },
            ),
            (
                "memory_bytes",
                Limits {
                    memory_bytes: 4096,
                    ..Limits::default()
                },
            ),
            (
                "output_bytes",
                Limits {
                    output_bytes: 0,
                    ..Limits::default()
                },
            ),
            (
                "input_bytes",
                Limits {
                    input_bytes: 0,
                    ..Limits::default()
                },
            ),
            (
                "source_bytes",
                Limits {
                    source_bytes: 0,
                    ..Limits::default()
                },
            ),
        ];
        for (name, limits) in cases {
            assert!(
                matches!(limits.validate(), Err(SandboxError::InvalidLimit { limit, .. }) if limit == name),
                "{name}: {:?}",
                limits.validate()
            );
        }
    }
}
