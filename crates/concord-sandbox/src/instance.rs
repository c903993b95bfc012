//! One engine instance: a QuickJS runtime and a locked-down context running one module.

use std::sync::Arc;

use rquickjs::convert::List;
use rquickjs::{Array, Context, Ctx, Function as JsFunction, Persistent, Promise, Runtime, Value};

use crate::bytecode;
use crate::contract::Function;
use crate::convert::{self, InputError, OutputWalker, Walked};
use crate::engine::{self, HandlerIntrinsics};
use crate::error::SandboxError;
use crate::failure::{finish, setup_failure, stack_overflow, truncate, watched_limit};
use crate::limits::Limits;
use crate::program::Program;
use crate::source;
use crate::watch::Watch;

/// Accessors with setters that may remain on intrinsics after lockdown, because their setters
/// only ever act on the receiver (and frozen receivers refuse): `Object.prototype.__proto__`,
/// `Error.prototype.stack`, and the two ES2025 `Iterator.prototype` accessors. Any other
/// setter means the engine grew hidden shared state the glue does not know how to seal, so
/// instantiation refuses to run.
const ALLOWED_SETTERS: [&str; 4] = [
    "__proto__",
    "stack",
    "Symbol(Symbol.toStringTag)",
    "constructor",
];

/// A runtime and a locked-down context with the module's factory, ready to take calls.
pub(crate) struct Instance {
    // Field order is drop order: the JS values go before the context, the context before the
    // runtime that owns them all.
    invoke: Persistent<JsFunction<'static>>,
    describe: Persistent<JsFunction<'static>>,
    factory: Persistent<JsFunction<'static>>,
    /// Own keys of the frozen `Object.prototype` (see [`convert::to_js`]).
    object_prototype_keys: Vec<String>,
    context: Context,
    _runtime: Runtime,
}

// SAFETY: the runtime is built with rquickjs's `parallel` feature: every entry into it goes
// through `Context::with`, which takes the runtime lock and re-reads the stack top of the
// calling thread. The persistent values belong to that runtime, which this struct owns
// exclusively, and are only restored inside `Context::with` or dropped with the runtime, so
// moving the whole bundle to another thread is sound. QuickJS keeps no thread-local state.
unsafe impl Send for Instance {}

/// Where in a call an exception came from, which decides what it means.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// Building the input value: only a limit can fail here.
    Input,
    /// The module's own code (top level or contract function, or a promise it returned).
    Call,
    /// Turning the result into JSON (cycles, a throwing `toJSON` or getter).
    Output,
}

impl Instance {
    /// Builds an instance from compiled bytecode: new engine, lockdown, factory.
    pub(crate) fn new(
        program: &Program,
        limits: &Limits,
        watch: &Arc<Watch>,
    ) -> Result<Self, SandboxError> {
        let (runtime, context, setup) = engine::set_up::<HandlerIntrinsics>(limits, watch)?;
        let setup = &setup;
        let parts = context.with(|ctx| -> Result<_, SandboxError> {
            let fail = |error| setup_failure(&ctx, error, setup, watch, "sandbox setup");
            let glue: Array = bytecode::run_script(&ctx, &program.glue)
                .and_then(|value| value.get())
                .map_err(fail)?;
            let invoke: JsFunction = glue.get(0).map_err(fail)?;
            let describe: JsFunction = glue.get(1).map_err(fail)?;
            let setters: Vec<String> = glue.get(2).map_err(fail)?;
            let object_prototype_keys: Vec<String> = glue.get(3).map_err(fail)?;
            if let Some(unknown) = setters
                .iter()
                .find(|setter| !ALLOWED_SETTERS.contains(&setter.as_str()))
            {
                return Err(SandboxError::Engine {
                    message: format!(
                        "lockdown found an intrinsic setter it cannot seal: {unknown}"
                    ),
                });
            }
            let factory: JsFunction = bytecode::run_script(&ctx, &program.module)
                .and_then(|value| value.get())
                .map_err(fail)?;
            Ok((
                Persistent::save(&ctx, invoke),
                Persistent::save(&ctx, describe),
                Persistent::save(&ctx, factory),
                object_prototype_keys,
            ))
        });
        let (invoke, describe, factory, object_prototype_keys) = finish(watch, setup, parts)?;
        Ok(Self {
            invoke,
            describe,
            factory,
            object_prototype_keys,
            context,
            _runtime: runtime,
        })
    }

