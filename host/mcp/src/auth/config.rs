//! The `--auth-config` file of `--auth jwt`: TOML, unknown keys refused,
//! every error naming the file and the key.
//!
//! ```toml
//! issuer = "https://id.example"               # the `iss` every token must carry
//! audience = "https://mcp.example/mcp"         # this resource's URL: the `aud`
//! agent_claim = "sub"                          # the claim naming the agent
//! scope_claim = "scope"                        # a space-separated string or a list
//! clock_skew_secs = 60                         # exp/nbf tolerance, at most 300
//! algorithms = ["RS256", "ES256", "EdDSA"]     # a subset of these three
//! authorization_servers = ["https://id.example"]  # RFC 9728 metadata; default [issuer]
//! calls_per_minute = 600                       # per agent (optional)
//! max_concurrent = 16                          # per agent (optional)
//! tool_calls_per_minute = { "web.fetch" = 10 } # per agent and tool (optional)
//!
//! [jwks]
//! url = "https://id.example/.well-known/jwks.json"  # or: file = "jwks.json"
//! ca_file = "id-ca.pem"                        # trust only this CA for `url`
//! cache_secs = 300                             # refetch after this long
//! min_refetch_secs = 30                        # at most one fetch per this long
//!
//! [scopes."mcp:forge"]                         # optional: scope -> tiers, tools
//! tiers = ["session"]
//! tools = ["github.*"]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jsonwebtoken::Algorithm;
use serde::Deserialize;
use url::Url;

use super::provider::ALGORITHMS;
use crate::access::Access;

/// Largest `clock_skew_secs` accepted.
pub const MAX_CLOCK_SKEW_SECS: u64 = 300;
/// `clock_skew_secs` when not given.
pub const DEFAULT_CLOCK_SKEW_SECS: u64 = 60;
/// `jwks.cache_secs` when not given.
pub const DEFAULT_CACHE_SECS: u64 = 300;
/// `jwks.min_refetch_secs` when not given.
pub const DEFAULT_MIN_REFETCH_SECS: u64 = 30;

/// Why an auth config was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("auth config: cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, or not the format (an unknown key, a wrong type, a missing
    /// key): the parser's message names the key, line and column.
    #[error("auth config: {path}: {message}")]
    Syntax {
        /// The file.
        path: String,
        /// The parser's message.
        message: String,
    },
    /// A value that parses but is not allowed.
    #[error("auth config: {path}: {key}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// The key, dotted (`jwks.url`, `scopes."mcp:forge".tiers`).
        key: String,
        /// What is wrong.
        reason: String,
    },
}

/// Where the key set comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum JwksSource {
    /// A local file (air-gapped), re-read as a fetch would be.
    File(PathBuf),
    /// An HTTPS URL.
    Url(Url),
}

/// The `[jwks]` table.
#[derive(Debug, Clone)]
pub struct JwksConfig {
    /// File or URL.
    pub source: JwksSource,
    /// PEM roots to trust for `url` instead of the built-in ones.
    pub ca_file: Option<PathBuf>,
    /// A fetched set is used for this long, then fetched again.
    pub cache_for: Duration,
    /// At most one fetch per this long (an unknown `kid` asks for one).
    pub min_refetch: Duration,
}

/// What a scope grants.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeGrant {
    /// The tiers.
    pub access: Access,
    /// The hub tools (globs); `None`: no narrowing.
    pub tools: Option<Vec<String>>,
}

