//! Bearer tokens for `temper mcp --http` (`--tokens FILE`): who a caller
//! is, what it may use and how much.
//!
//! The file is TOML. Each table under `tokens` is keyed by the *hash* of a
//! token, never the token itself: `"sha256:HEX"` or `"blake3:HEX"` (64 hex
//! digits). Unknown keys are errors.
//!
//! ```toml
//! [tokens."sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"]
//! agent = "alice"                      # the agent this token acts as
//! tiers = ["session", "agent", "shared"] # optional; default: all three
//! calls_per_minute = 120               # optional tools/call quota; default: none
//! tool_calls_per_minute = { "web.fetch" = 10 } # optional per-tool quotas
//! max_concurrent = 8                   # optional; default: the server's --max-concurrent
//! tools = ["github.*"]                 # optional; narrows the policy's [tools] allow
//! resources = ["docs.*"]               # optional; narrows the policy's [resources] allow
//! prompts = ["docs.*"]                 # optional; narrows the policy's [prompts] allow
//! ```
//!
//! Make a hash with `printf %s "$TOKEN" | sha256sum` (or `b3sum`). A
//! presented token is hashed with both functions and looked up; no token is
//! ever kept or logged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::Digest;

use super::access::Access;

/// Longest agent id accepted.
pub const MAX_AGENT_LEN: usize = 128;

