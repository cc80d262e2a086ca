//! Per-tool call quotas of a token or of the JWT config: the
//! `tool_calls_per_minute` table, tool name → calls per minute.
//!
//! ```toml
//! tool_calls_per_minute = { "web.fetch" = 10, "slugify" = 120 }
//! ```
//!
//! A tool's quota counts its `tools/call` requests only; the principal's
//! `calls_per_minute` counts every tool's (a call refused by its tool's
//! quota does not use the principal's). Both are shared by every host on
//! the store ([`crate::http`]'s quota leasing). A name is matched exactly
//! (no globs): the name the agent calls (`server.tool` for a hub tool).

use std::collections::BTreeMap;
use std::sync::Arc;

/// Longest tool name a quota may name.
pub const MAX_TOOL_NAME: usize = 128;

/// Tool name → calls per minute (empty: no per-tool quota).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolQuotas(Arc<BTreeMap<String, u32>>);

impl ToolQuotas {
    /// Checks a `tool_calls_per_minute` table: every name is a non-empty
    /// tool name of visible ASCII without spaces, at most
    /// [`MAX_TOOL_NAME`] bytes, every limit at least 1. The error names the
    /// key (`tool_calls_per_minute."NAME"`) and what is wrong.
    pub fn parse(table: BTreeMap<String, u32>) -> Result<Self, (String, String)> {
        for (name, limit) in &table {
            let key = format!("tool_calls_per_minute.{name:?}");
            if name.is_empty() || name.len() > MAX_TOOL_NAME {
                return Err((
                    key,
                    format!("a tool name is 1 to {MAX_TOOL_NAME} bytes long"),
                ));
            }
            if !name.bytes().all(|b| (0x21..0x7f).contains(&b)) {
                return Err((
                    key,
                    "a tool name is visible ASCII without spaces (the name the agent calls, e.g. \"web.fetch\")".into(),
                ));
            }
            if name.contains('*') {
                return Err((
                    key,
                    "names one tool exactly (no globs): write a quota per tool".into(),
                ));
            }
            if *limit == 0 {
                return Err((key, "must be at least 1".into()));
            }
        }
        Ok(Self(Arc::new(table)))
    }

    /// The quota of tool `name`, if it has one.
    pub fn limit(&self, name: &str) -> Option<u32> {
        self.0.get(name).copied()
    }

    /// Whether no tool has a quota.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn names_and_limits_are_checked_naming_the_key() {
        let q = ToolQuotas::parse(table(&[("web.fetch", 10), ("slugify", 120)])).unwrap();
        assert_eq!(q.limit("web.fetch"), Some(10));
        assert_eq!(q.limit("web.fetc"), None);
        let (key, why) = ToolQuotas::parse(table(&[("web.fetch", 0)])).unwrap_err();
        assert_eq!(key, "tool_calls_per_minute.\"web.fetch\"");
        assert!(why.contains("at least 1"), "{why}");
        let (key, why) = ToolQuotas::parse(table(&[("web.*", 3)])).unwrap_err();
        assert_eq!(key, "tool_calls_per_minute.\"web.*\"");
        assert!(why.contains("no globs"), "{why}");
        let (_, why) = ToolQuotas::parse(table(&[("has space", 3)])).unwrap_err();
        assert!(why.contains("visible ASCII"), "{why}");
        let (_, why) = ToolQuotas::parse(table(&[("", 3)])).unwrap_err();
        assert!(why.contains("1 to 128"), "{why}");
        let long = "x".repeat(MAX_TOOL_NAME + 1);
        assert!(ToolQuotas::parse(table(&[(long.as_str(), 3)])).is_err());
    }
}
