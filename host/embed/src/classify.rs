//! One classification of temper's typed errors for the language bindings:
//! each error becomes a [`Failure`] with an [`ErrorKind`] (the exception or
//! error class a binding raises) and the error's own message. The kinds
//! come from the error types' variants, never from their text.

use serde::Serialize;
use temper_forge::ForgeResult;
use temper_forge::code_mode::RunCodeError;
use temper_forge::error::{ExportError, ForgeError, ImportError, InvokeError, PromoteError, Stage};
use temper_runtime::LogLine;
use temper_runtime::error::{BuildError, LoadError, RunError};
use temper_runtime::runtime::CallFailure;
use temper_store::StoreError;

use crate::open::OpenError;

/// What kind of failure it is: one variant per error class the bindings
/// raise (Python `ForgeRefused`, `ToolTimeout`, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ErrorKind {
    /// A stage of the forge pipeline refused (validate, build, test, judge,
    /// register, import), or a promotion, approval or export was refused.
    Refused {
        /// The stage (`validate`, `build`, `test`, `judge`, `promote`, ...).
        stage: &'static str,
    },
    /// The call ran past its wall-clock limit.
    Timeout {
        /// The limit, ms.
        limit_ms: u64,
    },
    /// The call hit the memory cap.
    Memory {
        /// The cap, bytes.
        limit_bytes: usize,
    },
    /// The tool used a capability it was not granted, or one the host
    /// policy no longer allows.
    Capability {
        /// `fetch`, `fs.readFile`, `crypto` or `tool:NAME`.
        capability: String,
    },
    /// The tool failed: it threw (with the JS message and position), its
    /// output is not JSON or over the cap or does not match its
    /// `outputSchema`, it trapped, or a step or callee failed.
    ToolFailed {
        /// The JS message (or what went wrong).
        message: String,
        /// 1-based line in the tool's source, when the JS error has one.
        line: Option<u32>,
        /// 1-based column, when the JS error has one.
        column: Option<u32>,
    },
    /// No tool of that name is visible to the caller.
    NotFound {
        /// The name asked for.
        name: String,
    },
    /// The input does not fit: not JSON, over the input cap, or not
    /// matching the tool's `inputSchema`.
    InvalidInput {
        /// `inputSchema` when a schema refused it (else `None`).
        schema: Option<&'static str>,
        /// The JSON pointer of the first offending value (`""`: the root),
        /// when a schema refused it.
        at: Option<String>,
    },
    /// Too much work in flight on this host; try again later.
    Busy,
    /// The host failed (the store, loading an artifact, the engine, an
    /// option or file it was given): not the tool's doing.
    Host,
}

/// A classified failure: its kind, the error's message, the console lines
/// printed before it, and for a refused forge the seed-shaped result (with
/// its test results and verdict).
#[derive(Debug, Clone)]
pub struct Failure {
    /// The class.
    pub kind: ErrorKind,
    /// The typed error's message (for people; never matched on).
    pub message: String,
    /// Console lines printed before the failure.
    pub logs: Vec<LogLine>,
    /// A refused forge's or import's result (`success: false`), boxed: a
    /// failure stays small on the call path.
    pub result: Option<Box<ForgeResult>>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl Failure {
    fn new(kind: ErrorKind, message: impl std::fmt::Display) -> Self {
        Self {
            kind,
            message: message.to_string(),
            logs: Vec::new(),
            result: None,
        }
    }

    /// The failure's kind as an error would be, e.g. a host failure.
    pub fn host(message: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::Host, message)
    }

    /// A caller's input the binding could not even hand over (e.g. not
    /// JSON-representable).
    pub fn invalid_input(message: impl std::fmt::Display) -> Self {
        Self::new(
            ErrorKind::InvalidInput {
                schema: None,
                at: None,
            },
            message,
        )
    }

