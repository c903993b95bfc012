//! Turning what stopped the engine into a typed [`SandboxError`].
//!
//! Time and memory are decided by the [`Watch`] (the interrupt handler and the allocator record
//! them), so a module cannot hide or fake them. A stack overflow is recognised by the engine's
//! own `RangeError`; a module could throw an identical one itself, which only mislabels its own
//! failure.

use rquickjs::{Ctx, Value};

use crate::error::SandboxError;
use crate::limits::Limits;
use crate::watch::Watch;

/// The engine's message for exceeding the stack cap.
const STACK_OVERFLOW_MESSAGE: &str = "Maximum call stack size exceeded";

/// Maximum length of a thrown value's description.
const MAX_MESSAGE_CHARS: usize = 4096;

/// The limit the watch saw since it was armed, if any.
pub(crate) fn watched_limit(watch: &Watch, limits: &Limits) -> Option<SandboxError> {
    if watch.expired() {
        return Some(SandboxError::Timeout {
            limit: limits.call_timeout,
        });
    }
    if watch.memory_refused() {
        return Some(SandboxError::MemoryLimit {
            limit: limits.memory_bytes,
        });
    }
    None
}

/// `StackOverflow` if `message` is the engine's stack-overflow message.
pub(crate) fn stack_overflow(message: &str, limits: &Limits) -> Option<SandboxError> {
    (message == STACK_OVERFLOW_MESSAGE).then_some(SandboxError::StackOverflow {
        limit: limits.stack_bytes,
    })
}

/// Disarms the watch; a limit it saw wins over the outcome (e.g. a job interrupted after the
/// result was computed, or an allocation failure the module caught and survived).
pub(crate) fn finish<T>(
    watch: &Watch,
    limits: &Limits,
    outcome: Result<T, SandboxError>,
) -> Result<T, SandboxError> {
    watch.disarm();
    match watched_limit(watch, limits) {
        Some(limit) => Err(limit),
        None => outcome,
    }
}

/// An error while compiling or setting up, where no module code runs: a limit or an engine
/// failure. Takes the pending exception.
pub(crate) fn setup_failure(
    ctx: &Ctx<'_>,
    error: rquickjs::Error,
    limits: &Limits,
    watch: &Watch,
    what: &str,
) -> SandboxError {
    let thrown = ctx.catch();
    if let Some(limit) = watched_limit(watch, limits) {
        return limit;
    }
    if !matches!(error, rquickjs::Error::Exception) {
        return crate::engine::engine_error(error);
    }
    let message = engine_message(&thrown);
    stack_overflow(&message, limits).unwrap_or_else(|| SandboxError::Engine {
        message: format!("{what} failed: {message}"),
    })
}

/// The `message` of an error the engine created (only for contexts where no module code runs,
/// since reading it may call a getter).
pub(crate) fn engine_message(thrown: &Value<'_>) -> String {
    thrown
        .as_object()
        .and_then(|object| object.get::<_, String>("message").ok())
        .unwrap_or_else(|| "unknown error".to_owned())
}

/// Cuts a description to [`MAX_MESSAGE_CHARS`] characters.
pub(crate) fn truncate(mut text: String) -> String {
    if let Some((cut, _)) = text.char_indices().nth(MAX_MESSAGE_CHARS) {
        text.truncate(cut);
        text.push('…');
    }
    text
}
