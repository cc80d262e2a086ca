//! Temper's JavaScript shim: the guest half of a sandbox tool.
//!
//! One WebAssembly component (world `js-shim` in `wit/tool.wit`) that
//! - compiles agent JavaScript to QuickJS bytecode (`shim.compile`, used by the
//!   forge with `eval` available in a throw-away runtime only);
//! - loads that bytecode into a runtime *without* the eval intrinsic and runs
//!   the module's top level (`shim.load`, the Wizer snapshot point);
//! - runs `execute(input)` for each `tool.call`, driving promises and the
//!   virtual timers of the prelude until the result settles.
//!
//! Console output goes to the host's `log` import, bounded per call.

use std::cell::RefCell;
use std::fmt::Write as _;

use javy::quickjs::{
    Ctx, Function, Module, Object, Persistent, Promise, Value, WriteOptions,
    function::{MutFn, Rest},
    promise::PromiseState,
};
use javy::{Config, Runtime};

mod host_bridge;

wit_bindgen::generate!({
    world: "js-shim",
    path: "../wit",
});

use exports::temper::tool::run::Guest as ToolGuest;
use exports::temper::tool::shim::Guest as ShimGuest;
use temper::tool::log::log as host_log;
use temper::tool::types::{JsError, LogLevel, ToolError};

/// The module name QuickJS records in stacks; line numbers refer to the
/// agent's source as written (the export we append goes after its last line).
const MODULE_NAME: &str = "tool.js";
/// Console bytes forwarded to the host per call before output is dropped.
const CONSOLE_BUDGET: usize = 64 * 1024;
/// Longest single console line forwarded.
const CONSOLE_LINE_MAX: usize = 8 * 1024;
/// The name under which the appended export exposes `execute`.
const EXECUTE_EXPORT: &str = "__temper_execute";

struct Loaded {
    runtime: Runtime,
    execute: Persistent<Function<'static>>,
}

thread_local! {
    static LOADED: RefCell<Option<Loaded>> = const { RefCell::new(None) };
    /// The prelude's internals (its module export `internals`: the
    /// functions the shim calls), kept here rather than on `globalThis`
    /// so agent code cannot reach them.
    static INTERNALS: RefCell<Option<Persistent<Object<'static>>>> = const { RefCell::new(None) };
    static CONSOLE_USED: RefCell<usize> = const { RefCell::new(0) };
}

struct Shim;
#[cfg(not(feature = "engine"))]
export!(Shim);
impl ShimGuest for Shim {
    fn compile(source: String) -> Result<Vec<u8>, ToolError> {
        compile_module(&wrap_source(&source))
    }

    fn compile_prelude(source: String) -> Result<Vec<u8>, ToolError> {
        prelude_bytecode(&source)
    }

    fn load(mut prelude: Vec<u8>, mut bytecode: Vec<u8>) -> Result<(), ToolError> {
        LOADED.with(|slot| {
            if slot.borrow().is_some() {
                return Err(ToolError::Internal("a tool is already loaded".into()));
            }
            let loaded = load_tool(&prelude, &bytecode);
            // The argument buffers are garbage once loaded: zero them so the
            // snapshot (which keeps only non-zero bytes) leaves them out.
            prelude.fill(0);
            bytecode.fill(0);
            let loaded = loaded?;
            *slot.borrow_mut() = Some(loaded);
            Ok(())
        })
    }
}

impl ToolGuest for Shim {
    fn call(input: String) -> Result<String, ToolError> {
        LOADED.with(|slot| {
            let slot = slot.borrow();
            let loaded = slot
                .as_ref()
                .ok_or_else(|| ToolError::Internal("no tool loaded".into()))?;
            run_execute(loaded, &input)
        })
    }
}

/// Appends the export that hands `execute` to the shim. Agent code is a
/// module (strict mode); `execute` may be a function declaration or binding.
fn wrap_source(source: &str) -> String {
    format!(
        "{source}\n;export const {EXECUTE_EXPORT} = typeof execute === 'function' ? execute : undefined;\n"
    )
}

