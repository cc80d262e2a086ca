//! Host capabilities a tool may be granted: one module each. Policy (what
//! is allowed) lives in [`temper_policy`]; these modules do the work.

pub mod cassette;
pub mod crypto;
pub mod fetch;
pub mod tool_calls;
