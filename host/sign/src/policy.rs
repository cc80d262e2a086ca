//! The trust policy file (`--trust FILE`), TOML:
//!
//! ```toml
//! level = "enforce"            # enforce | audit (log and admit) | off
//! allow_partial = false        # partial signatures (delimiters); default false
//!
//! [publishers.platform-team]
//! keys = [{ id = "k2026", ed25519 = "BASE64", not_after = "2027-06-30" }]
//!
//! [[rule]]
//! scope = ["*"]                # tool names (a trailing * is a prefix), or oci://host/repo/*
//! require = ["platform-team"]  # and/or threshold = 2 (distinct publishers)
//!
//! [revoked]
//! keys = ["k2024"]             # key ids from this file, or key fingerprints
//! artifacts = ["blake3:…"]
//! ```
//!
//! Unknown keys are errors, and every error names the file, the table and
//! the key. Without a file the level is `off` (no check).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;

use crate::Date;
use crate::keys::{TrustedKey, key_id};

/// What a policy does with an artifact that does not meet it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Refuse it.
    Enforce,
    /// Log the refusal, record it in the audit trail, and admit it.
    Audit,
    /// Check nothing (the default without a trust file).
    Off,
}

impl Level {
    /// `enforce`, `audit` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Enforce => "enforce",
            Level::Audit => "audit",
            Level::Off => "off",
        }
    }
}

/// A trust policy file that cannot be used: names the file, the table and
/// the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trust policy {}: {}{}: {message}", file.display(), if table.is_empty() { "(top level)" } else { table }, key.as_deref().map(|k| format!(", key `{k}`")).unwrap_or_default())]
pub struct PolicyError {
    /// The file.
    pub file: PathBuf,
    /// The table, e.g. `publishers.platform-team` or `rule[1]`; empty for
    /// the top level.
    pub table: String,
    /// The key, when one is at fault.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// A `[[rule]]`: the artifacts it covers and what it requires of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Patterns: `*`, a tool name (a trailing `*` makes it a prefix), or
    /// an `oci://host/repo` reference (a trailing `*` makes it a prefix).
    pub scope: Vec<String>,
    /// Publishers that must each have signed.
    pub require: Vec<String>,
    /// How many distinct publishers must have signed.
    pub threshold: Option<usize>,
}

impl Rule {
    /// Whether the rule covers a tool named `name`, pulled from
    /// `reference` (`oci://host/repo:tag`) when it came from a registry.
    pub fn covers(&self, name: &str, reference: Option<&str>) -> bool {
        self.scope.iter().any(|pattern| {
            let target = if pattern.starts_with("oci://") {
                match reference {
                    Some(r) => r,
                    None => return false,
                }
            } else {
                name
            };
            match pattern.strip_suffix('*') {
                Some(prefix) => target.starts_with(prefix),
                None => target == pattern,
            }
        })
    }

    /// The scope as written, for messages: `*`, `a, b`.
    pub fn scope_text(&self) -> String {
        self.scope.join(", ")
    }
}

/// A parsed, checked trust policy.
#[derive(Debug, Clone)]
pub struct TrustPolicy {
    /// The file it came from (`None`: the default, [`TrustPolicy::off`]).
    pub file: Option<PathBuf>,
    /// The level.
    pub level: Level,
    /// Whether a signature that covers only part of the artifact (ending at
    /// a `signature_delimiter`) counts.
    pub allow_partial: bool,
    /// Every key of every publisher.
    pub keys: Vec<TrustedKey>,
    /// The publishers' names, sorted.
    pub publishers: Vec<String>,
    /// The rules, in file order (rule 1 is the first).
    pub rules: Vec<Rule>,
    /// Revoked keys: ids from this file or key fingerprints.
    pub revoked_keys: BTreeSet<String>,
    /// Revoked artifacts, by id (hex, without `blake3:`).
    pub revoked_artifacts: BTreeSet<String>,
}

