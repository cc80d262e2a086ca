//! Calling tools from tools (code mode): the host side of
//! `temper:tool/tools`.
//!
//! A tool may call another tool only when its allowlist grants
//! `tool:NAME`; anything else, a name computed at run time included, is
//! refused with `capability not granted: tool:NAME` (the shim turns that into
//! [`crate::RunError::CapabilityDenied`] when the tool does not catch it).
//! The runtime does not know where tools live: the embedder (the forge)
//! provides a [`ToolCaller`] that runs the callee through its normal path, in
//! its own fresh instance with its own grants, limits and schema checks.
//!
//! Bounds, enforced here for every call whatever the caller does:
//! - the depth of the call tree ([`MAX_TOOL_CALL_DEPTH`]);
//! - the whole tree's deadline: the outermost call's. Nested calls run in a
//!   [`CallScope`] (a tokio task-local) that [`crate::Runtime::call`] reads,
//!   so a callee's instance gets at most what is left of it;
//! - the callee's input (the runtime's input cap) and output (its output
//!   cap), also when the callee is not a sandbox tool (a hub tool);
//! - names that are never callable from code ([`NEVER_CALLABLE`]), granted
//!   or not.
//!
//! A callee's console lines come back into the caller's console, each
//! prefixed `[tool NAME] `.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use crate::bindings::temper::tool::types::{ToolError, ToolFailure};
use crate::host_state::{ConsoleBuffer, LogLine};

/// How deep tool calls may nest: a tool called by a top-level call is at
/// depth 1, one it calls at depth 2, and so on.
pub const MAX_TOOL_CALL_DEPTH: usize = 8;

/// The allowlist prefix of a tool grant: `tool:slugify`.
pub const TOOL_GRANT_PREFIX: &str = "tool:";

/// Tools that code may never call, whatever it is granted: the meta-tools
/// that forge, promote, delete or run code (a tool must not change the
/// tool set, nor start a code-mode run of its own). Every one is also in
/// `temper_forge::builtins::BUILTIN_TOOL_NAMES` (reserved names; a test
/// there checks it).
pub const NEVER_CALLABLE: &[&str] = &[
    "forge_tool",
    "promote_tool",
    "delete_tool",
    "run_code",
    "describe_tools",
];

/// The tool name of an allowlist entry `tool:NAME`, if it is one.
pub fn tool_grant(entry: &str) -> Option<&str> {
    entry.strip_prefix(TOOL_GRANT_PREFIX)
}

/// One call a tool makes, as the embedder receives it.
#[derive(Debug, Clone)]
pub struct ToolCallRequest {
    /// The calling tool's id (blake3 of its artifact, hex).
    pub caller: Arc<str>,
    /// The tool called.
    pub tool: String,
    /// Its JSON input.
    pub input: String,
    /// The callee's depth in the call tree (1 for a tool a top-level call
    /// calls).
    pub depth: usize,
    /// When the whole call tree must be over.
    pub deadline: Instant,
}

/// A callee's output and console lines.
#[derive(Debug, Clone)]
pub struct ToolCallOutput {
    /// Its JSON output.
    pub output: String,
    /// Its console lines.
    pub logs: Vec<LogLine>,
}

/// A callee's failure: the error, as text, and its console lines.
#[derive(Debug, Clone)]
pub struct ToolCallFailure {
    /// The callee's error, as the embedder reports it.
    pub message: String,
    /// Console lines printed before it.
    pub logs: Vec<LogLine>,
}

/// What a [`ToolCaller`] returns.
pub type ToolCallFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ToolCallOutput, ToolCallFailure>> + Send + 'a>>;

/// Runs the tools a tool calls. Provided by the embedder (the forge): the
/// runtime checks the grant, the depth, the deadline and the caps, then asks
/// this to run the callee, in its own instance with its own grants.
pub trait ToolCaller: Send + Sync {
    /// Runs `request.tool` on `request.input`.
    fn call_tool(&self, request: ToolCallRequest) -> ToolCallFuture<'_>;
}

/// What a tool may call: the names granted (`tool:NAME`) and the embedder's
/// [`ToolCaller`] that runs them. The default grants none.
#[derive(Clone, Default)]
pub struct ToolCalls {
    names: Arc<BTreeSet<String>>,
    caller: Option<Arc<dyn ToolCaller>>,
}

impl std::fmt::Debug for ToolCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCalls")
            .field("names", &self.names)
            .field("caller", &self.caller.is_some())
            .finish()
    }
}

impl ToolCalls {
    /// Grants calling `names`, run by no one yet (see
    /// [`ToolCalls::with_caller`]).
    pub fn new(names: BTreeSet<String>) -> Self {
        Self {
            names: Arc::new(names),
            caller: None,
        }
    }

