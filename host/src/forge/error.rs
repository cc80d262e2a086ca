//! The forge's typed errors. Each names its stage ([`Stage`]); capability
//! problems name the capability (through [`PolicyError`]).

use serde::Serialize;

use super::judge::{PanelVerdict, Verdict};
use super::schema::{SchemaError, SchemaMismatch};
use crate::testcase::CaseResult;
use crate::error::BuildError;
use crate::policy::PolicyError;
use crate::runtime::CallFailure;
use crate::static_check::StaticCheckError;
use crate::store::{StoreError, Tier};

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
        }
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
    /// `implementation.mode` is `compose`, which this version cannot build.
    #[error(
        "validate: implementation mode `compose` is not supported yet (only `sandbox`); see the compose issue"
    )]
    ComposeNotSupported,
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
}

impl ForgeError {
    /// The stage that refused the request.
    pub fn stage(&self) -> Stage {
        match self {
            ForgeError::Validate(_) => Stage::Validate,
            ForgeError::Build(_) => Stage::Build,
            ForgeError::Test { .. } => Stage::Test,
            ForgeError::Judge { .. } => Stage::Judge,
            ForgeError::Register(_) => Stage::Register,
        }
    }
}

/// Why an invocation failed. The failure is recorded against the tool.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
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
    #[error("promote: {name:?} was approved with confidence {have}; promotion needs more than {need}")]
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