    /// Runs the module's top level once and reports what it defines under each contract
    /// function's name, in [`Function::ALL`] order: `None` for a function, otherwise what it
    /// is in words (`"undefined"` when it defines nothing under that name).
    pub(crate) fn defined_functions(
        &self,
        limits: &Limits,
        watch: &Watch,
    ) -> Result<[Option<&'static str>; 4], SandboxError> {
        watch.arm(limits.call_timeout);
        let defined = self.context.with(|ctx| {
            let run = || -> rquickjs::Result<[Option<&'static str>; 4]> {
                let factory = self.factory.clone().restore(&ctx)?;
                let functions: Array = factory.call(())?;
                let mut defined = [None; 4];
                for (index, slot) in defined.iter_mut().enumerate() {
                    *slot = kind(&functions.get::<Value>(index)?);
                }
                Ok(defined)
            };
            let defined =
                run().map_err(|error| self.failure(&ctx, error, limits, watch, Stage::Call))?;
            run_queued_jobs(&ctx, limits, watch)?;
            Ok(defined)
        });
        finish(watch, limits, defined)
    }

    /// Calls one contract function on `input` and returns the JSON value it produced; `None`
    /// when it has no JSON form (`undefined`).
    pub(crate) fn call(
        &self,
        function: Function,
        input: &serde_json::Value,
        limits: &Limits,
        watch: &Watch,
    ) -> Result<Option<serde_json::Value>, SandboxError> {
        watch.arm(limits.call_timeout);
        let output = self.context.with(|ctx| {
            let output = self.run(&ctx, function, input, limits, watch);
            // Whatever the outcome, nothing the call queued may run during a later call.
            if !matches!(&output, Err(error) if error.discards_engine()) {
                run_queued_jobs(&ctx, limits, watch)?;
            }
            output
        });
        finish(watch, limits, output)
    }

    fn run(
        &self,
        ctx: &Ctx<'_>,
        function: Function,
        input: &serde_json::Value,
        limits: &Limits,
        watch: &Watch,
    ) -> Result<Option<serde_json::Value>, SandboxError> {
        let input = convert::to_js(
            ctx,
            input,
            limits.input_bytes,
            watch,
            &self.object_prototype_keys,
        )
        .map_err(|error| match error {
            InputError::Over(over) => over.input_error(limits),
            InputError::DeadlinePassed => SandboxError::Timeout {
                limit: limits.call_timeout,
            },
            InputError::Engine(error) => self.failure(ctx, error, limits, watch, Stage::Input),
        })?;
        let result = self
            .invoke_function(ctx, function, input)
            .map_err(|error| self.failure(ctx, error, limits, watch, Stage::Call))?;
        let result = if result.is_promise() {
            settle(ctx, result, limits, watch)?
                .map_err(|error| self.failure(ctx, error, limits, watch, Stage::Call))?
        } else {
            result
        };
        self.output(ctx, result, limits, watch)
    }