    /// The failure as one JSON document, what a binding hands its
    /// language's error factory: `{"kind": {"kind": "timeout", "limit_ms":
    /// 500}, "message": ..., "logs": [{"level", "message"}], "result": the
    /// forge result or null}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": self.kind,
            "message": self.message,
            "logs": self.logs,
            "result": self.result,
        })
    }

    /// Sets the JSON pointer and schema of an input refused by a schema
    /// (see [`crate::first_violation`]).
    pub fn with_input_location(mut self, at: Option<String>) -> Self {
        if let ErrorKind::InvalidInput { schema, at: slot } = &mut self.kind {
            *schema = Some("inputSchema");
            *slot = at;
        }
        self
    }
}

/// The kind of a failed call.
pub fn run_error_kind(e: &RunError) -> ErrorKind {
    match e {
        RunError::BadInput { .. } => ErrorKind::InvalidInput {
            schema: None,
            at: None,
        },
        RunError::Js { error } => ErrorKind::ToolFailed {
            message: error.message.clone(),
            line: error.line,
            column: error.column,
        },
        RunError::Timeout { limit_ms } => ErrorKind::Timeout {
            limit_ms: *limit_ms,
        },
        RunError::Memory { limit_bytes, .. } => ErrorKind::Memory {
            limit_bytes: *limit_bytes,
        },
        RunError::CapabilityDenied { capability } => ErrorKind::Capability {
            capability: capability.clone(),
        },
        RunError::OutputTooLarge { .. }
        | RunError::BadOutput { .. }
        | RunError::Trap { .. }
        | RunError::Step { .. }
        | RunError::ToolCall { .. } => ErrorKind::ToolFailed {
            message: e.to_string(),
            line: None,
            column: None,
        },
        RunError::Instantiate { .. } | RunError::Internal { .. } => ErrorKind::Host,
    }
}

impl From<CallFailure> for Failure {
    fn from(f: CallFailure) -> Self {
        Self {
            kind: run_error_kind(&f.error),
            message: f.error.to_string(),
            logs: f.logs,
            result: None,
        }
    }
}

impl From<InvokeError> for Failure {
    fn from(e: InvokeError) -> Self {
        let kind = match &e {
            InvokeError::Busy(_) => ErrorKind::Busy,
            InvokeError::NotFound { name, .. } => ErrorKind::NotFound { name: name.clone() },
            // The JSON pointer is not in the error: the binding adds it with
            // `with_input_location` (it has the schema and the input).
            InvokeError::Input { .. } => ErrorKind::InvalidInput {
                schema: Some("inputSchema"),
                at: None,
            },
            InvokeError::Run { failure, .. } => run_error_kind(&failure.error),
            InvokeError::Output { .. } => ErrorKind::ToolFailed {
                message: e.to_string(),
                line: None,
                column: None,
            },
            InvokeError::Capability { error, .. } => ErrorKind::Capability {
                capability: match error {
                    temper_policy::PolicyError::NotAllowedByHost(c) => c.to_string(),
                    temper_policy::PolicyError::UnknownCapability(c) => c.clone(),
                    temper_policy::PolicyError::SectionWithoutCapability { capability, .. } => {
                        capability.to_string()
                    }
                    other => other.to_string(),
                },
            },
            // Named as the grant a tool call needs (`tool:NAME`), the
            // tool reached outside the caller's grant.
            InvokeError::Grant { refusal, .. } => ErrorKind::Capability {
                capability: format!("tool:{}", refusal.tool()),
            },
            InvokeError::Load { .. } | InvokeError::Store(_) => ErrorKind::Host,
        };
        let logs = match &e {
            InvokeError::Run { failure, .. } => failure.logs.clone(),
            _ => Vec::new(),
        };
        Self {
            kind,
            message: e.to_string(),
            logs,
            result: None,
        }
    }
}

/// A refused forge (or import): [`ErrorKind::Refused`] with its stage, and
/// the seed-shaped result.
pub fn forge_failure(outcome: &Result<temper_forge::Forged, ForgeError>) -> Option<Failure> {
    let Err(e) = outcome else {
        return None;
    };
    let kind = match e {
        ForgeError::Busy(_) => ErrorKind::Busy,
        _ => ErrorKind::Refused {
            stage: e.stage().as_str(),
        },
    };
    Some(Failure {
        kind,
        message: e.to_string(),
        logs: Vec::new(),
        result: Some(Box::new(ForgeResult::from(outcome))),
    })
}

