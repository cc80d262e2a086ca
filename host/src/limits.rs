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
    pub fn with_policy(self, config: &crate::policy::LimitsConfig) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::LimitsConfig;

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
