//! Compiling a module once into the bytecode every engine instance is built from.

use std::sync::Arc;

use rquickjs::Ctx;

use crate::bytecode::{self, Bytecode};
use crate::engine::{self, CompilerIntrinsics};
use crate::error::SandboxError;
use crate::failure::{engine_message, setup_failure, stack_overflow, watched_limit};
use crate::limits::Limits;
use crate::module::{self, Form};
use crate::source;
use crate::watch::Watch;

/// The trusted glue that locks the realm down (see `glue.js`).
const GLUE_SOURCE: &str = include_str!("glue.js");
const GLUE_FILE: &str = "<sandbox>";

/// A module compiled once, with the sandbox's glue.
pub(crate) struct Program {
    pub(crate) glue: Bytecode,
    pub(crate) module: Bytecode,
    /// For an ES module, which contract functions it exports (in [`Function::ALL`] order);
    /// `None` for a script.
    ///
    /// [`Function::ALL`]: crate::Function::ALL
    pub(crate) exports: Option<[bool; 4]>,
}

impl Program {
    /// Checks and compiles `module_source` in a throwaway engine with the handler's limits.
    pub(crate) fn compile(
        module_source: &str,
        limits: &Limits,
        watch: &Arc<Watch>,
    ) -> Result<Self, SandboxError> {
        source::check_characters(module_source)?;
        let form = module::read(module_source)?;
        let (_runtime, context, limits) = engine::set_up::<CompilerIntrinsics>(limits, watch)?;
        let limits = &limits;
        let compiled = context.with(|ctx| {
            let module = |text: &str| {
                bytecode::compile_script(&ctx, text, source::MODULE_FILE)
                    .map_err(|error| compile_error(&ctx, error, limits, watch))
            };
            let (module, exports) = match &form {
                Form::Script => {
                    module(&source::check_text(module_source))?;
                    (module(&source::factory_text(module_source, None))?, None)
                }
                Form::Module { script, exports } => {
                    // The module's own syntax first, so errors read as they would for the
                    // text as written; then the rewritten script, like any script.
                    bytecode::check_module(
                        &ctx,
                        &source::check_text(module_source),
                        source::MODULE_FILE,
                    )
                    .map_err(|error| compile_error(&ctx, error, limits, watch))?;
                    module(&source::check_text(script))?;
                    let compiled = module(&source::factory_text(script, Some(exports)))?;
                    (compiled, Some(exports.each_ref().map(Option::is_some)))
                }
            };
            let glue = bytecode::compile_script(&ctx, GLUE_SOURCE, GLUE_FILE).map_err(|error| {
                setup_failure(&ctx, error, limits, watch, "compiling the sandbox glue")
            })?;
            Ok(Program {
                glue,
                module,
                exports,
            })
        });
        crate::failure::finish(watch, limits, compiled)
    }
}

/// A compile failure: a syntax error with its position mapped back to the source, or a limit
/// (deeply nested source exhausts the stack).
fn compile_error(
    ctx: &Ctx<'_>,
    error: rquickjs::Error,
    limits: &Limits,
    watch: &Watch,
) -> SandboxError {
    let thrown = ctx.catch();
    if let Some(limit) = watched_limit(watch, limits) {
        return limit;
    }
    if !matches!(error, rquickjs::Error::Exception) {
        return engine::engine_error(error);
    }
    let message = engine_message(&thrown);
    if let Some(limit) = stack_overflow(&message, limits) {
        return limit;
    }
    let stack = thrown
        .as_object()
        .and_then(|object| object.get::<_, String>("stack").ok())
        .unwrap_or_default();
    let (line, column) = first_position(&stack).unwrap_or((1, 1));
    let (line, column) = source::source_position(line, column);
    SandboxError::Compile {
        line,
        column,
        message,
    }
}

/// `(line, column)` of the first `handler.js:line:column` in an engine stack trace.
fn first_position(stack: &str) -> Option<(u32, u32)> {
    let start = stack.find(source::MODULE_FILE)? + source::MODULE_FILE.len();
    let rest = stack[start..].strip_prefix(':')?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit() && c != ':')
        .unwrap_or(rest.len());
    let (line, column) = rest[..end].split_once(':')?;
    Some((line.parse().ok()?, column.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_position_reads_the_first_module_frame() {
        assert_eq!(first_position("    at handler.js:3:14\n"), Some((3, 14)));
        assert_eq!(
            first_position("    at f (handler.js:12:1)\n    at handler.js:1:1"),
            Some((12, 1))
        );
        assert_eq!(first_position("    at <sandbox>:3:4"), None);
    }
}
