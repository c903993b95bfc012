//! Runs untrusted protocol handler modules (written by an LLM or received from a peer) in an
//! embedded QuickJS engine with hard limits and no I/O.
//!
//! A handler module turns one side's data into protocol messages and back. It is loaded once
//! per protocol and role with [`Sandbox::load`] and then called once per message with
//! [`Handler::call`], with no per-call start-up.
//!
//! # Module format
//!
//! A module is either a **strict-mode script** that declares the two functions of its
//! [`Role`] at top level, or an **ES module** that exports them by name (`export function
//! encodeRequest(…)`, `export const encodeRequest = …`, `export { encode as encodeRequest }`).
//! Each takes one JSON value and returns one JSON value (or a promise of one):
//!
//! | role | functions |
//! |---|---|
//! | requester | `encodeRequest(input) → message`, `decodeResponse(message) → output` |
//! | provider | `decodeRequest(message) → actionInput`, `encodeResponse(resultOrError) → message` |
//!
//! ```js
//! // product-info requester
//! function encodeRequest(input) {
//!   const message = { messageId: input.messageId, type: "REQUEST", action: "getProductInfo",
//!                     productId: input.productId };
//!   if (input.productName !== undefined) message.productName = input.productName;
//!   return message;
//! }
//! function decodeResponse(message) {
//!   return { code: message.status.code, product: message.productInfo };
//! }
//! ```
//!
//! The same code in the other form:
//!
//! ```js
//! export function encodeRequest(input) { /* … */ }
//! export function decodeResponse(message) { /* … */ }
//! ```
//!
//! Rules, all enforced:
//! - Top level: declarations (`function`, `const`, `let`, `class`) and plain statements. The
//!   whole top level runs again before **every** call, so state kept there does not survive
//!   between calls; keep it to declarations and small constant tables. `this` at top level is
//!   `undefined`. Top-level `return` and `await` are syntax errors.
//! - ES modules: the contract functions are the module's exports under those names (a
//!   function declared but not exported is [`SandboxError::MissingExport`], an export that is
//!   not a function [`SandboxError::ExportNotFunction`]); other exports are ignored.
//!   `export default` and exported destructuring patterns are refused
//!   ([`SandboxError::Compile`] saying what to write instead). The module is rewritten as a
//!   script with the same lines and columns (its `export` syntax blanked) and from then on
//!   handled exactly as a script: same checks, limits, bytecode and isolation.
//! - No `import` in either form: a static `import`, `export … from`, `import()` and
//!   `import.meta` are refused at load with [`SandboxError::Import`] naming the position.
//!   (`import()` that the load-time scan missed would still reject: there is no module
//!   loader.)
//! - Available: the ECMAScript language and its data intrinsics: `Object`, `Array`, `JSON`,
//!   `Math` (without `random`), `String`, `Number`, `Boolean`, `Symbol`, `RegExp`, `Map`,
//!   `Set`, `WeakMap`, `WeakSet`, `Promise`, `queueMicrotask`, `ArrayBuffer`, `DataView`, typed
//!   arrays, `Iterator`, `Reflect`, `Date` with arguments, the errors, `DisposableStack`, the
//!   URI functions, and a `console` whose methods discard their arguments.
//! - Not available: any I/O or host object (`require`, `process`, `fetch`, `XMLHttpRequest`,
//!   `std`, `os`, timers such as `setTimeout`), run-time code compilation (`eval`, the
//!   `Function`/`AsyncFunction`/`GeneratorFunction` constructors throw), `SharedArrayBuffer`,
//!   `Atomics`, `WeakRef`, `FinalizationRegistry`, `Proxy`, `performance`, and `BigInt` (its
//!   arithmetic runs in native code no deadline can interrupt; `BigInt` literals, even inside
//!   strings, are refused at load).
//! - Deterministic: `Math.random()`, `Date.now()`, `Date()` and `new Date()` without
//!   arguments throw a `TypeError` saying to take ids and timestamps from the input. Local-time
//!   `Date` methods follow the host's time zone; use the UTC ones.
//! - Frozen: every intrinsic and the global object are deeply frozen before module code runs
//!   (assignments to them throw in strict mode), so one call cannot leave anything behind for
//!   the next: no prototype pollution, no globals, no hooks (`Error.prepareStackTrace` is a
//!   constant). As with any frozen realm, assigning a property whose name exists on
//!   `Object.prototype` (`obj.toString = …`, `obj.constructor = …`) to a plain object throws;
//!   define such members in the object literal instead.
//! - Values: the input arrives as `JSON.parse` would build it from the input's JSON text (a
//!   `"__proto__"` key is an ordinary property); the output is taken with `JSON.stringify`
//!   semantics (`toJSON` is honoured, `undefined` properties are dropped, non-finite numbers
//!   become `null`). Integers beyond ±2^53 lose precision, as in any JavaScript. Values nested
//!   deeper than 127 levels (what `serde_json` parses) are refused in both directions.
//!
//! # Limits
//!
//! See [`Limits`]: memory cap, stack cap, per-call deadline (enforced by the engine's interrupt
//! handler, so it stops infinite loops and catastrophic regexps), input, output and source size
//! caps. Each violation is a typed [`SandboxError`] naming the limit, and the handler keeps
//! working: after a time, memory or stack violation its engine is rebuilt from the compiled
//! bytecode on the next call. A single built-in call (`replaceAll` on a 10 MB string, say) runs
//! to completion before the deadline is checked again; the memory cap bounds how long that can
//! be (about a second at the default 32 MiB).
//!
//! ```
//! use concord_sandbox::{Function, Limits, Role, Sandbox, SandboxError};
//! use serde_json::json;
//!
//! let source = "function decodeRequest(m) { if (m.spin) for (;;) {} return m.id; }
//!               function encodeResponse(r) { return { result: r }; }";
//! let mut handler = Sandbox::load(source, Role::Provider, Limits::default())?;
//! let stuck = handler.call(Function::DecodeRequest, &json!({"spin": true}));
//! assert!(matches!(stuck, Err(SandboxError::Timeout { .. })));
//! assert_eq!(handler.call(Function::DecodeRequest, &json!({"id": 7}))?, json!(7));
//! # Ok::<(), SandboxError>(())
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod bytecode;
mod contract;
mod convert;
mod engine;
mod error;
mod failure;
mod handler;
mod instance;
mod limits;
mod memory;
mod meter;
mod module;
mod program;
mod round_trip;
mod source;
mod watch;

pub use contract::{Function, Role, UnknownName};
pub use error::SandboxError;
pub use handler::{Handler, Sandbox};
pub use limits::Limits;
pub use round_trip::{check_input, check_output, property_order, round_trip};
