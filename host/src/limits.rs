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