/// Why a tokens file was refused. Every variant names the file or the
/// entry at fault.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// The file could not be read.
    #[error("tokens: cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, or not the format (an unknown key, a wrong type).
    #[error("tokens: {path}: {message}")]
    Syntax {
        /// The file (`<text>` when parsed from a string).
        path: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A key that is not `sha256:HEX` or `blake3:HEX` with 64 hex digits.
    #[error(
        "tokens: bad key {key:?}: {reason} (expected \"sha256:<64 hex>\" or \"blake3:<64 hex>\", the hash of the token, never the token)"
    )]
    BadKey {
        /// The key as written.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The same hash twice (the keys differ only in case).
    #[error("tokens: {key:?} appears twice")]
    Duplicate {
        /// The key.
        key: String,
    },
    /// An empty, overlong or control-character agent id.
    #[error("tokens: {key:?}: bad agent id {agent:?}: {reason}")]
    BadAgent {
        /// The entry.
        key: String,
        /// The agent id as written.
        agent: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A tier other than `session`, `agent`, `shared`, or an empty list.
    #[error("tokens: {key:?}: bad tiers: {reason}")]
    BadTiers {
        /// The entry.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A `tools` list entry that is not a tool name or glob.
    #[error("tokens: {key:?}: bad tools: {reason}")]
    BadTools {
        /// The entry.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A `tool_calls_per_minute` entry that is not a tool name with a
    /// limit of at least 1.
    #[error("tokens: {key:?}: bad {field}: {reason}")]
    BadToolQuota {
        /// The entry.
        key: String,
        /// The key at fault (`tool_calls_per_minute."NAME"`).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// `calls_per_minute` or `max_concurrent` is 0.
    #[error("tokens: {key:?}: {field} must be at least 1")]
    Zero {
        /// The entry.
        key: String,
        /// The field.
        field: &'static str,
    },
}

/// A hash function tokens may be stored under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashAlgo {
    /// SHA-256.
    Sha256,
    /// BLAKE3 (32-byte output).
    Blake3,
}

impl HashAlgo {
    /// `algo:hex` of `token`, the form the file's keys take.
    pub fn key_of(self, token: &str) -> String {
        let (name, digest) = (self.name(), self.digest(token));
        format!("{name}:{}", hex(&digest))
    }

    fn name(self) -> &'static str {
        match self {
            HashAlgo::Sha256 => "sha256",
            HashAlgo::Blake3 => "blake3",
        }
    }

    fn digest(self, token: &str) -> [u8; 32] {
        match self {
            HashAlgo::Sha256 => sha2::Sha256::digest(token.as_bytes()).into(),
            HashAlgo::Blake3 => *blake3::hash(token.as_bytes()).as_bytes(),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One token's grant.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenEntry {
    /// The key it is stored under (`sha256:...`), lowercase: the token's
    /// identity in logs and limits (never the token).
    pub key: String,
    /// The agent the token acts as.
    pub agent: String,
    /// The tiers it may use.
    pub access: Access,
    /// Its `tools/call` quota per minute, if any.
    pub calls_per_minute: Option<u32>,
    /// Its concurrency cap, if it has its own.
    pub max_concurrent: Option<u32>,
    /// Its per-tool quotas (`tool_calls_per_minute`).
    pub tool_calls_per_minute: crate::tool_quotas::ToolQuotas,
    /// The hub tools it may use, narrowing the host policy's `[tools]
    /// allow` (a hub tool must be allowed by both); `None`: the policy's.
    pub tools: Option<temper_policy::ToolAllow>,
    /// The hub's resources it may list and read (exposed URIs and URI
    /// templates), narrowing the host policy's `[resources] allow`.
    pub resources: Option<temper_policy::ToolAllow>,
    /// The hub's prompts it may list and get (exposed names), narrowing
    /// the host policy's `[prompts] allow`.
    pub prompts: Option<temper_policy::ToolAllow>,
}

/// A parsed tokens file.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    by_hash: HashMap<(HashAlgo, [u8; 32]), TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    tokens: std::collections::BTreeMap<String, RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    agent: String,
    tiers: Option<Vec<String>>,
    calls_per_minute: Option<u32>,
    max_concurrent: Option<u32>,
    #[serde(default)]
    tool_calls_per_minute: std::collections::BTreeMap<String, u32>,
    tools: Option<Vec<String>>,
    resources: Option<Vec<String>>,
    prompts: Option<Vec<String>>,
}

impl Tokens {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<Self, TokensError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokensError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse_named(&text, &path.display().to_string())
    }

    /// Parses the text of a tokens file.
    pub fn parse(text: &str) -> Result<Self, TokensError> {
        Self::parse_named(text, "<text>")
    }

    fn parse_named(text: &str, name: &str) -> Result<Self, TokensError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| TokensError::Syntax {
            path: name.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let mut by_hash = HashMap::new();
        for (key, entry) in raw.tokens {
            let (algo, digest) = parse_key(&key)?;
            let key = format!("{}:{}", algo.name(), hex(&digest));
            check_agent(&key, &entry.agent)?;
            let access = match &entry.tiers {
                None => Access::ALL,
                Some(tiers) => parse_tiers(&key, tiers)?,
            };
            for (field, v) in [
                ("calls_per_minute", entry.calls_per_minute),
                ("max_concurrent", entry.max_concurrent),
            ] {
                if v == Some(0) {
                    return Err(TokensError::Zero { key, field });
                }
            }
            let tool_calls_per_minute = crate::tool_quotas::ToolQuotas::parse(
                entry.tool_calls_per_minute,
            )
            .map_err(|(field, reason)| TokensError::BadToolQuota {
                key: key.clone(),
                field,
                reason,
            })?;
            let tools = entry
                .tools
                .map(temper_policy::ToolAllow::new)
                .transpose()
                .map_err(|e| TokensError::BadTools {
                    key: key.clone(),
                    reason: e.to_string(),
                })?;
            let narrowing = |field: &str, list: Option<Vec<String>>| {
                list.map(|l| temper_policy::ToolAllow::for_key(field, "a name", l))
                    .transpose()
                    .map_err(|e| TokensError::BadTools {
                        key: key.clone(),
                        reason: e.to_string(),
                    })
            };
            let resources = narrowing("resources", entry.resources)?;
            let prompts = narrowing("prompts", entry.prompts)?;
            let grant = TokenEntry {
                key: key.clone(),
                agent: entry.agent,
                access,
                calls_per_minute: entry.calls_per_minute,
                max_concurrent: entry.max_concurrent,
                tool_calls_per_minute,
                tools,
                resources,
                prompts,
            };
            if by_hash.insert((algo, digest), grant).is_some() {
                return Err(TokensError::Duplicate { key });
            }
        }
        Ok(Self { by_hash })
    }

    /// The grant of `token`, if the file has its hash.
    pub fn authenticate(&self, token: &str) -> Option<&TokenEntry> {
        [HashAlgo::Sha256, HashAlgo::Blake3]
            .into_iter()
            .find_map(|algo| self.by_hash.get(&(algo, algo.digest(token))))
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// The agents the tokens act for, each once, in order.
    pub fn agents(&self) -> std::collections::BTreeSet<&str> {
        self.by_hash.values().map(|e| e.agent.as_str()).collect()
    }
}

fn parse_key(key: &str) -> Result<(HashAlgo, [u8; 32]), TokensError> {
    let bad = |reason| TokensError::BadKey {
        key: key.to_string(),
        reason,
    };
    let (algo, hex) = key
        .split_once(':')
        .ok_or_else(|| bad("no algorithm prefix"))?;
    let algo = match algo.to_ascii_lowercase().as_str() {
        "sha256" => HashAlgo::Sha256,
        "blake3" => HashAlgo::Blake3,
        _ => return Err(bad("unknown hash algorithm")),
    };
    if hex.len() != 64 {
        return Err(bad("the hash must have 64 hex digits"));
    }
    let mut digest = [0u8; 32];
    for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).map_err(|_| bad("not hex"))?;
        digest[i] = u8::from_str_radix(s, 16).map_err(|_| bad("not hex"))?;
    }
    Ok((algo, digest))
}

/// What is wrong with `agent` as an agent id (empty, overlong, control
/// characters), if anything: the rule for tokens-file entries and for the
/// agent claim of a JWT alike.
pub(crate) fn agent_problem(agent: &str) -> Option<&'static str> {
    if agent.trim().is_empty() {
        Some("empty")
    } else if agent.len() > MAX_AGENT_LEN {
        Some("longer than 128 bytes")
    } else if agent.chars().any(char::is_control) {
        Some("control characters")
    } else {
        None
    }
}

