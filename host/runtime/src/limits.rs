//! Hard limits for one tool call, with the secure defaults written down.

use std::time::Duration;

/// Limits applied to every call (and to the build steps that run guest code).
///
/// Defaults: 5000 ms wall clock, 128 MiB linear memory, 1 MiB output,
/// 1 MiB input, 64 KiB of console output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget for one call, enforced by epoch interruption and by
    /// an async timeout around the call.
    pub timeout: Duration,
    /// Largest linear memory a call may grow to, in bytes.
    pub memory_bytes: usize,
    /// Largest JSON output a call may return, in bytes.
    pub output_bytes: usize,
    /// Largest JSON input accepted, in bytes.
    pub input_bytes: usize,
    /// Console bytes kept per call; later lines are dropped and counted.
    pub console_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(5000),
            memory_bytes: 128 << 20,
            output_bytes: 1 << 20,
            input_bytes: 1 << 20,
            console_bytes: 64 << 10,
        }
    }
}

impl Limits {
    /// These limits with each limit a policy file's `[limits]` sets
    /// replacing the one here (`timeout_ms`, `memory_mb`,
    /// `max_output_bytes`); unset ones are kept.
    pub fn with_policy(self, config: &temper_policy::LimitsConfig) -> Self {
        let mut limits = self;
        if let Some(ms) = config.timeout_ms {
            limits.timeout = Duration::from_millis(ms);
        }
        if let Some(mb) = config.memory_mb {
            limits.memory_bytes = usize::try_from(mb)
                .ok()
                .and_then(|mb| mb.checked_mul(1 << 20))
                .unwrap_or(usize::MAX);
        }
        if let Some(bytes) = config.max_output_bytes {
            limits.output_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        limits
    }

    /// Sets the wall-clock timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// Sets the memory cap in bytes.
    pub fn with_memory_bytes(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self
    }
    /// Sets the output cap in bytes.
    pub fn with_output_bytes(mut self, bytes: usize) -> Self {
        self.output_bytes = bytes;
        self
    }
}

/// Default memory budget of a runtime ([`CacheLimits::for_budget`]).
pub const DEFAULT_MEMORY_BUDGET: usize = 512 << 20;

/// What a runtime keeps between calls, each bounded and evicting its least
/// recently used entry when full. [`CacheLimits::for_budget`] derives them
/// from one memory budget; the default is that of
/// [`DEFAULT_MEMORY_BUDGET`].
///
/// A tool the shared engine runs costs nothing here but its bytecode (held
/// by its [`crate::Tool`]); these caps bound what is kept *for speed*.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheLimits {
    /// Hot tools that keep pre-warmed instances (their bytecode already
    /// loaded into a fresh engine instance, never called).
    pub warm_tools: usize,
    /// Pre-warmed instances kept per hot tool (0 turns pre-warming off).
    pub warm_per_tool: usize,
    /// Tools run from their own compiled component (artifacts the engine
    /// cannot run: built elsewhere, other languages) kept compiled.
    pub compiled_tools: usize,
    /// Bytecode records kept in memory for [`crate::Runtime::load`] to find
    /// the engine form of an artifact (the rest are on disk, in the cache).
    pub bytecode_records: usize,
    /// Bytes of each pool slot's linear memory kept resident between uses
    /// (reset in place rather than released and faulted in again).
    pub keep_resident_bytes: usize,
    /// Calls on the shared engine after which a tool is promoted to its own
    /// compiled snapshot, compiled in the background into one of
    /// [`CacheLimits::compiled_tools`]' places (0: never; default
    /// [`DEFAULT_PROMOTE_AFTER_CALLS`]). See `runtime/promote.rs`.
    pub promote_after_calls: u64,
}

/// Default [`CacheLimits::promote_after_calls`]: a promotion costs about half
/// a second of one core the first time (then the disk cache holds it) and
/// saves about 9 µs per call, so a tool called this often in one process is
/// likely to repay it.
pub const DEFAULT_PROMOTE_AFTER_CALLS: u64 = 1000;

impl Default for CacheLimits {
    fn default() -> Self {
        Self::for_budget(DEFAULT_MEMORY_BUDGET)
    }
}

/// Approximate resident cost of one pre-warmed instance, as RSS counts it:
/// the engine image's pages its load touched (mapped per instance, though
/// shared) and dirtied, and the store (measured: ~0.6 MiB for a small tool).
const WARM_INSTANCE_BYTES: usize = 1 << 20;
/// Approximate resident cost of one compiled artifact (code and image).
const COMPILED_TOOL_BYTES: usize = 4 << 20;

impl CacheLimits {
    /// Caps that keep what the caches hold within about half of `budget`
    /// bytes (the rest is for calls in flight and the host itself): a
    /// quarter for pre-warmed instances, a quarter for compiled artifacts.
    pub fn for_budget(budget: usize) -> Self {
        let warm_per_tool = 2;
        let warm_tools = (budget / 4 / WARM_INSTANCE_BYTES / warm_per_tool).min(256);
        Self {
            warm_tools,
            warm_per_tool: if warm_tools == 0 { 0 } else { warm_per_tool },
            compiled_tools: (budget / 4 / COMPILED_TOOL_BYTES).max(1),
            bytecode_records: 4096,
            keep_resident_bytes: crate::engine::DEFAULT_KEEP_RESIDENT,
            promote_after_calls: DEFAULT_PROMOTE_AFTER_CALLS,
        }
    }

    /// Pool slots the pre-warmed instances may hold at once.
    pub fn warm_instances(&self) -> usize {
        self.warm_tools * self.warm_per_tool
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use temper_policy::LimitsConfig;

    #[test]
    fn a_policy_replaces_only_the_limits_it_sets() {
        let config = LimitsConfig {
            timeout_ms: Some(1234),
            memory_mb: None,
            max_output_bytes: Some(99),
        };
        let limits = Limits::default().with_policy(&config);
        assert_eq!(limits.timeout, Duration::from_millis(1234));
        assert_eq!(limits.output_bytes, 99);
        assert_eq!(limits.memory_bytes, Limits::default().memory_bytes);
        let mem = LimitsConfig {
            memory_mb: Some(3),
            ..LimitsConfig::default()
        };
        assert_eq!(Limits::default().with_policy(&mem).memory_bytes, 3 << 20);
        assert_eq!(
            Limits::default().with_policy(&LimitsConfig::default()),
            Limits::default()
        );
    }
}