impl From<ForgeError> for Failure {
    fn from(e: ForgeError) -> Self {
        forge_failure(&Err(e)).expect("an error")
    }
}

impl From<ImportError> for Failure {
    fn from(e: ImportError) -> Self {
        ForgeError::Import(e).into()
    }
}

impl From<PromoteError> for Failure {
    fn from(e: PromoteError) -> Self {
        let kind = match &e {
            PromoteError::NotFound { name, .. } => ErrorKind::NotFound { name: name.clone() },
            PromoteError::Store { .. } => ErrorKind::Host,
            PromoteError::NoApprover => ErrorKind::Refused {
                stage: Stage::Approve.as_str(),
            },
            PromoteError::NameTaken { stage, .. } => ErrorKind::Refused {
                stage: stage.as_str(),
            },
            PromoteError::NotEnoughUses { .. }
            | PromoteError::LowConfidence { .. }
            | PromoteError::AgentFull { .. }
            | PromoteError::Source(_)
            | PromoteError::PanelRejected { .. } => ErrorKind::Refused {
                stage: Stage::Promote.as_str(),
            },
        };
        Self::new(kind, e)
    }
}

impl From<ExportError> for Failure {
    fn from(e: ExportError) -> Self {
        let kind = match &e {
            ExportError::NotFound(name) => ErrorKind::NotFound { name: name.clone() },
            ExportError::Store(_) | ExportError::Artifact(_) => ErrorKind::Host,
            _ => ErrorKind::Refused {
                stage: Stage::Export.as_str(),
            },
        };
        Self::new(kind, e)
    }
}

impl From<RunCodeError> for Failure {
    fn from(e: RunCodeError) -> Self {
        match e {
            RunCodeError::Run(failure) => {
                let mut f = Failure::from(failure);
                f.message = format!("run_code: {}", f.message);
                f
            }
            RunCodeError::Build(b) => b.into(),
            RunCodeError::NotCallable { ref tool, .. } => {
                Self::new(ErrorKind::NotFound { name: tool.clone() }, e)
            }
            RunCodeError::Policy(_) | RunCodeError::Store(_) => Self::new(ErrorKind::Host, e),
        }
    }
}

impl From<BuildError> for Failure {
    fn from(e: BuildError) -> Self {
        let kind = match &e {
            BuildError::Internal { .. } => ErrorKind::Host,
            _ => ErrorKind::Refused {
                stage: Stage::Build.as_str(),
            },
        };
        Self::new(kind, e)
    }
}

impl From<LoadError> for Failure {
    fn from(e: LoadError) -> Self {
        Self::new(
            ErrorKind::Refused {
                stage: Stage::Import.as_str(),
            },
            e,
        )
    }
}

impl From<temper_policy::PolicyError> for Failure {
    fn from(e: temper_policy::PolicyError) -> Self {
        let kind = match &e {
            temper_policy::PolicyError::NotAllowedByHost(c) => ErrorKind::Capability {
                capability: c.to_string(),
            },
            temper_policy::PolicyError::UnknownCapability(c) => ErrorKind::Capability {
                capability: c.clone(),
            },
            _ => ErrorKind::Host,
        };
        Self::new(kind, e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Self::new(ErrorKind::Host, e)
    }
}

impl From<OpenError> for Failure {
    fn from(e: OpenError) -> Self {
        Self::new(ErrorKind::Host, e)
    }
}

/// The JSON pointer of the first value in `input` that `schema` refuses
/// (`""`: the root), or `None` when the schema does not compile or accepts
/// it. A binding calls this on an [`ErrorKind::InvalidInput`] from a call,
/// with the tool's `inputSchema`, to say where the input is wrong.
pub fn first_violation(schema: &serde_json::Value, input: &serde_json::Value) -> Option<String> {
    let validator = jsonschema::validator_for(schema).ok()?;
    validator
        .iter_errors(input)
        .next()
        .map(|e| e.instance_path().to_string())
}