/// A runtime with the usual intrinsics, used only to compile.
fn compiler_runtime() -> Result<Runtime, ToolError> {
    let mut config = Config::default();
    config.eval(true);
    config.bytecode_stripping(javy::BytecodeStripping::Source);
    Runtime::new(config).map_err(|e| ToolError::Internal(format!("runtime: {e}")))
}

fn compile_module(source: &str) -> Result<Vec<u8>, ToolError> {
    let rt = compiler_runtime()?;
    rt.context().with(|ctx| {
        let declared = Module::declare(ctx.clone(), MODULE_NAME, source)
            .map_err(|e| ToolError::Compile(js_error_from(&ctx, e)))?;
        declared
            .write(WriteOptions {
                strip_source: true,
                ..WriteOptions::default()
            })
            .map_err(|e| ToolError::Compile(js_error_from(&ctx, e)))
    })
}

/// Compiles the prelude (web globals, capability surfaces and lock-down:
/// `prelude.js`, `capabilities.js`, `lockdown.js`, joined by the host) as a
/// module in a throw-away runtime. The host supplies the source so that ~80
/// KB of JavaScript text is not carried in every artifact.
fn prelude_bytecode(source: &str) -> Result<Vec<u8>, ToolError> {
    let rt = compiler_runtime()?;
    rt.context().with(|ctx| {
        let declared = Module::declare(ctx.clone(), "temper:prelude", source).map_err(|e| {
            ToolError::Internal(format!("prelude: {}", js_error_from(&ctx, e).message))
        })?;
        declared
            .write(WriteOptions {
                strip_source: true,
                strip_debug: true,
                ..WriteOptions::default()
            })
            .map_err(|e| ToolError::Internal(format!("prelude: {e}")))
    })
}

/// The runtime tools run in: no eval intrinsic, so `Function`, `eval` and
/// every function constructor reachable through prototypes throw.
fn tool_runtime() -> Result<Runtime, ToolError> {
    let mut config = Config::default();
    config
        .eval(false)
        .text_encoding(false)
        .bytecode_stripping(javy::BytecodeStripping::Source);
    Runtime::new(config).map_err(|e| ToolError::Internal(format!("runtime: {e}")))
}

fn load_tool(prelude: &[u8], bytecode: &[u8]) -> Result<Loaded, ToolError> {
    let runtime = tool_runtime()?;
    let execute = runtime.context().with(|ctx| -> Result<_, ToolError> {
        install_console(&ctx).map_err(|e| ToolError::Internal(format!("console: {e}")))?;
        host_bridge::install(&ctx).map_err(|e| ToolError::Internal(format!("host bridge: {e}")))?;
        run_prelude(&ctx, prelude)?;
        let namespace = eval_bytecode(&ctx, bytecode).map_err(ToolError::Compile)?;
        let execute: Value = namespace
            .get(EXECUTE_EXPORT)
            .map_err(|e| ToolError::Compile(js_error_from(&ctx, e)))?;
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
    Ok(Loaded { runtime, execute })
}

/// Runs the prelude module and keeps its `internals` export for the shim
/// ([`internal`]).
fn run_prelude(ctx: &Ctx<'_>, prelude: &[u8]) -> Result<(), ToolError> {
    let namespace = eval_bytecode(ctx, prelude)
        .map_err(|e| ToolError::Internal(format!("prelude: {}", e.message)))?;
    let internals: Object = namespace
        .get("internals")
        .map_err(|e| ToolError::Internal(format!("prelude internals: {e}")))?;
    INTERNALS.with(|slot| *slot.borrow_mut() = Some(Persistent::save(ctx, internals)));
    Ok(())
}

/// One of the prelude's internal functions (`fireNextTimer`,
/// `pendingTimers`, `unserializable`, `deniedCapability`).
fn internal<'js>(ctx: &Ctx<'js>, name: &str) -> Option<Function<'js>> {
    let internals = INTERNALS.with(|slot| slot.borrow().clone())?;
    internals.restore(ctx).ok()?.get(name).ok()
}

