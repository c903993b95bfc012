//! Creating QuickJS runtimes and contexts with the sandbox's limits and intrinsics.

use std::sync::Arc;
use std::time::Duration;

use rquickjs::context::{intrinsic, Intrinsic};
use rquickjs::{Context, Runtime};

use crate::error::SandboxError;
use crate::limits::Limits;
use crate::memory::CappedAllocator;
use crate::watch::Watch;

/// Intrinsics of the handler context. Left out: `Eval` (no compiling at run time), `Proxy`
/// (traps would run module code inside the sandbox's own inspection of values),
/// `WeakRef`/`FinalizationRegistry` (depend on the garbage collector), `Performance` (a clock),
/// `DOMException`. The glue further removes `SharedArrayBuffer`, `Atomics` and `BigInt`.
pub(crate) type HandlerIntrinsics = (
    intrinsic::Date,
    intrinsic::RegExpCompiler,
    intrinsic::RegExp,
    intrinsic::Json,
    intrinsic::MapSet,
    intrinsic::TypedArrays,
    intrinsic::Promise,
);

/// Intrinsics of the throwaway context that compiles source: the parser needs `Eval` and, for
/// regexp literals, the regexp compiler.
pub(crate) type CompilerIntrinsics = (intrinsic::Eval, intrinsic::RegExpCompiler);

/// Deadline for compiling and for setting up an engine instance. That work is the sandbox's own
/// (or, for compiling, bounded by the source size cap), so it is not held to the per-call
/// deadline, only guarded against never finishing.
const SETUP_TIMEOUT: Duration = Duration::from_secs(2);

/// `limits` with the deadline used while compiling and setting up.
fn setup_limits(limits: &Limits) -> Limits {
    Limits {
        call_timeout: limits.call_timeout.max(SETUP_TIMEOUT),
        ..limits.clone()
    }
}

/// A runtime whose allocations are capped at `limits.memory_bytes`, whose native stack is
/// capped at `limits.stack_bytes`, and whose interrupt handler enforces `watch`'s deadline.
fn runtime(limits: &Limits, watch: &Arc<Watch>) -> Result<Runtime, SandboxError> {
    let allocator = CappedAllocator::new(limits.memory_bytes, Arc::clone(watch));
    let runtime = Runtime::new_with_alloc(allocator).map_err(engine_error)?;
    runtime.set_max_stack_size(limits.stack_bytes);
    let watch = Arc::clone(watch);
    runtime.set_interrupt_handler(Some(Box::new(move || watch.should_interrupt())));
    Ok(runtime)
}

/// A new runtime with one context of the intrinsics `I` ([`HandlerIntrinsics`] for running
/// module code, [`CompilerIntrinsics`] for compiling source), and `watch` armed with the
/// setup deadline; also returns the limits setting up runs under.
pub(crate) fn set_up<I: Intrinsic>(
    limits: &Limits,
    watch: &Arc<Watch>,
) -> Result<(Runtime, Context, Limits), SandboxError> {
    let setup = setup_limits(limits);
    let runtime = runtime(&setup, watch)?;
    let context = Context::custom::<I>(&runtime).map_err(engine_error)?;
    watch.arm(setup.call_timeout);
    Ok((runtime, context, setup))
}

/// An rquickjs error that is not a JavaScript exception.
pub(crate) fn engine_error(error: rquickjs::Error) -> SandboxError {
    SandboxError::Engine {
        message: error.to_string(),
    }
}
