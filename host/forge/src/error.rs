//! The forge's typed errors. Each names its stage ([`Stage`]); capability
//! problems name the capability (through [`PolicyError`]).

use serde::Serialize;

use super::judge::{PanelVerdict, Verdict};
use super::schema::{SchemaError, SchemaMismatch};
use crate::testcase::CaseResult;
use temper_policy::PolicyError;
use temper_runtime::error::BuildError;
use temper_runtime::runtime::CallFailure;
use temper_runtime::static_check::StaticCheckError;
use temper_store::{StoreError, Tier};

/// A stage of the forge pipeline, or an operation on registered tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Request checks before anything is built.
    Validate,
    /// JS → component.
    Build,
    /// Test cases under the real limits and grants.
    Test,
    /// The judge's review.
    Judge,
    /// Registration in the session tier and the audit trail.
    Register,
    /// Calling a registered tool.
    Invoke,
    /// Session → agent promotion.
    Promote,
    /// Agent → shared approval.
    Approve,
    /// Waiting for a slot among the forges (or calls) in flight.
    Admission,
    /// Reading and checking an artifact file before admitting it.
    Import,
    /// Writing an artifact file.
    Export,
}

impl Stage {
    /// `validate`, `build`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Validate => "validate",
            Stage::Build => "build",
            Stage::Test => "test",
            Stage::Judge => "judge",
            Stage::Register => "register",
            Stage::Invoke => "invoke",
            Stage::Promote => "promote",
            Stage::Approve => "approve",
            Stage::Admission => "admission",
            Stage::Import => "import",
            Stage::Export => "export",
        }
    }
}