    /// The result as a JSON value, by walking it or, when it is not plain data, through the
    /// engine's `JSON.stringify`.
    fn output<'js>(
        &self,
        ctx: &Ctx<'js>,
        result: Value<'js>,
        limits: &Limits,
        watch: &Watch,
    ) -> Result<Option<serde_json::Value>, SandboxError> {
        let failed = |error| self.failure(ctx, error, limits, watch, Stage::Output);
        let too_large = || SandboxError::OutputTooLarge {
            limit: limits.output_bytes,
        };
        match OutputWalker::new(limits.output_bytes)
            .walk(&result)
            .map_err(failed)?
        {
            Walked::Value(value) => Ok(value),
            Walked::TooLarge => Err(too_large()),
            Walked::NeedsStringify => match output_text(ctx, result).map_err(failed)? {
                None => Ok(None),
                Some(text) if text.len() > limits.output_bytes => Err(too_large()),
                Some(text) => serde_json::from_str(&text).map(Some).map_err(|error| {
                    SandboxError::InvalidOutput {
                        reason: error.to_string(),
                    }
                }),
            },
        }
    }

    fn invoke_function<'js>(
        &self,
        ctx: &Ctx<'js>,
        function: Function,
        input: Value<'js>,
    ) -> rquickjs::Result<Value<'js>> {
        let invoke = self.invoke.clone().restore(ctx)?;
        let factory = self.factory.clone().restore(ctx)?;
        invoke.call((factory, function.index(), input))
    }

    /// Turns an engine error at `stage` into the typed error. The pending exception is
    /// described by the glue's `describe`, which reads only data properties.
    fn failure(
        &self,
        ctx: &Ctx<'_>,
        error: rquickjs::Error,
        limits: &Limits,
        watch: &Watch,
        stage: Stage,
    ) -> SandboxError {
        let thrown = ctx.catch();
        if let Some(limit) = watched_limit(watch, limits) {
            return limit;
        }
        if !matches!(error, rquickjs::Error::Exception) {
            return engine::engine_error(error);
        }
        let described = self
            .describe
            .clone()
            .restore(ctx)
            .and_then(|describe| describe.call::<_, List<(bool, String, String)>>((thrown,)));
        let (is_stack_overflow, text, stack) = match described {
            Ok(List(parts)) => parts,
            // `describe` runs module code only inside its own try/catch, so if it throws, the
            // engine ran out of something while describing.
            Err(error) => {
                let message = crate::failure::engine_message(&ctx.catch());
                return watched_limit(watch, limits)
                    .or_else(|| stack_overflow(&message, limits))
                    .unwrap_or_else(|| SandboxError::Thrown {
                        message: format!("a value that could not be described ({error})"),
                    });
            }
        };
        if is_stack_overflow {
            return SandboxError::StackOverflow {
                limit: limits.stack_bytes,
            };
        }
        let text = truncate(text);
        match stage {
            Stage::Input => SandboxError::Engine {
                message: format!("the engine could not build the input: {text}"),
            },
            Stage::Call => SandboxError::Thrown {
                message: text + &source::module_frames(&stack),
            },
            Stage::Output => SandboxError::InvalidOutput { reason: text },
        }
    }
}

/// Runs the job queue until `promise` settles; `Ok(Err(_))` carries a rejection as a pending
/// exception so it is classified like a throw.
fn settle<'js>(
    ctx: &Ctx<'js>,
    promise: Value<'js>,
    limits: &Limits,
    watch: &Watch,
) -> Result<rquickjs::Result<Value<'js>>, SandboxError> {
    let promise = Promise::from_value(promise).map_err(engine::engine_error)?;
    loop {
        if let Some(result) = promise.result::<Value>() {
            return Ok(result);
        }
        if !ctx.execute_pending_job() {
            return Err(SandboxError::PromiseNeverSettles);
        }
        if let Some(limit) = watched_limit(watch, limits) {
            return Err(limit);
        }
    }
}

/// Runs every job the call queued, so nothing it scheduled can run during a later call.
fn run_queued_jobs(ctx: &Ctx<'_>, limits: &Limits, watch: &Watch) -> Result<(), SandboxError> {
    while ctx.execute_pending_job() {
        if let Some(limit) = watched_limit(watch, limits) {
            return Err(limit);
        }
    }
    Ok(())
}

/// `JSON.stringify(result)` as Rust text; `None` when the result has no JSON form.
fn output_text<'js>(ctx: &Ctx<'js>, result: Value<'js>) -> rquickjs::Result<Option<String>> {
    ctx.json_stringify(result)?
        .map(|text| text.to_string())
        .transpose()
}

/// `None` for a function, otherwise what `value` is, in words.
fn kind(value: &Value<'_>) -> Option<&'static str> {
    Some(if value.is_function() {
        return None;
    } else if value.is_undefined() {
        "undefined"
    } else if value.is_null() {
        "null"
    } else if value.is_bool() {
        "a boolean"
    } else if value.is_number() {
        "a number"
    } else if value.is_string() {
        "a string"
    } else if value.is_symbol() {
        "a symbol"
    } else if value.is_array() {
        "an array"
    } else {
        "an object"
    })
}