impl Default for TrustPolicy {
    fn default() -> Self {
        TrustPolicy::off()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    level: Level,
    #[serde(default)]
    allow_partial: bool,
    #[serde(default)]
    publishers: BTreeMap<String, RawPublisher>,
    #[serde(default)]
    rule: Vec<RawRule>,
    #[serde(default)]
    revoked: RawRevoked,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPublisher {
    keys: Vec<RawKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    id: String,
    ed25519: String,
    #[serde(default)]
    not_after: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    scope: Vec<String>,
    #[serde(default)]
    require: Vec<String>,
    #[serde(default)]
    threshold: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRevoked {
    #[serde(default)]
    keys: Vec<String>,
    #[serde(default)]
    artifacts: Vec<String>,
}

/// The algorithm byte `wasmsign2::PublicKey::from_bytes` expects before
/// the 32 key bytes (`to_bytes` writes it; Ed25519 is 0x01).
const ED25519_ALG: u8 = 0x01;

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl TrustPolicy {
    /// No checks (today's behaviour without `--trust`).
    pub fn off() -> TrustPolicy {
        TrustPolicy {
            file: None,
            level: Level::Off,
            allow_partial: false,
            keys: Vec::new(),
            publishers: Vec::new(),
            rules: Vec::new(),
            revoked_keys: BTreeSet::new(),
            revoked_artifacts: BTreeSet::new(),
        }
    }

    /// Reads and checks the trust file `path`.
    pub fn load(path: &Path) -> Result<TrustPolicy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError {
            file: path.to_path_buf(),
            table: String::new(),
            key: None,
            message: format!("cannot read: {e}"),
        })?;
        TrustPolicy::parse(path, &text)
    }

    /// Parses `text` as the trust file `path` (named in errors).
    pub fn parse(path: &Path, text: &str) -> Result<TrustPolicy, PolicyError> {
        let err = |table: &str, key: Option<&str>, message: String| PolicyError {
            file: path.to_path_buf(),
            table: table.to_string(),
            key: key.map(str::to_string),
            message,
        };
        let de =
            toml::Deserializer::parse(text).map_err(|e| err("", None, one_line(&e.to_string())))?;
        let raw: RawPolicy = serde_path_to_error::deserialize(de).map_err(|e| {
            let mut segments: Vec<String> = e
                .path()
                .iter()
                .filter_map(|s| match s {
                    serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                    serde_path_to_error::Segment::Seq { index } => Some(format!("[{}]", index + 1)),
                    _ => None,
                })
                .collect();
            let message = one_line(e.inner().message());
            let unknown = message
                .strip_prefix("unknown field `")
                .and_then(|rest| rest.split('`').next())
                .map(str::to_string);
            let key = match unknown {
                Some(k) => {
                    if segments.last() == Some(&k) {
                        segments.pop();
                    }
                    Some(k)
                }
                None => segments.pop(),
            };
            let table = segments.iter().fold(String::new(), |mut acc, s| {
                if !acc.is_empty() && !s.starts_with('[') {
                    acc.push('.');
                }
                acc.push_str(s);
                acc
            });
            err(&table, key.as_deref(), message)
        })?;

        let mut keys: Vec<TrustedKey> = Vec::new();
        for (name, publisher) in &raw.publishers {
            let table = format!("publishers.{name}");
            if publisher.keys.is_empty() {
                return Err(err(
                    &table,
                    Some("keys"),
                    "a publisher needs at least one key".into(),
                ));
            }
            for (i, k) in publisher.keys.iter().enumerate() {
                let table = format!("{table}.keys[{}]", i + 1);
                if k.id.trim().is_empty() {
                    return Err(err(&table, Some("id"), "is empty".into()));
                }
                if let Some(other) = keys.iter().find(|o| o.id == k.id) {
                    return Err(err(
                        &table,
                        Some("id"),
                        format!("key id {:?} is also a key of {}", k.id, other.publisher),
                    ));
                }
                let bytes = BASE64
                    .decode(k.ed25519.trim())
                    .ok()
                    .filter(|b| b.len() == 32)
                    .ok_or_else(|| {
                        err(
                            &table,
                            Some("ed25519"),
                            "not a 32-byte Ed25519 public key in base64".into(),
                        )
                    })?;
                let public =
                    wasmsign2::PublicKey::from_bytes(&[&[ED25519_ALG][..], &bytes].concat())
                        .map_err(|_| {
                            err(&table, Some("ed25519"), "not an Ed25519 public key".into())
                        })?;
                let fingerprint = key_id(&bytes);
                if let Some(other) = keys.iter().find(|o| o.fingerprint == fingerprint) {
                    // One key under two names would count twice toward a threshold.
                    return Err(err(
                        &table,
                        Some("ed25519"),
                        format!(
                            "the same public key as key {:?} of {}",
                            other.id, other.publisher
                        ),
                    ));
                }
                let not_after = match &k.not_after {
                    None => None,
                    Some(d) => Some(Date::parse(d).ok_or_else(|| {
                        err(
                            &table,
                            Some("not_after"),
                            format!("{d:?} is not a date (YYYY-MM-DD)"),
                        )
                    })?),
                };
                keys.push(TrustedKey {
                    publisher: name.clone(),
                    id: k.id.clone(),
                    fingerprint,
                    public,
                    not_after,
                });
            }
        }
        let publishers: Vec<String> = raw.publishers.keys().cloned().collect();

        let mut rules = Vec::with_capacity(raw.rule.len());
        for (i, r) in raw.rule.into_iter().enumerate() {
            let table = format!("rule[{}]", i + 1);
            if r.scope.is_empty() {
                return Err(err(
                    &table,
                    Some("scope"),
                    "is empty: give tool names, \"*\" or oci:// references".into(),
                ));
            }
            for pattern in &r.scope {
                let body = pattern.strip_suffix('*').unwrap_or(pattern);
                if body.contains('*') || (pattern.is_empty()) {
                    return Err(err(
                        &table,
                        Some("scope"),
                        format!("{pattern:?}: only a trailing * is allowed"),
                    ));
                }
                if pattern.starts_with("oci://") && body.len() <= "oci://".len() {
                    return Err(err(
                        &table,
                        Some("scope"),
                        format!("{pattern:?}: name a registry host and repository"),
                    ));
                }
            }
            if r.require.is_empty() && r.threshold.is_none() {
                return Err(err(
                    &table,
                    None,
                    "requires nothing: give require = [publishers] and/or threshold = N".into(),
                ));
            }
            for p in &r.require {
                if !raw.publishers.contains_key(p) {
                    return Err(err(
                        &table,
                        Some("require"),
                        format!("{p:?} is not a publisher of this file"),
                    ));
                }
            }
            let mut seen = BTreeSet::new();
            if let Some(p) = r.require.iter().find(|p| !seen.insert(*p)) {
                return Err(err(
                    &table,
                    Some("require"),
                    format!("{p:?} is listed twice"),
                ));
            }
            if let Some(n) = r.threshold
                && (n == 0 || n > publishers.len())
            {
                return Err(err(
                    &table,
                    Some("threshold"),
                    format!(
                        "{n}: must be between 1 and the number of publishers ({})",
                        publishers.len()
                    ),
                ));
            }
            rules.push(Rule {
                scope: r.scope,
                require: r.require,
                threshold: r.threshold,
            });
        }

        let mut revoked_keys = BTreeSet::new();
        for k in raw.revoked.keys {
            let known = keys.iter().any(|t| t.id == k || t.fingerprint == k);
            let fingerprint = k.len() == 16 && k.bytes().all(|b| b.is_ascii_hexdigit());
            if !known && !fingerprint {
                return Err(err(
                    "revoked",
                    Some("keys"),
                    format!(
                        "{k:?} is neither a key id of this file nor a key fingerprint (16 hex characters)"
                    ),
                ));
            }
            revoked_keys.insert(k);
        }
        let mut revoked_artifacts = BTreeSet::new();
        for a in raw.revoked.artifacts {
            let hex = a.strip_prefix("blake3:").filter(|h| {
                h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            });
            match hex {
                Some(h) => revoked_artifacts.insert(h.to_string()),
                None => {
                    return Err(err(
                        "revoked",
                        Some("artifacts"),
                        format!("{a:?} is not blake3:<64 lowercase hex>"),
                    ));
                }
            };
        }
        Ok(TrustPolicy {
            file: Some(path.to_path_buf()),
            level: raw.level,
            allow_partial: raw.allow_partial,
            keys,
            publishers,
            rules,
            revoked_keys,
            revoked_artifacts,
        })
    }

    /// Whether `key` is revoked (by its id here or its fingerprint).
    pub fn is_revoked(&self, key: &TrustedKey) -> bool {
        self.revoked_keys.contains(&key.id) || self.revoked_keys.contains(&key.fingerprint)
    }
}