/// Loads a bytecode module, runs its top level to completion, and returns
/// its namespace.
fn eval_bytecode<'js>(ctx: &Ctx<'js>, bytecode: &[u8]) -> Result<Object<'js>, JsError> {
    // SAFETY: the bytecode was produced by `compile_module` of this same shim
    // (the host checks the shim hash before passing bytecode in).
    let module =
        unsafe { Module::load(ctx.clone(), bytecode) }.map_err(|e| js_error_from(ctx, e))?;
    let (module, promise) = module.eval().map_err(|e| js_error_from(ctx, e))?;
    settle(ctx, promise)?;
    module.namespace().map_err(|e| js_error_from(ctx, e))
}

fn run_execute(loaded: &Loaded, input: &str) -> Result<String, ToolError> {
    CONSOLE_USED.with(|used| *used.borrow_mut() = 0);
    reseed_math_random();
    loaded.runtime.context().with(|ctx| {
        let input = ctx.json_parse(input).map_err(|e| {
            ToolError::BadInput(format!(
                "input is not valid JSON: {}",
                js_error_from(&ctx, e).message
            ))
        })?;
        let execute = loaded
            .execute
            .clone()
            .restore(&ctx)
            .map_err(|e| ToolError::Internal(format!("restore: {e}")))?;
        let result: Value = execute
            .call((input,))
            .map_err(|e| call_failure(&ctx, e))?;
        let result = match result.as_promise() {
            Some(promise) => settle_value(&ctx, promise.clone()).map_err(|t| t.failure(&ctx))?,
            None => result,
        };
        result_json(&ctx, result)
    })
}

/// What `execute()`'s result is refused for starts with this; the host
/// reads it as a bad output (`RunError::BadOutput`), not as a thrown error.
const BAD_OUTPUT: &str = "execute() returned ";

/// Serializes `execute()`'s result. A value JSON cannot represent (undefined
/// from a missing `return`, a function, a symbol, a BigInt, a cycle) is an
/// error naming it, never `null` or an empty success.
fn result_json<'js>(ctx: &Ctx<'js>, result: Value<'js>) -> Result<String, ToolError> {
    let top = if result.is_undefined() {
        Some("undefined")
    } else if result.is_function() || result.is_constructor() {
        Some("a function")
    } else if result.is_symbol() {
        Some("a symbol")
    } else if result.is_big_int() {
        Some("a BigInt")
    } else {
        None
    };
    if let Some(what) = top {
        return Err(bad_output(what));
    }
    match ctx.json_stringify(result.clone()) {
        Ok(Some(s)) => s
            .to_string()
            .map_err(|e| ToolError::Internal(format!("output string: {e}"))),
        // The top-level value's toJSON() gave nothing JSON can write.
        Ok(None) => Err(bad_output("undefined (from its toJSON())")),
        Err(e) if e.is_exception() => {
            let thrown = ctx.catch();
            // JSON.stringify throws for BigInts and cycles anywhere in the
            // value; the prelude names what and where. Anything else thrown
            // (a getter, a toJSON) is the tool's own error.
            let described: Option<String> = internal(ctx, "unserializable")
                .and_then(|f| f.call::<_, Option<String>>((result,)).ok())
                .flatten();
            match described {
                Some(what) => Err(bad_output(&what)),
                None => Err(Thrown::Value(thrown).failure(ctx)),
            }
        }
        Err(e) => Err(classify(js_error_from(ctx, e))),
    }
}

fn bad_output(what: &str) -> ToolError {
    ToolError::Js(JsError {
        message: format!("{BAD_OUTPUT}{what}"),
        line: None,
        column: None,
        stack: None,
    })
}

/// Reseeds `Math.random()` for this call. Javy's `Math.random` draws from
/// fastrand's generator, which seeds itself on first use: when a tool's top
/// level drew a number, that state was frozen into the snapshot and every
/// call repeated the same sequence. The seed is fastrand's own recipe, the
/// monotonic clock (a random origin per store; in deterministic mode it
/// stands at a value derived from the seed, so calls still repeat).
fn reseed_math_random() {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::time::Instant::now().hash(&mut hasher);
    fastrand::seed(hasher.finish());
}

