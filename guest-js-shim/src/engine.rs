//! The shared engine: the same shim, split at the prelude.
//!
//! Built from this crate with the `engine` feature (the `guest-js-engine`
//! package in `engine/`), it exports the same `js-shim` world as the shim,
//! with `shim.load` in two steps instead of one:
//!
//! 1. `load(prelude, [])` creates the tool runtime (no eval intrinsic),
//!    installs the console and the host bridge and runs the prelude: exactly
//!    what the shim's `load` does before the tool. The host snapshots the
//!    instance here, once per shim version: the *engine*.
//! 2. `load([], bytecode)` in an instance of that engine runs the tool's
//!    module top level in the prelude's runtime, as the shim's `load` would
//!    next, and keeps its `execute` for `run.call`.
//!
//! So a tool is its bytecode: every instance starts from the engine's
//! snapshot (copy-on-write), and no per-tool component is compiled. The
//! shim's own build (without the feature) is unchanged, byte for byte: its
//! snapshots are the self-contained artifacts the host exports.
//!
//! Step 1 also makes the compiler runtime (the one with the eval intrinsic,
//! as the shim's `compile` makes for each compile) and keeps it, unused, in
//! the snapshot: `shim.compile` in an engine instance compiles in it instead
//! of creating a runtime first (most of a small compile's cost). The host
//! uses that for one-shot code (`run_code`): it compiles in a throw-away
//! engine instance and runs the bytecode in another, fresh one, so the tool
//! runtime never shares an instance with an eval-capable runtime that has
//! been used. The compiler runtime is used at most once per instance (taken
//! out of its slot), so every compile starts from the same state.

use std::cell::RefCell;

use javy::Runtime;
use javy::quickjs::{Module, Persistent, Value, WriteOptions};

use crate::exports::temper::tool::run::Guest as ToolGuest;
use crate::exports::temper::tool::shim::Guest as ShimGuest;
use crate::temper::tool::types::{JsError, ToolError};
use crate::{EXECUTE_EXPORT, LOADED, Loaded};

thread_local! {
    /// The prelude's runtime, before a tool is loaded into it (the state the
    /// engine snapshot holds).
    static BASE: RefCell<Option<Runtime>> = const { RefCell::new(None) };
    /// The compiler runtime, made before the snapshot and never used in it.
    static COMPILER: RefCell<Option<Runtime>> = const { RefCell::new(None) };
}

struct Engine;
crate::export!(Engine with_types_in crate);

impl ShimGuest for Engine {
    fn compile(source: String) -> Result<Vec<u8>, ToolError> {
        match COMPILER.with(|c| c.borrow_mut().take()) {
            Some(runtime) => compile_module_in(&runtime, &crate::wrap_source(&source)),
            // Not an engine instance (no prelude loaded yet): as the shim.
            None => <crate::Shim as ShimGuest>::compile(source),
        }
    }

    fn compile_prelude(source: String) -> Result<Vec<u8>, ToolError> {
        <crate::Shim as ShimGuest>::compile_prelude(source)
    }

    fn load(mut prelude: Vec<u8>, mut bytecode: Vec<u8>) -> Result<(), ToolError> {
        let result = match (prelude.is_empty(), bytecode.is_empty()) {
            (false, true) => init_base(&prelude),
            (true, false) => load_into_base(&bytecode),
            _ => Err(ToolError::Internal(
                "the engine loads the prelude and a tool in two steps: load(prelude, []) then load([], bytecode)".into(),
            )),
        };
        // As in the shim: the argument buffers are garbage once loaded; zero
        // them so a snapshot (which keeps only non-zero bytes) leaves them out.
        prelude.fill(0);
        bytecode.fill(0);
        result
    }
}

impl ToolGuest for Engine {
    fn call(input: String) -> Result<String, ToolError> {
        <crate::Shim as ToolGuest>::call(input)
    }
}

/// Step 1: the runtime and the prelude, in the order the shim's `load_tool`
/// uses.
fn init_base(prelude: &[u8]) -> Result<(), ToolError> {
    let taken = BASE.with(|b| b.borrow().is_some()) || LOADED.with(|l| l.borrow().is_some());
    if taken {
        return Err(ToolError::Internal(
            "the engine is already initialized".into(),
        ));
    }
    let runtime = crate::tool_runtime()?;
    runtime.context().with(|ctx| -> Result<(), ToolError> {
        crate::install_console(&ctx).map_err(|e| ToolError::Internal(format!("console: {e}")))?;
        crate::host_bridge::install(&ctx)
            .map_err(|e| ToolError::Internal(format!("host bridge: {e}")))?;
        crate::run_prelude(&ctx, prelude)
    })?;
    BASE.with(|b| *b.borrow_mut() = Some(runtime));
    let compiler = crate::compiler_runtime()?;
    COMPILER.with(|c| *c.borrow_mut() = Some(compiler));
    Ok(())
}

/// Step 2: the tool's module in the prelude's runtime. The runtime is taken
/// out of `BASE` first, so a failed load leaves nothing to load into again
/// (the host drops such an instance anyway).
fn load_into_base(bytecode: &[u8]) -> Result<(), ToolError> {
    if LOADED.with(|l| l.borrow().is_some()) {
        return Err(ToolError::Internal("a tool is already loaded".into()));
    }
    let runtime = BASE
        .with(|b| b.borrow_mut().take())
        .ok_or_else(|| ToolError::Internal("the engine has no prelude loaded".into()))?;
    let execute = runtime.context().with(|ctx| -> Result<_, ToolError> {
        let namespace = crate::eval_bytecode(&ctx, bytecode).map_err(ToolError::Compile)?;
        let execute: Value = namespace
            .get(EXECUTE_EXPORT)
            .map_err(|e| ToolError::Compile(crate::js_error_from(&ctx, e)))?;
        let Some(execute) = execute.into_function() else {
            return Err(ToolError::Compile(JsError {
                message: "the tool defines no `execute` function".into(),
                line: None,
                column: None,
                stack: None,
            }));
        };
        Ok(Persistent::save(&ctx, execute))
    })?;
    LOADED.with(|l| *l.borrow_mut() = Some(Loaded { runtime, execute }));
    Ok(())
}

/// The shim's `compile_module` in a given runtime. A copy of its few lines
/// rather than a change to it: the shim's build must stay byte for byte
/// what it was (its bytes are in every exported artifact), so the shim's
/// own functions are left as they are.
fn compile_module_in(runtime: &Runtime, source: &str) -> Result<Vec<u8>, ToolError> {
    runtime.context().with(|ctx| {
        let declared = Module::declare(ctx.clone(), crate::MODULE_NAME, source)
            .map_err(|e| ToolError::Compile(crate::js_error_from(&ctx, e)))?;
        declared
            .write(WriteOptions {
                strip_source: true,
                ..WriteOptions::default()
            })
            .map_err(|e| ToolError::Compile(crate::js_error_from(&ctx, e)))
    })
}
