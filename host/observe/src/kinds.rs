//! The fixed label values: error kinds, tiers, outcomes.

/// What a failed call is counted as in `temper_tool_errors_total{kind}`.
///
/// The kinds the issue fixes for dashboards, plus two for failures that
/// are none of them: `callee` (a compose step or a tool this tool called
/// failed, and its failure became the call's) and `internal` (the host
/// failed: the store, loading or instantiating the tool).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum ErrorKind {
    /// Ran past the wall-clock limit.
    Timeout,
    /// Hit the memory cap (whatever QuickJS threw).
    Memory,
    /// Output over the output cap.
    OutputTooLarge,
    /// Used a capability it was not granted.
    CapabilityDenied,
    /// Input not JSON, over the cap, or not matching `inputSchema`.
    BadInput,
    /// Output not a JSON value or not matching `outputSchema`.
    BadOutput,
    /// The tool threw or its promise rejected.
    Js,
    /// The guest trapped.
    Trap,
    /// Every call slot taken.
    Busy,
    /// A hub tool's upstream failed.
    Upstream,
    /// A compose step or a called tool failed.
    Callee,
    /// The host failed (store, load, instantiation).
    Internal,
}

impl ErrorKind {
    /// How many kinds there are.
    pub const COUNT: usize = 12;

    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; Self::COUNT] = [
        ErrorKind::Timeout,
        ErrorKind::Memory,
        ErrorKind::OutputTooLarge,
        ErrorKind::CapabilityDenied,
        ErrorKind::BadInput,
        ErrorKind::BadOutput,
        ErrorKind::Js,
        ErrorKind::Trap,
        ErrorKind::Busy,
        ErrorKind::Upstream,
        ErrorKind::Callee,
        ErrorKind::Internal,
    ];

    /// The label value: `timeout`, `memory`, `output_too_large`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::Memory => "memory",
            ErrorKind::OutputTooLarge => "output_too_large",
            ErrorKind::CapabilityDenied => "capability_denied",
            ErrorKind::BadInput => "bad_input",
            ErrorKind::BadOutput => "bad_output",
            ErrorKind::Js => "js",
            ErrorKind::Trap => "trap",
            ErrorKind::Busy => "busy",
            ErrorKind::Upstream => "upstream",
            ErrorKind::Callee => "callee",
            ErrorKind::Internal => "internal",
        }
    }
}

/// The tier a call's tool was found in (`tier` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Tier {
    /// The caller's session tier.
    Session,
    /// The caller's agent tier.
    Agent,
    /// The shared tier.
    Shared,
    /// A hub tool (an upstream MCP server's, or built in).
    Hub,
    /// Not resolved: the call was refused before (no call slot free).
    Unresolved,
}

impl Tier {
    /// How many tiers there are.
    pub const COUNT: usize = 5;

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Session => "session",
            Tier::Agent => "agent",
            Tier::Shared => "shared",
            Tier::Hub => "hub",
            Tier::Unresolved => "unresolved",
        }
    }
}

/// `ok` or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Outcome {
    Ok,
    Error,
}

impl Outcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
        }
    }
}