/// Something `execute()` threw or rejected with.
enum Thrown<'js> {
    /// The thrown JS value.
    Value(Value<'js>),
    /// A failure that is not a JS value (e.g. no settlement possible).
    Error(JsError),
}

impl<'js> Thrown<'js> {
    fn into_js_error(self, ctx: &Ctx<'js>) -> JsError {
        match self {
            Thrown::Value(value) => js_error_from_value(ctx, value),
            Thrown::Error(e) => e,
        }
    }

    /// The tool error for a failed call: a capability refusal when the
    /// thrown value is the very error the prelude made for a refused
    /// capability (see `deniedCapability` in `capabilities.js`),
    /// else the JS error.
    fn failure(self, ctx: &Ctx<'js>) -> ToolError {
        if let Thrown::Value(value) = &self
            && let Some(capability) = denied_capability(ctx, value)
        {
            return ToolError::CapabilityDenied(capability);
        }
        classify(self.into_js_error(ctx))
    }
}

/// The capability `value` is the refusal of, asked of the prelude (which
/// keeps its refusal errors in a private table: a tool cannot forge one).
fn denied_capability<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> Option<String> {
    let f = internal(ctx, "deniedCapability")?;
    f.call::<_, Option<String>>((value.clone(),)).ok().flatten()
}

/// An rquickjs error as a [`Thrown`]: the pending exception's value, if any.
fn thrown<'js>(ctx: &Ctx<'js>, err: javy::quickjs::Error) -> Thrown<'js> {
    if err.is_exception() {
        Thrown::Value(ctx.catch())
    } else {
        Thrown::Error(js_error_from(ctx, err))
    }
}

/// The tool error for an rquickjs error from calling `execute`.
fn call_failure(ctx: &Ctx<'_>, err: javy::quickjs::Error) -> ToolError {
    thrown(ctx, err).failure(ctx)
}

/// Drives the job queue and the prelude's virtual timers until `promise`
/// settles; a promise that can no longer settle is an error, not a hang.
fn settle<'js>(ctx: &Ctx<'js>, promise: Promise<'js>) -> Result<Value<'js>, JsError> {
    settle_value(ctx, promise).map_err(|t| t.into_js_error(ctx))
}

/// [`settle`], keeping a rejection's value.
fn settle_value<'js>(ctx: &Ctx<'js>, promise: Promise<'js>) -> Result<Value<'js>, Thrown<'js>> {
    let fire_timer = internal(ctx, "fireNextTimer");
    loop {
        match promise.state() {
            PromiseState::Resolved => {
                return promise
                    .result::<Value>()
                    .expect("settled")
                    .map_err(|e| thrown(ctx, e));
            }
            PromiseState::Rejected => {
                let err = promise.result::<Value>().expect("settled").unwrap_err();
                return Err(thrown(ctx, err));
            }
            PromiseState::Pending => {
                // Runs one job; the runtime is already locked by `with`.
                if ctx.execute_pending_job() {
                    continue;
                }
                let fired = match &fire_timer {
                    Some(fire) => fire
                        .call::<_, bool>(())
                        .map_err(|e| thrown(ctx, e))?,
                    None => false,
                };
                if !fired {
                    return Err(Thrown::Error(JsError {
                        message: "the promise returned by execute() never settles (no pending jobs or timers)".into(),
                        line: None,
                        column: None,
                        stack: None,
                    }));
                }
            }
        }
    }
}

/// Maps a JS error to the tool error kind it stands for.
fn classify(err: JsError) -> ToolError {
    if err.message.contains("out of memory") {
        ToolError::Memory(err.message)
    } else {
        ToolError::Js(err)
    }
}

/// Turns the pending exception (or another rquickjs error) into a `JsError`
/// with the message and the first `tool.js:LINE:COL` of its stack.
fn js_error_from(ctx: &Ctx<'_>, err: javy::quickjs::Error) -> JsError {
    if !err.is_exception() {
        return JsError {
            message: err.to_string(),
            line: None,
            column: None,
            stack: None,
        };
    }
    let value = ctx.catch();
    js_error_from_value(ctx, value)
}