impl From<temper_compose::ComposeError> for ValidateError {
    fn from(e: temper_compose::ComposeError) -> Self {
        ValidateError::Compose(e.to_string())
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the VALIDATE stage refused a request.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// The JSON is not a forge request (missing or mistyped field).
    #[error("validate: not a forge request: {0}")]
    Request(String),
    /// The name is not snake_case, too long, or has path characters.
    #[error("validate: name {name:?} {reason}")]
    Name {
        /// The name as given.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The description is empty or too long.
    #[error("validate: description {0}")]
    Description(String),
    /// A schema does not compile.
    #[error("validate: {0}")]
    Schema(#[from] SchemaError),
    /// The allowlist names an unknown capability or one the host refuses.
    #[error("validate: allowlist: {0}")]
    Capability(#[from] PolicyError),
    /// The source uses a blocked API.
    #[error("validate: static check refused the source: {0}")]
    StaticCheck(#[from] StaticCheckError),
    /// The source does not parse, with the JS message, line and column.
    #[error("validate: syntax error: {0}")]
    Syntax(temper_runtime::error::JsLocation),
    /// A compose request's steps or mappings are malformed (the message
    /// names the step and the mapping key).
    #[error("validate: compose: {0}")]
    Compose(String),
    /// A compose step's tool cannot be used: unknown, not callable by this
    /// agent, or a compose tool whose own steps are missing.
    #[error("validate: compose: {step}: {message}")]
    Step {
        /// `steps[i] ("name")`.
        step: String,
        /// Why.
        message: String,
    },
    /// A `tool:NAME` grant cannot be given: the caller cannot call `NAME`,
    /// it is never callable from code, or calling it would be a cycle.
    #[error("validate: allowlist: tool:{tool}: {message}")]
    ToolCall {
        /// The tool named.
        tool: String,
        /// Why.
        message: String,
    },
    /// The compose tool would reach itself through its steps.
    #[error("validate: {0}")]
    Cycle(#[from] temper_compose::CycleError),
    /// A compose artifact cannot be imported on its own: its steps live in
    /// another store.
    #[error(
        "import: {0:?} is a compose tool whose steps are in another store: export it with --bundle (one self-contained component) and import that"
    )]
    ComposeImport(String),
    /// The source is over the build's size limit.
    #[error("validate: source is {actual} bytes, over the {limit}-byte limit")]
    SourceTooLarge {
        /// Bytes given.
        actual: usize,
        /// Bytes allowed.
        limit: usize,
    },
    /// No test cases, or too many.
    #[error("validate: testCases {0}")]
    TestCases(String),
    /// The session already holds `maxSessionTools` tools.
    #[error("validate: session {session:?} already holds {limit} tools (maxSessionTools)")]
    SessionFull {
        /// The session.
        session: String,
        /// `maxSessionTools`.
        limit: usize,
    },
    /// The agent already owns `maxAgentTools` agent-tier tools.
    #[error("validate: agent {agent:?} already owns {limit} tools (maxAgentTools)")]
    AgentFull {
        /// The agent.
        agent: String,
        /// `maxAgentTools`.
        limit: usize,
    },
    /// A tool of that name is already visible to this agent and session.
    #[error("validate: a tool named {name:?} already exists in the {tier} tier")]
    NameTaken {
        /// The name.
        name: String,
        /// Where the existing tool lives.
        tier: Tier,
    },
    /// Looking up existing tools failed.
    #[error("validate: {0}")]
    Store(#[from] StoreError),
}

/// Why a forge did not register a tool. [`ForgeError::stage`] says where.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// The request was refused before building.
    #[error("{0}")]
    Validate(#[from] ValidateError),
    /// The source did not build.
    #[error("{0}")]
    Build(#[from] BuildError),
    /// At least one test case failed.
    #[error("test: {failed} of {total} test case(s) failed: {first}")]
    Test {
        /// Failed cases.
        failed: usize,
        /// All cases.
        total: usize,
        /// The first failure, for people.
        first: String,
        /// Every case's result.
        results: Vec<CaseResult>,
    },
    /// The forge deadline passed while the test cases ran (both runs
    /// count; `total` is every case run planned, the repeat run included).
    #[error("test: forge deadline of {} s reached after {done} of {total} cases", fmt_secs(*limit_ms))]
    Deadline {
        /// The deadline, ms.
        limit_ms: u64,
        /// Case runs finished.
        done: usize,
        /// Case runs planned (the repeat run included).
        total: usize,
    },
    /// Too many forges in flight and queued on this host.
    #[error("admission: {0}")]
    Busy(Busy),
    /// The judge rejected the tool.
    #[error("judge: rejected by `{}`: {}", verdict.judge, verdict.reasons.join("; "))]
    Judge {
        /// The verdict with its reasons.
        verdict: Verdict,
        /// Every case's result.
        results: Vec<CaseResult>,
    },
    /// Recording the decision failed (the tool is not registered).
    #[error("register: {0}")]
    Register(#[source] StoreError),
    /// An imported file was refused before testing.
    #[error("{0}")]
    Import(#[from] ImportError),
}

/// Why an artifact file was refused at import, before its tests ran.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Not a well-formed artifact (no or bad manifest, not a component).
    #[error("import: {0}")]
    Artifact(#[from] temper_runtime::artifact::ArtifactError),
    /// Not a component of the `tool` world.
    #[error("import: {0}")]
    Load(#[from] temper_runtime::error::LoadError),
    /// Requested capabilities that this host's policy does not allow, each
    /// with why.
    #[error("import: requested capabilities do not fit this host's policy: {}", .0.join(", "))]
    Capabilities(Vec<String>),
    /// A tool the artifact calls (code mode) is not on this host: a forged
    /// callee whose artifact is not in this store, a hub or host-native
    /// callee not registered here, or a `tool:` grant without a pin.
    #[error("import: the tool calls {tool:?}, which {reason}: import its callees first")]
    MissingCallee {
        /// The callee.
        tool: String,
        /// Why it cannot be called here.
        reason: String,
    },
    /// The embedded source does not hash to the recorded blake3.
    #[error("import: the embedded source hashes to {actual}, the manifest records {recorded}")]
    SourceMismatch {
        /// `sourceBlake3` in the manifest.
        recorded: String,
        /// blake3 of the embedded source.
        actual: String,
    },
    /// The trust policy refuses it (names the rule and what is missing).
    #[error("import: {0}")]
    Trust(Box<temper_sign::TrustError>),
    /// An AgentOS package was refused before anything was built.
    #[error("import: {0}")]
    Package(#[from] crate::agentos::PackageError),
}

impl From<temper_sign::TrustError> for ImportError {
    fn from(e: temper_sign::TrustError) -> Self {
        ImportError::Trust(Box::new(e))
    }
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// No tool of that name or id is visible.
    #[error("export: no tool named (or with id) {0:?}")]
    NotFound(String),
    /// `--with-source` but the source was not kept and not given.
    #[error(
        "export: {0:?} was stored without its source (persistSandboxSource is off): pass the source to include it"
    )]
    NoSource(String),
    /// The given source does not hash to the recorded blake3.
    #[error("export: the given source hashes to {actual}, but the tool was built from {recorded}")]
    SourceMismatch {
        /// `sourceBlake3` in the manifest.
        recorded: String,
        /// blake3 of the given source.
        actual: String,
    },
    /// `--bundle` of a tool that is not a compose tool.
    #[error(
        "export: {0:?} is not a compose tool: only compose tools are bundled (export it as is)"
    )]
    NotCompose(String),
    /// The bundle could not be made.
    #[error("export: {0}")]
    Bundle(#[from] temper_compose::bundle::BundleError),
    /// A step of the compose tool calls tools (code mode): its callees
    /// are not linked into bundles yet.
    #[error(
        "export: step {step:?} calls tools (code mode), which a bundle cannot link in yet: export the tools plainly and import each on the other host"
    )]
    CodeModeStep {
        /// The step's tool.
        step: String,
    },
    /// The stored artifact is not well formed.
    #[error("export: {0}")]
    Artifact(#[from] temper_runtime::artifact::ArtifactError),
    /// The store failed.
    #[error("export: {0}")]
    Store(#[from] StoreError),
    /// The tool cannot be written as an AgentOS package.
    #[error("export: {0}")]
    Package(#[from] crate::agentos::PackageError),
}

impl From<temper_runtime::id::InvalidArtifactId> for ExportError {
    fn from(e: temper_runtime::id::InvalidArtifactId) -> Self {
        ExportError::Store(StoreError::from(e))
    }
}

impl ForgeError {
    /// The stage that refused the request.
    pub fn stage(&self) -> Stage {
        match self {
            ForgeError::Validate(_) => Stage::Validate,
            ForgeError::Build(_) => Stage::Build,
            ForgeError::Test { .. } | ForgeError::Deadline { .. } => Stage::Test,
            ForgeError::Busy(_) => Stage::Admission,
            ForgeError::Judge { .. } => Stage::Judge,
            ForgeError::Register(_) => Stage::Register,
            ForgeError::Import(_) => Stage::Import,
        }
    }
}

/// `ms` as seconds for people: `60`, `1.5`.
fn fmt_secs(ms: u64) -> String {
    let secs = ms as f64 / 1000.0;
    format!("{secs}")
}

/// A host at its bound of work in flight: `in_flight` running and `queued`
/// waiting, the most it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "busy: {in_flight} {what} in flight and {queued} queued (the most this host takes); try again later"
)]
pub struct Busy {
    /// `forges` or `calls`.
    pub what: &'static str,
    /// The in-flight bound.
    pub in_flight: usize,
    /// The queue bound.
    pub queued: usize,
}

/// Why an invocation failed. The failure is recorded against the tool.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// Too many calls in flight and queued on this host (not recorded
    /// against the tool: it did not run).
    #[error("invoke: {0}")]
    Busy(Busy),
    /// No tool of that name is visible to this agent and session.
    #[error("invoke: no tool named {name:?} for agent {agent:?} in session {session:?}")]
    NotFound {
        /// The name asked for.
        name: String,
        /// The agent.
        agent: String,
        /// The session.
        session: String,
    },
    /// The input is not valid JSON or does not match `inputSchema`.
    #[error("invoke {tool}: input {message}")]
    Input {
        /// The tool.
        tool: String,
        /// Why.
        message: String,
    },
    /// The call failed (JS error, timeout, memory, capability, ...).
    #[error("invoke {tool}: {failure}")]
    Run {
        /// The tool.
        tool: String,
        /// What the runtime reported, with console lines.
        failure: CallFailure,
    },
    /// The output does not match `outputSchema` (reuse validation).
    #[error("invoke {tool}: output {mismatch}")]
    Output {
        /// The tool.
        tool: String,
        /// The violations.
        mismatch: SchemaMismatch,
    },
    /// The host policy no longer allows a capability the tool was granted.
    #[error("invoke {tool}: {error}")]
    Capability {
        /// The tool.
        tool: String,
        /// Which capability.
        error: PolicyError,
    },
    /// The tool's artifact could not be read or loaded.
    #[error("invoke {tool}: cannot load the artifact: {message}")]
    Load {
        /// The tool.
        tool: String,
        /// Why.
        message: String,
    },
    /// The store failed.
    #[error("invoke: {0}")]
    Store(#[from] StoreError),
    /// The call reaches a tool outside its caller's grant
    /// ([`crate::grant`]): refused before the tool runs.
    #[error("invoke {tool}: {refusal}")]
    Grant {
        /// The tool called.
        tool: String,
        /// The refusal, naming the tool reached and the narrowing.
        refusal: crate::grant::GrantError,
    },
}

/// Why a promotion or approval was refused.
#[derive(Debug, thiserror::Error)]
pub enum PromoteError {
    /// No such tool in the tier it would be promoted from.
    #[error("{stage}: no {tier}-tier tool named {name:?} for {owner:?}")]
    NotFound {
        /// `promote` or `approve`.
        stage: Stage,
        /// The tier searched.
        tier: Tier,
        /// The name.
        name: String,
        /// The session or agent searched.
        owner: String,
    },
    /// Too few successful uses so far.
    #[error("promote: {name:?} has {have} successful uses; promotion needs at least {need}")]
    NotEnoughUses {
        /// The tool.
        name: String,
        /// Successful uses so far.
        have: u64,
        /// `promotionThreshold.uses`.
        need: u64,
    },
    /// The forge verdict's confidence is not above the threshold.
    #[error(
        "promote: {name:?} was approved with confidence {have}; promotion needs more than {need}"
    )]
    LowConfidence {
        /// The tool.
        name: String,
        /// The forge verdict's confidence.
        have: f64,
        /// `promotionThreshold.confidence`.
        need: f64,
    },
    /// The agent owns `maxAgentTools` tools already.
    #[error("promote: agent {agent:?} already owns {limit} tools (maxAgentTools)")]
    AgentFull {
        /// The agent.
        agent: String,
        /// `maxAgentTools`.
        limit: usize,
    },
    /// The source is needed for the panel and was neither kept nor given,
    /// or the given source does not hash to the recorded blake3.
    #[error("promote: {0}")]
    Source(String),
    /// One or both panel reviewers rejected.
    #[error("promote: the review panel rejected {name:?}: {}", panel.reasons().join("; "))]
    PanelRejected {
        /// The tool.
        name: String,
        /// Both verdicts.
        panel: Box<PanelVerdict>,
    },
    /// The approver's name is empty.
    #[error("approve: an approver name is required")]
    NoApprover,
    /// A tool of that name already exists in the tier the tool would move
    /// to: registered there first, possibly by another host on the same
    /// store (the store's uniqueness decides the race).
    #[error("{stage}: a tool named {name:?} already exists in the {tier} tier")]
    NameTaken {
        /// `promote` or `approve`.
        stage: Stage,
        /// The name.
        name: String,
        /// The tier where it is taken.
        tier: Tier,
    },
    /// The store failed (e.g. a shared tool of that name exists).
    #[error("{stage}: {source}")]
    Store {
        /// `promote` or `approve`.
        stage: Stage,
        /// The store's error.
        #[source]
        source: StoreError,
    },
}

/// The tier named by a store conflict (`agent` or `shared`).
pub(super) fn conflict_tier(tier: &str) -> Tier {
    if tier == Tier::Shared.as_str() {
        Tier::Shared
    } else {
        Tier::Agent
    }
}
