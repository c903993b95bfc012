//! Compiling scripts to QuickJS bytecode in one context and running that bytecode in another.
//!
//! The handler's context is created without the `Eval` intrinsic, so it cannot compile source
//! at all (no `eval`, no `Function` constructor). Scripts are therefore compiled in a separate,
//! short-lived context and handed over as serialized bytecode. rquickjs only exposes bytecode
//! for ES modules, so these two functions use the C API directly.

use std::ffi::{c_int, CString};

use rquickjs::{qjs, Ctx, Value};

/// Compiled bytecode of one strict-mode script. Only ever produced by [`compile_script`], so
/// [`run_script`] never reads bytes of unknown origin.
pub(crate) struct Bytecode(Vec<u8>);

/// Parses `source` as an ES module named `file_name` without linking or running it: the
/// syntax check of a module handler, before it is rewritten as a script. Nothing is kept.
///
/// On failure the engine's exception (usually a `SyntaxError`) is pending on `ctx` and
/// `rquickjs::Error::Exception` is returned.
pub(crate) fn check_module(ctx: &Ctx<'_>, source: &str, file_name: &str) -> rquickjs::Result<()> {
    let input = CString::new(source)?;
    let file_name = CString::new(file_name)?;
    let mut options = qjs::JSEvalOptions {
        version: qjs::JS_EVAL_OPTIONS_VERSION as c_int,
        eval_flags: (qjs::JS_EVAL_TYPE_MODULE | qjs::JS_EVAL_FLAG_COMPILE_ONLY) as c_int,
        filename: file_name.as_ptr(),
        line_num: 1,
    };
    // SAFETY: as in `compile_script`: a live context, a NUL-terminated input whose length
    // excludes the terminator, and options that outlive the call. With COMPILE_ONLY the module
    // is parsed, not resolved, linked or evaluated.
    let compiled = unsafe {
        qjs::JS_Eval2(
            ctx.as_raw().as_ptr(),
            input.as_ptr(),
            source.len() as _,
            &mut options,
        )
    };
    // SAFETY: JS_Eval2 returns an owned value (a module or the exception marker); `Value`
    // frees it on drop (the module itself is freed with the throwaway context).
    let compiled = unsafe { Value::from_raw(ctx.clone(), compiled) };
    if compiled.is_exception() {
        return Err(rquickjs::Error::Exception);
    }
    Ok(())
}

/// Compiles `source` as a strict-mode global script named `file_name` without running it.
///
/// On failure the engine's exception (usually a `SyntaxError`) is pending on `ctx` and
/// `rquickjs::Error::Exception` is returned.
pub(crate) fn compile_script(
    ctx: &Ctx<'_>,
    source: &str,
    file_name: &str,
) -> rquickjs::Result<Bytecode> {
    // QuickJS reads one byte past the end of the input, which must be NUL.
    let input = CString::new(source)?;
    let file_name = CString::new(file_name)?;
    let mut options = qjs::JSEvalOptions {
        version: qjs::JS_EVAL_OPTIONS_VERSION as c_int,
        eval_flags: (qjs::JS_EVAL_TYPE_GLOBAL
            | qjs::JS_EVAL_FLAG_STRICT
            | qjs::JS_EVAL_FLAG_COMPILE_ONLY) as c_int,
        filename: file_name.as_ptr(),
        line_num: 1,
    };
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: `raw` is the live context `ctx` borrows; `input` is NUL-terminated and
    // `source.len()` excludes the terminator; `options` and `file_name` outlive the call.
    let compiled = unsafe { qjs::JS_Eval2(raw, input.as_ptr(), source.len() as _, &mut options) };
    // SAFETY: JS_Eval2 returns an owned value (possibly the exception marker); ownership moves
    // into `Value`, which frees it on drop.
    let compiled = unsafe { Value::from_raw(ctx.clone(), compiled) };
    if compiled.is_exception() {
        return Err(rquickjs::Error::Exception);
    }
    let mut size: qjs::size_t = 0;
    // SAFETY: `compiled` is a live function-bytecode value of this context; `size` is a valid
    // out-pointer.
    let buffer = unsafe {
        qjs::JS_WriteObject(
            raw,
            &mut size,
            compiled.as_raw(),
            qjs::JS_WRITE_OBJ_BYTECODE as c_int,
        )
    };
    if buffer.is_null() {
        return Err(rquickjs::Error::Exception);
    }
    let length = usize::try_from(size).map_err(|_| rquickjs::Error::Allocation)?;
    // SAFETY: JS_WriteObject returned `size` initialized bytes allocated with js_malloc on this
    // context; they are copied out and then freed exactly once with js_free.
    let bytes = unsafe {
        let bytes = std::slice::from_raw_parts(buffer, length).to_vec();
        qjs::js_free(raw, buffer.cast());
        bytes
    };
    Ok(Bytecode(bytes))
}

/// Loads `bytecode` into `ctx` and runs it, returning the script's completion value.
pub(crate) fn run_script<'js>(ctx: &Ctx<'js>, bytecode: &Bytecode) -> rquickjs::Result<Value<'js>> {
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: the bytes were produced by JS_WriteObject of this same engine build
    // (`Bytecode` has no other constructor), so JS_ReadObject gets well-formed input.
    let function = unsafe {
        qjs::JS_ReadObject(
            raw,
            bytecode.0.as_ptr(),
            bytecode.0.len() as _,
            qjs::JS_READ_OBJ_BYTECODE as c_int,
        )
    };
    // SAFETY: the returned value is owned; checking its tag does not touch it.
    if unsafe { qjs::JS_IsException(function) } {
        return Err(rquickjs::Error::Exception);
    }
    // SAFETY: JS_EvalFunction takes ownership of `function` and returns an owned value, which
    // moves into `Value`.
    let completion = unsafe { Value::from_raw(ctx.clone(), qjs::JS_EvalFunction(raw, function)) };
    if completion.is_exception() {
        return Err(rquickjs::Error::Exception);
    }
    Ok(completion)
}
