//! Loading a module once and calling its contract functions many times.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::contract::{Function, Role};
use crate::error::SandboxError;
use crate::instance::Instance;
use crate::limits::Limits;
use crate::program::Program;
use crate::watch::Watch;

/// Entry point: compiles handler modules into [`Handler`]s.
///
/// A module is a strict-mode **script** that declares the contract functions of its role as
/// top-level functions, or an **ES module** that exports them by name (no `import` in either
/// form); see the crate documentation for the full format.
///
/// ```
/// use concord_sandbox::{Function, Limits, Role, Sandbox};
/// use serde_json::json;
///
/// let source = r#"
///     function encodeRequest(input) {
///       return { type: "REQUEST", action: "getProductInfo", ...input };
///     }
///     function decodeResponse(message) {
///       return message.productInfo;
///     }
/// "#;
/// let mut handler = Sandbox::load(source, Role::Requester, Limits::default())?;
/// let message = handler.call(Function::EncodeRequest, &json!({"productId": "P12345"}))?;
/// assert_eq!(message["action"], "getProductInfo");
/// # Ok::<(), concord_sandbox::SandboxError>(())
/// ```
#[derive(Debug)]
pub enum Sandbox {}

impl Sandbox {
    /// Compiles `source` once and checks it defines both functions of `role`.
    ///
    /// This is the only time the source is parsed: every call, and every rebuild after a limit
    /// was hit, starts from the compiled bytecode. The module's top level runs once here (under
    /// the call deadline) to see which functions it defines.
    ///
    /// # Errors
    /// [`SandboxError::InvalidLimit`], [`SandboxError::SourceTooLarge`],
    /// [`SandboxError::Compile`] (with the position in `source`), [`SandboxError::Import`],
    /// [`SandboxError::MissingExport`], [`SandboxError::ExportNotFunction`], or the error its
    /// top level raised (a limit or [`SandboxError::Thrown`]).
    pub fn load(source: &str, role: Role, limits: Limits) -> Result<Handler, SandboxError> {
        limits.validate()?;
        if source.len() > limits.source_bytes {
            return Err(SandboxError::SourceTooLarge {
                size: source.len(),
                limit: limits.source_bytes,
            });
        }
        let watch = Watch::new();
        let program = Arc::new(Program::compile(source, &limits, &watch)?);
        let instance = Instance::new(&program, &limits, &watch)?;
        let defined = instance.defined_functions(&limits, &watch)?;
        for function in role.functions() {
            let index = function.index() as usize;
            let Some(found) = defined[index] else {
                continue;
            };
            let exported = program.exports.is_some_and(|exports| exports[index]);
            return Err(if exported {
                SandboxError::ExportNotFunction { function, found }
            } else {
                SandboxError::MissingExport { role, function }
            });
        }
        Ok(Handler {
            program,
            role,
            limits,
            watch,
            instance: Some(instance),
        })
    }
}

/// A loaded handler module: call its contract functions as often as needed.
///
/// Each call runs on a fresh instance of the module's top-level scope inside one long-lived,
/// locked-down engine, so no state survives from one call to the next. When a call hits the
/// time, memory or stack limit the engine instance is discarded and rebuilt from the compiled
/// bytecode at the start of the next call.
///
/// A `Handler` is `Send` (move it to the thread that will use it) but not `Sync`: calls take
/// `&mut self`. For several threads, give each its own copy with [`Handler::try_clone`].
pub struct Handler {
    program: Arc<Program>,
    role: Role,
    limits: Limits,
    watch: Arc<Watch>,
    /// `None` after a limit was hit, until the next call rebuilds it.
    instance: Option<Instance>,
}

impl Handler {
    /// Calls `function` with `input` and returns the JSON value it produced.
    ///
    /// The function sees `input` exactly as `JSON.parse` would have built it from the input's
    /// JSON text; its result is taken back with `JSON.stringify` semantics (`toJSON` is
    /// honoured, `undefined` properties are dropped, non-finite numbers become `null`). A
    /// returned promise is settled by running the job queue under the same deadline.
    ///
    /// # Errors
    /// [`SandboxError::WrongRole`], [`SandboxError::InputTooLarge`],
    /// [`SandboxError::InputTooDeep`], a limit
    /// ([`SandboxError::Timeout`], [`SandboxError::MemoryLimit`],
    /// [`SandboxError::StackOverflow`], [`SandboxError::OutputTooLarge`]),
    /// [`SandboxError::Thrown`], [`SandboxError::InvalidOutput`],
    /// [`SandboxError::PromiseNeverSettles`]. None of them stops the next call from working.
    pub fn call(&mut self, function: Function, input: &Value) -> Result<Value, SandboxError> {
        if function.role() != self.role {
            return Err(SandboxError::WrongRole {
                function,
                role: self.role,
            });
        }
        let instance = match self.instance.take() {
            Some(instance) => instance,
            None => Instance::new(&self.program, &self.limits, &self.watch)?,
        };
        let output = instance.call(function, input, &self.limits, &self.watch);
        if !matches!(&output, Err(error) if error.discards_engine()) {
            self.instance = Some(instance);
        }
        output?.ok_or_else(|| SandboxError::InvalidOutput {
            reason: format!("{function} returned undefined (or a function or a symbol)"),
        })
    }

    /// The role the module was loaded for.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A second handler for the same module, built from the compiled bytecode (no parsing),
    /// with its own engine: for another thread.
    ///
    /// # Errors
    /// [`SandboxError::MemoryLimit`] or [`SandboxError::Engine`] if the engine cannot start.
    pub fn try_clone(&self) -> Result<Handler, SandboxError> {
        let watch = Watch::new();
        let instance = Instance::new(&self.program, &self.limits, &watch)?;
        Ok(Handler {
            program: Arc::clone(&self.program),
            role: self.role,
            limits: self.limits.clone(),
            watch,
            instance: Some(instance),
        })
    }
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handler")
            .field("role", &self.role)
            .field("limits", &self.limits)
            .field("engine_ready", &self.instance.is_some())
            .finish_non_exhaustive()
    }
}