fn js_error_from_value<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> JsError {
    if let Some(exception) = value.as_exception() {
        let name: Option<String> = exception.get("name").ok();
        let message = exception.message().unwrap_or_default();
        let stack = exception.stack();
        let message = match name {
            Some(name) if !name.is_empty() => format!("{name}: {message}"),
            _ => message,
        };
        let (line, column) = stack.as_deref().and_then(position_in_stack).unzip();
        return JsError {
            message,
            line,
            column,
            stack: stack.filter(|s| !s.is_empty()),
        };
    }
    JsError {
        message: format!("uncaught {}", display_value(ctx, &value)),
        line: None,
        column: None,
        stack: None,
    }
}

/// Finds the first `tool.js:LINE:COL` in a QuickJS stack.
fn position_in_stack(stack: &str) -> Option<(u32, u32)> {
    let needle = format!("{MODULE_NAME}:");
    let mut rest = stack;
    while let Some(at) = rest.find(&needle) {
        rest = &rest[at + needle.len()..];
        let mut parts = rest.splitn(3, |c: char| !c.is_ascii_digit());
        let line = parts.next().and_then(|s| s.parse().ok());
        let column = parts.next().and_then(|s| s.parse().ok());
        if let (Some(line), Some(column)) = (line, column) {
            return Some((line, column));
        }
    }
    None
}

/// `String(value)`, or JSON for objects, for console lines and messages.
fn display_value<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> String {
    if let Some(s) = value.as_string() {
        return s.to_string().unwrap_or_default();
    }
    if value.is_object() && !value.is_function() && value.as_exception().is_none() {
        if let Ok(Some(json)) = ctx.json_stringify(value.clone()) {
            if let Ok(s) = json.to_string() {
                return s;
            }
        }
    }
    if let Some(e) = value.as_exception() {
        let name: String = e.get("name").unwrap_or_default();
        return format!("{name}: {}", e.message().unwrap_or_default());
    }
    let string: Result<Function, _> = ctx.globals().get("String");
    string
        .and_then(|f| f.call::<_, String>((value.clone(),)))
        .unwrap_or_else(|_| "<value>".into())
}

fn install_console(ctx: &Ctx<'_>) -> javy::quickjs::Result<()> {
    let console = Object::new(ctx.clone())?;
    for (name, level) in [
        ("log", LogLevel::Info),
        ("info", LogLevel::Info),
        ("debug", LogLevel::Debug),
        ("trace", LogLevel::Debug),
        ("warn", LogLevel::Warn),
        ("error", LogLevel::Error),
    ] {
        let f = Function::new(
            ctx.clone(),
            MutFn::new(move |ctx, args| {
                let (ctx, args) = javy::Args::hold(ctx, args).release();
                emit_console(level, console_line(&ctx, &args));
            }),
        )?;
        console.set(name, f)?;
    }
    ctx.globals().set("console", console)
}

/// Joins console arguments the way browsers print them, roughly.
fn console_line<'js>(ctx: &Ctx<'js>, args: &Rest<Value<'js>>) -> String {
    let mut line = String::new();
    for (i, arg) in args.0.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        let _ = write!(line, "{}", display_value(ctx, arg));
    }
    line
}

/// Forwards one console line to the host within the per-call budget.
fn emit_console(level: LogLevel, mut line: String) {
    CONSOLE_USED.with(|used| {
        let mut used = used.borrow_mut();
        if *used >= CONSOLE_BUDGET {
            return;
        }
        if line.len() > CONSOLE_LINE_MAX {
            let mut cut = CONSOLE_LINE_MAX;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push_str("… [line truncated]");
        }
        *used += line.len();
        if *used >= CONSOLE_BUDGET {
            line.push_str("\n[console output truncated: per-call budget reached]");
        }
        host_log(level, &line);
    });
}

// The shared engine (built as the `guest-js-engine` package): see `engine.rs`.
#[cfg(feature = "engine")]
mod engine;