fn check_agent(key: &str, agent: &str) -> Result<(), TokensError> {
    match agent_problem(agent) {
        None => Ok(()),
        Some(reason) => Err(TokensError::BadAgent {
            key: key.to_string(),
            agent: agent.to_string(),
            reason,
        }),
    }
}

fn parse_tiers(key: &str, tiers: &[String]) -> Result<Access, TokensError> {
    access_of(tiers).map_err(|reason| TokensError::BadTiers {
        key: key.to_string(),
        reason,
    })
}

/// The access a list of tier names (`session`, `agent`, `shared`) grants;
/// an empty list or an unknown name is an error saying so.
pub(crate) fn access_of(tiers: &[String]) -> Result<Access, String> {
    if tiers.is_empty() {
        return Err("the list is empty (omit it for all tiers)".into());
    }
    let mut access = Access {
        session: false,
        agent: false,
        shared: false,
    };
    for t in tiers {
        match t.as_str() {
            "session" => access.session = true,
            "agent" => access.agent = true,
            "shared" => access.shared = true,
            other => {
                return Err(format!("unknown tier {other:?} (session, agent, shared)"));
            }
        }
    }
    Ok(access)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/tokens")
            .join(name)
    }

    #[test]
    fn loads_the_example() {
        let t = Tokens::load(&fixture("good.toml")).unwrap();
        assert_eq!(t.len(), 3);
        // The fixture stores sha256("alice-token") and blake3("bob-token").
        let alice = t.authenticate("alice-token").unwrap();
        assert_eq!(alice.agent, "alice");
        assert_eq!(alice.access, Access::ALL);
        assert_eq!(alice.calls_per_minute, None);
        assert_eq!(alice.key, HashAlgo::Sha256.key_of("alice-token"));
        let bob = t.authenticate("bob-token").unwrap();
        assert_eq!(bob.agent, "bob");
        assert_eq!(bob.calls_per_minute, Some(30));
        assert_eq!(bob.max_concurrent, Some(4));
        assert_eq!(
            bob.access,
            Access {
                session: true,
                agent: false,
                shared: true
            }
        );
        let carol = t.authenticate("carol-token").unwrap();
        assert_eq!(carol.agent, "carol");
        assert!(t.authenticate("wrong").is_none());
        assert!(t.authenticate("").is_none());
        // The hash itself is not a token.
        let hash = HashAlgo::Sha256.key_of("alice-token");
        assert!(t.authenticate(&hash).is_none());
        assert!(t.authenticate(hash.trim_start_matches("sha256:")).is_none());
    }

    #[test]
    fn refuses_bad_files_by_name() {
        let err = |name: &str| Tokens::load(&fixture(name)).unwrap_err();
        assert!(
            matches!(err("bad_plain_token.toml"), TokensError::BadKey { reason, .. } if reason == "no algorithm prefix")
        );
        assert!(matches!(
            err("bad_short_hash.toml"),
            TokensError::BadKey { .. }
        ));
        assert!(
            matches!(err("bad_algo.toml"), TokensError::BadKey { reason, .. } if reason == "unknown hash algorithm")
        );
        assert!(
            matches!(err("bad_tier.toml"), TokensError::BadTiers { reason, .. } if reason.contains("\"global\""))
        );
        assert!(matches!(
            err("bad_empty_agent.toml"),
            TokensError::BadAgent { .. }
        ));
        assert!(matches!(
            err("bad_zero_quota.toml"),
            TokensError::Zero {
                field: "calls_per_minute",
                ..
            }
        ));
        assert!(matches!(
            err("bad_duplicate.toml"),
            TokensError::Duplicate { .. }
        ));
        let e = err("bad_unknown_key.toml");
        assert!(matches!(e, TokensError::Syntax { .. }), "{e}");
        assert!(e.to_string().contains("quota"), "{e}");
        assert!(matches!(
            Tokens::load(&fixture("missing.toml")).unwrap_err(),
            TokensError::Read { .. }
        ));
    }

    #[test]
    fn empty_file_has_no_tokens() {
        assert!(Tokens::parse("").unwrap().is_empty());
    }

    #[test]
    fn tokens_may_narrow_hub_resources_and_prompts() {
        let hash = HashAlgo::Sha256.key_of("t");
        let t = Tokens::parse(&format!(
            "[tokens.\"{hash}\"]\nagent = \"a\"\nresources = [\"docs.demo://*\"]\nprompts = [\"docs.simple-*\"]\n"
        ))
        .unwrap();
        let entry = t.authenticate("t").unwrap();
        let resources = entry.resources.clone().unwrap();
        assert!(resources.allows("docs.demo://resource/static/a.md"));
        assert!(!resources.allows("other.demo://x"));
        let prompts = entry.prompts.clone().unwrap();
        assert!(prompts.allows("docs.simple-prompt"));
        assert!(!prompts.allows("docs.args-prompt"));
        assert_eq!(entry.tools, None);
        let err = Tokens::parse(&format!(
            "[tokens.\"{hash}\"]\nagent = \"a\"\nprompts = [\"a b\"]\n"
        ))
        .unwrap_err();
        assert!(matches!(err, TokensError::BadTools { .. }), "{err}");
    }

    #[test]
    fn tokens_may_narrow_hub_tools() {
        let hash = HashAlgo::Sha256.key_of("t");
        let t = Tokens::parse(&format!(
            "[tokens.\"{hash}\"]\nagent = \"a\"\ntools = [\"github.*\"]\n"
        ))
        .unwrap();
        let tools = t.authenticate("t").unwrap().tools.clone().unwrap();
        assert!(tools.allows("github.search_issues"));
        assert!(!tools.allows("web_search"));
        let none = Tokens::parse(&format!("[tokens.\"{hash}\"]\nagent = \"a\"\n")).unwrap();
        assert_eq!(none.authenticate("t").unwrap().tools, None);
        let err = Tokens::parse(&format!(
            "[tokens.\"{hash}\"]\nagent = \"a\"\ntools = [\"\"]\n"
        ))
        .unwrap_err();
        assert!(matches!(err, TokensError::BadTools { .. }), "{err}");
    }
}
