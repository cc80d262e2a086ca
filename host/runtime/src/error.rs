//! Typed errors. Each names the stage that failed (build or run) and, for
//! capability failures, the capability.

use serde::Serialize;

/// Where a JavaScript error came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JsLocation {
    /// The JS message, e.g. `TypeError: cannot read property 'x' of undefined`.
    pub message: String,
    /// 1-based line in the tool's source.
    pub line: Option<u32>,
    /// 1-based column in the tool's source.
    pub column: Option<u32>,
    /// The JS stack, when QuickJS recorded one.
    pub stack: Option<String>,
}

impl std::fmt::Display for JsLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, " (at line {l}, column {c})"),
            (Some(l), None) => write!(f, " (at line {l})"),
            _ => Ok(()),
        }
    }
}

/// A failure of the build stage (JS source to component artifact).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The static check found blocked APIs.
    #[error("build: static check refused the source: {0}")]
    StaticCheck(#[from] crate::static_check::StaticCheckError),
    /// The source does not compile (syntax error), with line and column.
    #[error("build: source does not compile: {0}")]
    Compile(JsLocation),
    /// The module's top level threw, or it defines no `execute`.
    #[error("build: loading the tool failed: {0}")]
    Load(JsLocation),
    /// The top level ran past the build's time or memory limit.
    #[error("build: the tool's top level {0}")]
    TopLevel(String),
    /// Source larger than the build accepts.
    #[error("build: source is {actual} bytes, over the {limit}-byte limit")]
    SourceTooLarge {
        /// Bytes given.
        actual: usize,
        /// Bytes allowed.
        limit: usize,
    },
    /// A compose request given where JavaScript is built: its steps are
    /// registered tools, so only the forge (with a registry) builds it.
    #[error(
        "build: {0}: a compose request calls registered tools: forge it with `temper forge` (a registry holds its steps)"
    )]
    ComposeRequest(String),
    /// Snapshotting (Wizer) or the engine failed: a host bug, not the tool's.
    #[error("build: internal error in {stage}: {message}")]
    Internal {
        /// The build step.
        stage: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// A failure to accept a component as a tool.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not a valid component for this engine.
    #[error("load: not a valid WebAssembly component: {0}")]
    Invalid(String),
    /// The component imports something outside the `tool` world.
    #[error("load: import `{0}` is outside the `tool` world; refusing to instantiate")]
    ImportNotAllowed(String),
    /// The component does not export `temper:tool/run`.
    #[error("load: the component does not export `{0}`")]
    MissingExport(String),
    /// The runtime's admission gate (a trust policy) refused the bytes.
    #[error("load: refused: {reason}")]
    Refused {
        /// Why, as the gate says it (the rule and what is missing).
        reason: String,
    },
}

/// Why a call failed. Every limit and capability failure has its own variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RunError {
    /// The input is not valid JSON or is over the input cap.
    #[error("run: bad input: {message}")]
    BadInput {
        /// Why.
        message: String,
    },
    /// The tool threw, or its promise rejected.
    #[error("run: the tool threw: {error}")]
    Js {
        /// Message and position.
        error: JsLocation,
    },
    /// The call ran past its wall-clock limit.
    #[error("run: timed out after {limit_ms} ms")]
    Timeout {
        /// The limit in milliseconds.
        limit_ms: u64,
    },
    /// The call hit the memory cap.
    #[error("run: out of memory (limit {limit_bytes} bytes): {detail}")]
    Memory {
        /// The cap in bytes.
        limit_bytes: usize,
        /// What ran out.
        detail: String,
    },
    /// The output is larger than the output cap.
    #[error("run: output is {actual_bytes} bytes, over the {limit_bytes}-byte limit")]
    OutputTooLarge {
        /// Bytes produced.
        actual_bytes: usize,
        /// The cap in bytes.
        limit_bytes: usize,
    },
    /// The tool used a capability it was not granted. The message says
    /// what to do: list it in the tool's `implementation.allowlist` (the
    /// forge refuses a capability the host does not allow, naming who can
    /// allow it).
    #[error(
        "run: capability not granted: {capability} (the tool's implementation.allowlist does not list \"{capability}\": add it and forge the tool again)"
    )]
    CapabilityDenied {
        /// `fetch`, `fs.readFile`, `crypto` or `tool:NAME`.
        capability: String,
    },
    /// The tool returned something JSON cannot represent: `undefined` (a
    /// missing `return`), a function, a symbol, a BigInt, a cycle. Never
    /// turned into `null` or an empty success.
    #[error("run: execute() returned {returned}, which is not a JSON value")]
    BadOutput {
        /// What was returned, and where for nested values: `undefined`,
        /// `a function`, `a BigInt at $.total`, `a cyclic value at $.self`.
        returned: String,
    },
    /// The guest trapped (a stack overflow in native code, an abort, ...).
    #[error("run: the tool trapped: {message}")]
    Trap {
        /// The trap's description.
        message: String,
    },
    /// The engine failed to instantiate the tool.
    #[error("run: instantiation failed: {message}")]
    Instantiate {
        /// Why.
        message: String,
    },
    /// A step of a compose tool failed; the pipeline stopped there.
    #[error("run: step {index} ({step:?}, tool {tool}) failed: {message}")]
    Step {
        /// The step's index in the pipeline (0-based).
        index: usize,
        /// The step's name.
        step: Box<str>,
        /// The tool it calls.
        tool: Box<str>,
        /// The step's own error.
        message: Box<str>,
    },
    /// A tool this tool called failed (or could not be called: nested too
    /// deep, input or output over its cap), and the failure was returned as
    /// the call's own.
    #[error("run: tool {tool} failed: {message}")]
    ToolCall {
        /// The called tool.
        tool: String,
        /// Its error.
        message: String,
    },
    /// The shim reported an internal error.
    #[error("run: internal error: {message}")]
    Internal {
        /// Why.
        message: String,
    },
}
