//! What can go wrong when loading or calling a handler.

use std::time::Duration;

use crate::contract::{Function, Role};

/// Why a module could not be loaded or a call did not produce a value.
///
/// The limit variants (`Timeout`, `MemoryLimit`, `StackOverflow`, `InputTooLarge`,
/// `OutputTooLarge`, `SourceTooLarge`) name the limit that stopped the module; see
/// [`SandboxError::is_limit`]. After any error the same [`Handler`](crate::Handler) can be
/// called again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The module source is not a valid strict-mode script or ES module, or uses an export
    /// form the sandbox does not take (`export default`). `line` and `column` are 1-based and
    /// point into the module source as given.
    #[error("module does not compile: {message} at line {line}, column {column}")]
    Compile {
        /// 1-based line in the module source.
        line: u32,
        /// 1-based column in the module source.
        column: u32,
        /// The engine's description, e.g. `unexpected token in expression: ')'`.
        message: String,
    },
    /// The module does not define a function its role requires (as a top-level function of a
    /// script, or as an export of an ES module).
    #[error("module for the {role} role does not define function `{function}`")]
    MissingExport {
        /// The role the module was loaded for.
        role: Role,
        /// The function it lacks.
        function: Function,
    },
    /// An ES module exports a contract function's name, but not as a function.
    #[error("module exports `{function}` as {found}, not as a function")]
    ExportNotFunction {
        /// The contract function's name it exports.
        function: Function,
        /// What it exports under that name, e.g. `a number`.
        found: &'static str,
    },
    /// The module imports: a static `import`, `export … from`, `import()` or `import.meta`.
    /// Handlers have no I/O and no other module to load; everything must be in the one module.
    #[error(
        "module imports (`import` or `export … from` at line {line}, column {column}): a \
         handler module cannot import anything (no I/O, no other modules)"
    )]
    Import {
        /// 1-based line in the module source.
        line: u32,
        /// 1-based column in the module source.
        column: u32,
    },
    /// A function of the other role was called.
    #[error("`{function}` belongs to the {} role, but this handler was loaded as {role}", function.role())]
    WrongRole {
        /// The function that was called.
        function: Function,
        /// The role the handler was loaded for.
        role: Role,
    },
    /// The call ran past its deadline and was interrupted.
    #[error("handler exceeded its time limit of {limit:?}")]
    Timeout {
        /// The configured [`Limits::call_timeout`](crate::Limits::call_timeout).
        limit: Duration,
    },
    /// The engine refused an allocation past the memory cap.
    #[error("handler exceeded its memory limit of {limit} bytes")]
    MemoryLimit {
        /// The configured [`Limits::memory_bytes`](crate::Limits::memory_bytes).
        limit: usize,
    },
    /// The call nested deeper than the stack cap allows (recursion, or nesting in JSON).
    #[error("handler exceeded its stack limit of {limit} bytes")]
    StackOverflow {
        /// The configured [`Limits::stack_bytes`](crate::Limits::stack_bytes).
        limit: usize,
    },
    /// The input's compact JSON text is larger than the input cap. It is counted while the input
    /// is built in the engine, which stops as soon as the cap is passed; the module never runs.
    #[error("input is larger than the limit of {limit} bytes")]
    InputTooLarge {
        /// The configured [`Limits::input_bytes`](crate::Limits::input_bytes).
        limit: usize,
    },
    /// The input nests arrays and objects deeper than the sandbox accepts (127 levels, as
    /// `serde_json`'s parser).
    #[error("input nests deeper than {limit} levels")]
    InputTooDeep {
        /// The nesting limit.
        limit: usize,
    },
    /// The JSON text of the handler's result is larger than the output cap. Measured while the
    /// result is taken out of the engine, which stops as soon as the cap is passed.
    #[error("handler output is larger than the limit of {limit} bytes of JSON")]
    OutputTooLarge {
        /// The configured [`Limits::output_bytes`](crate::Limits::output_bytes).
        limit: usize,
    },
    /// The module source is larger than the source cap; it was not compiled.
    #[error("module source is {size} bytes, over the limit of {limit} bytes")]
    SourceTooLarge {
        /// Size of the source in bytes.
        size: usize,
        /// The configured [`Limits::source_bytes`](crate::Limits::source_bytes).
        limit: usize,
    },
    /// The module threw (any value: an `Error`, a string, `42`, `null`, an object) or returned
    /// a promise that was rejected. `message` has the error's name and message, or a
    /// description of the thrown value, followed by the module's stack frames
    /// (`at encodeRequest (handler.js:LINE:COLUMN)`).
    #[error("handler threw: {message}")]
    Thrown {
        /// Description of the thrown value, at most a few kilobytes.
        message: String,
    },
    /// The result cannot be turned into JSON: `undefined`, a function, a cycle, a `BigInt`,
    /// a lone surrogate, nesting deeper than 127 levels, or a `toJSON` or getter that threw.
    #[error("handler result is not a JSON value: {reason}")]
    InvalidOutput {
        /// What was wrong with it.
        reason: String,
    },
    /// The function returned a promise that can never settle: nothing is left in the job
    /// queue that could resolve or reject it.
    #[error("handler returned a promise that never settles")]
    PromiseNeverSettles,
    /// A [`Limits`](crate::Limits) value the sandbox cannot run with.
    #[error("invalid limit `{limit}`: {reason}")]
    InvalidLimit {
        /// The field of [`Limits`](crate::Limits).
        limit: &'static str,
        /// Why it is unusable.
        reason: String,
    },
    /// The engine itself failed (e.g. it could not allocate its runtime). Not caused by the
    /// module's code.
    #[error("JavaScript engine failure: {message}")]
    Engine {
        /// The engine's error.
        message: String,
    },
}

impl SandboxError {
    /// Whether the error is one of the hard limits stopping the module, rather than the
    /// module failing on its own terms.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            SandboxError::Timeout { .. }
                | SandboxError::MemoryLimit { .. }
                | SandboxError::StackOverflow { .. }
                | SandboxError::InputTooLarge { .. }
                | SandboxError::InputTooDeep { .. }
                | SandboxError::OutputTooLarge { .. }
                | SandboxError::SourceTooLarge { .. }
        )
    }

    /// Errors after which the engine instance is not trusted for another call: it was
    /// interrupted or refused an allocation mid-operation and may hold half-done work, so the
    /// handler rebuilds it from the compiled bytecode.
    pub(crate) fn discards_engine(&self) -> bool {
        matches!(
            self,
            SandboxError::Timeout { .. }
                | SandboxError::MemoryLimit { .. }
                | SandboxError::StackOverflow { .. }
                | SandboxError::Engine { .. }
        )
    }
}