/// A checked `--auth-config` file.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// The file it came from.
    pub path: PathBuf,
    /// The required `iss`.
    pub issuer: String,
    /// The required `aud`, exactly as written: this resource's URL (the
    /// RFC 9728 `resource`).
    pub audience: String,
    /// `audience` parsed (for the metadata URL; its normalized form, with a
    /// `/` added to a bare origin, is not what tokens are compared with).
    pub audience_url: Url,
    /// The claim naming the agent.
    pub agent_claim: String,
    /// The claim holding the scopes.
    pub scope_claim: String,
    /// Tolerance on `exp` and `nbf`, seconds.
    pub clock_skew_secs: u64,
    /// The accepted algorithms.
    pub algorithms: Vec<Algorithm>,
    /// RFC 9728 `authorization_servers`.
    pub authorization_servers: Vec<String>,
    /// Per-agent `tools/call` quota per minute.
    pub calls_per_minute: Option<u32>,
    /// Per-agent cap on requests in flight.
    pub max_concurrent: Option<u32>,
    /// Per-agent, per-tool quotas (`tool_calls_per_minute`).
    pub tool_calls_per_minute: crate::tool_quotas::ToolQuotas,
    /// The key set.
    pub jwks: JwksConfig,
    /// Scope → grant; `None`: any valid token gets every tier.
    pub scopes: Option<BTreeMap<String, ScopeGrant>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    issuer: String,
    audience: String,
    agent_claim: Option<String>,
    scope_claim: Option<String>,
    clock_skew_secs: Option<u64>,
    algorithms: Option<Vec<String>>,
    authorization_servers: Option<Vec<String>>,
    calls_per_minute: Option<u32>,
    max_concurrent: Option<u32>,
    #[serde(default)]
    tool_calls_per_minute: BTreeMap<String, u32>,
    jwks: RawJwks,
    scopes: Option<BTreeMap<String, RawScope>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJwks {
    file: Option<PathBuf>,
    url: Option<String>,
    ca_file: Option<PathBuf>,
    cache_secs: Option<u64>,
    min_refetch_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScope {
    tiers: Vec<String>,
    tools: Option<Vec<String>>,
}

impl JwtConfig {
    /// Reads and checks `path` (relative `jwks.file` and `jwks.ca_file`
    /// are taken from the file's directory).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Checks the text of a config file named `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let name = path.display().to_string();
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: name.clone(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let bad = |key: &str, reason: String| ConfigError::Invalid {
            path: name.clone(),
            key: key.to_string(),
            reason,
        };
        if raw.issuer.trim().is_empty() {
            return Err(bad("issuer", "empty".into()));
        }
        let audience_url =
            Url::parse(&raw.audience).map_err(|e| bad("audience", format!("not a URL: {e}")))?;
        if !matches!(audience_url.scheme(), "https" | "http")
            || audience_url.host().is_none()
            || audience_url.fragment().is_some()
            || !audience_url.username().is_empty()
            || audience_url.password().is_some()
        {
            return Err(bad(
                "audience",
                "must be this resource's http(s) URL, with no fragment and no credentials".into(),
            ));
        }
        let claim = |key: &str, v: Option<String>, default: &str| match v {
            Some(c) if c.trim().is_empty() => Err(bad(key, "empty".into())),
            Some(c) => Ok(c),
            None => Ok(default.to_string()),
        };
        let agent_claim = claim("agent_claim", raw.agent_claim, "sub")?;
        let scope_claim = claim("scope_claim", raw.scope_claim, "scope")?;
        let clock_skew_secs = raw.clock_skew_secs.unwrap_or(DEFAULT_CLOCK_SKEW_SECS);
        if clock_skew_secs > MAX_CLOCK_SKEW_SECS {
            return Err(bad(
                "clock_skew_secs",
                format!("{clock_skew_secs} is over the cap of {MAX_CLOCK_SKEW_SECS}"),
            ));
        }
        let algorithms = match raw.algorithms {
            None => ALGORITHMS.to_vec(),
            Some(list) if list.is_empty() => {
                return Err(bad(
                    "algorithms",
                    "the list is empty (omit it for all)".into(),
                ));
            }
            Some(list) => list
                .iter()
                .map(|a| {
                    ALGORITHMS
                        .into_iter()
                        .find(|known| format!("{known:?}") == *a)
                        .ok_or_else(|| {
                            bad(
                                "algorithms",
                                format!("{a:?} is not accepted (RS256, ES256, EdDSA)"),
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        let authorization_servers = match raw.authorization_servers {
            None => vec![raw.issuer.clone()],
            Some(list) if list.is_empty() => {
                return Err(bad(
                    "authorization_servers",
                    "the list is empty (omit it for [issuer])".into(),
                ));
            }
            Some(list) => list,
        };
        for (key, v) in [
            ("calls_per_minute", raw.calls_per_minute),
            ("max_concurrent", raw.max_concurrent),
        ] {
            if v == Some(0) {
                return Err(bad(key, "must be at least 1".into()));
            }
        }
        let tool_calls_per_minute =
            crate::tool_quotas::ToolQuotas::parse(raw.tool_calls_per_minute)
                .map_err(|(key, reason)| bad(&key, reason))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let jwks = jwks_config(raw.jwks, dir, &bad)?;
        let scopes = match raw.scopes {
            None => None,
            Some(map) => {
                let mut out = BTreeMap::new();
                for (scope, s) in map {
                    let key = |field: &str| format!("scopes.{scope:?}.{field}");
                    // RFC 6749 §3.3 scope-token: it goes into challenges.
                    if scope.is_empty()
                        || !scope.bytes().all(|b| {
                            b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b)
                        })
                    {
                        return Err(bad(
                            &format!("scopes.{scope:?}"),
                            "not a scope token (printable ASCII, no space, quote or backslash)"
                                .into(),
                        ));
                    }
                    let access =
                        crate::tokens::access_of(&s.tiers).map_err(|r| bad(&key("tiers"), r))?;
                    if let Some(tools) = &s.tools {
                        temper_policy::ToolAllow::new(tools.clone())
                            .map_err(|e| bad(&key("tools"), e.to_string()))?;
                    }
                    out.insert(
                        scope,
                        ScopeGrant {
                            access,
                            tools: s.tools,
                        },
                    );
                }
                Some(out)
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            issuer: raw.issuer,
            audience: raw.audience,
            audience_url,
            agent_claim,
            scope_claim,
            clock_skew_secs,
            algorithms,
            authorization_servers,
            calls_per_minute: raw.calls_per_minute,
            max_concurrent: raw.max_concurrent,
            tool_calls_per_minute,
            jwks,
            scopes,
        })
    }
}

fn jwks_config(
    raw: RawJwks,
    dir: &Path,
    bad: &dyn Fn(&str, String) -> ConfigError,
) -> Result<JwksConfig, ConfigError> {
    let source = match (raw.file, raw.url) {
        (Some(file), None) => {
            if raw.ca_file.is_some() {
                return Err(bad("jwks.ca_file", "only with jwks.url".into()));
            }
            JwksSource::File(dir.join(file))
        }
        (None, Some(url)) => {
            let url = Url::parse(&url).map_err(|e| bad("jwks.url", format!("not a URL: {e}")))?;
            if url.scheme() != "https" {
                return Err(bad("jwks.url", "must be https".into()));
            }
            if !url.username().is_empty() || url.password().is_some() {
                return Err(bad(
                    "jwks.url",
                    "must not carry credentials (a key set is public)".into(),
                ));
            }
            JwksSource::Url(url)
        }
        (Some(_), Some(_)) => return Err(bad("jwks", "give file or url, not both".into())),
        (None, None) => return Err(bad("jwks", "give file or url".into())),
    };
    let secs = |key: &str, v: Option<u64>, default: u64, max: u64| match v.unwrap_or(default) {
        n if (1..=max).contains(&n) => Ok(Duration::from_secs(n)),
        n => Err(bad(key, format!("{n} is not within 1..={max}"))),
    };
    let cache_for = secs(
        "jwks.cache_secs",
        raw.cache_secs,
        DEFAULT_CACHE_SECS,
        86_400,
    )?;
    let min_refetch = secs(
        "jwks.min_refetch_secs",
        raw.min_refetch_secs,
        DEFAULT_MIN_REFETCH_SECS,
        3_600,
    )?;
    Ok(JwksConfig {
        source,
        ca_file: raw.ca_file.map(|f| dir.join(f)),
        cache_for: cache_for.max(min_refetch),
        min_refetch,
    })
}