    /// These grants, run by `caller`.
    pub fn with_caller(mut self, caller: Arc<dyn ToolCaller>) -> Self {
        self.caller = Some(caller);
        self
    }

    /// The tool names granted, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// Whether no tool may be called.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whether `name` may be called: granted and not [`NEVER_CALLABLE`].
    pub fn allows(&self, name: &str) -> bool {
        self.names.contains(name) && !NEVER_CALLABLE.contains(&name)
    }
}

/// Where a call sits in a call tree: its depth and the tree's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallScope {
    /// The depth of calls made in this scope (0: a top-level call).
    pub depth: usize,
    /// When the whole tree must be over.
    pub deadline: Instant,
}

tokio::task_local! {
    static SCOPE: CallScope;
}

/// The scope the current task runs in: `Some` inside a tool call's callee.
pub fn current_scope() -> Option<CallScope> {
    SCOPE.try_with(|s| *s).ok()
}

/// Runs `fut` in `scope` (so the runtime calls it makes see it).
pub async fn in_scope<F: Future>(scope: CallScope, fut: F) -> F::Output {
    SCOPE.scope(scope, fut).await
}

/// What one store needs to make tool calls: its grants, who it is, where
/// it sits in the tree and the caps on what crosses.
#[derive(Clone, Debug)]
pub struct CallContext {
    /// The names granted and who runs them.
    pub calls: ToolCalls,
    /// The calling tool's id.
    pub caller: Arc<str>,
    /// The calling tool's own depth (0: a top-level call).
    pub depth: usize,
    /// Largest input a callee is given, in bytes.
    pub input_bytes: usize,
    /// Largest output taken back from a callee, in bytes.
    pub output_bytes: usize,
}

fn failed(tool: &str, message: impl Into<String>) -> ToolError {
    ToolError::ToolFailed(ToolFailure {
        tool: tool.to_string(),
        message: message.into(),
    })
}

/// `tools.call(name, input)` for a store with `context` (none: nothing
/// granted), `deadline` and `console`.
pub async fn call(
    context: Option<&CallContext>,
    deadline: Option<Instant>,
    console: &mut ConsoleBuffer,
    name: String,
    input: String,
) -> Result<String, ToolError> {
    let Some(ctx) = context.filter(|c| c.calls.allows(&name)) else {
        return Err(ToolError::CapabilityDenied(format!(
            "{TOOL_GRANT_PREFIX}{name}"
        )));
    };
    let Some(caller) = ctx.calls.caller.clone() else {
        return Err(failed(
            &name,
            "this host runs no tool calls (the embedder gave the runtime no tool caller)",
        ));
    };
    let depth = ctx.depth + 1;
    if depth > MAX_TOOL_CALL_DEPTH {
        return Err(failed(
            &name,
            format!(
                "tool calls nest more than {MAX_TOOL_CALL_DEPTH} levels deep (a tool calling itself, or tools calling each other)"
            ),
        ));
    }
    if input.len() > ctx.input_bytes {
        return Err(failed(
            &name,
            format!(
                "input is {} bytes, over the {}-byte limit",
                input.len(),
                ctx.input_bytes
            ),
        ));
    }
    let deadline = deadline.unwrap_or_else(Instant::now);
    if Instant::now() >= deadline {
        return Err(failed(&name, "the call tree's deadline has passed"));
    }
    let request = ToolCallRequest {
        caller: ctx.caller.clone(),
        tool: name.clone(),
        input,
        depth,
        deadline,
    };
    let scope = CallScope { depth, deadline };
    let run = in_scope(scope, caller.call_tool(request));
    let outcome = tokio::time::timeout_at(deadline.into(), run).await;
    let prefix = format!("[tool {name}] ");
    let mut take_logs = |logs: Vec<LogLine>| {
        for line in logs {
            console.push(line.level, format!("{prefix}{}", line.message));
        }
    };
    match outcome {
        Err(_elapsed) => Err(failed(
            &name,
            "the call tree's deadline passed during the call",
        )),
        Ok(Err(failure)) => {
            take_logs(failure.logs);
            Err(failed(&name, failure.message))
        }
        Ok(Ok(out)) => {
            take_logs(out.logs);
            if out.output.len() > ctx.output_bytes {
                return Err(failed(
                    &name,
                    format!(
                        "output is {} bytes, over the {}-byte limit",
                        out.output.len(),
                        ctx.output_bytes
                    ),
                ));
            }
            Ok(out.output)
        }
    }
}

#[cfg(test)]
#[path = "tool_calls_tests.rs"]
mod tests;
