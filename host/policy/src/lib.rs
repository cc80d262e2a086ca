//! The host's capability policy: what a tool may be granted, deny by default.
//!
//! A tool declares an `allowlist` of capability names (`fetch`,
//! `fs.readFile`, `crypto`); the host has its own [`HostPolicy`]; the tool
//! gets the intersection ([`HostPolicy::grants`]). A capability the tool
//! lists but the host does not allow is an error naming it, never a silent
//! downgrade. This module only parses and matches; it does no I/O besides
//! [`HostPolicy::from_file`] and no networking.
//!
//! # Policy file (TOML)
//!
//! ```toml
//! # Capabilities the host allows at all. Anything not listed is denied.
//! allow = ["fetch", "fs.readFile", "crypto"]
//!
//! [fetch]
//! # Hosts a tool may reach; rule syntax in the `domain` module docs.
//! # Missing or `[]` means no host at all.
//! domains = ["api.example.test", "*.cdn.example.test", "https://secure.example.test", "api.example.test:8443"]
//! allow_private = false        # names resolving to private/loopback/... addresses are refused
//! max_redirects = 5            # defaults shown
//! max_request_body = 1048576   # 1 MiB
//! max_response_body = 8388608  # 8 MiB
//! max_headers = 64
//! max_header_bytes = 16384     # 16 KiB
//! max_url_bytes = 8192         # 8 KiB; longer URLs are refused before anything else
//!
//! # Directories `fs.readFile` may read, one table per directory.
//! [[read]]
//! host = "./data"      # host path, kept as written (the runtime resolves it)
//! guest = "/data"      # where the tool sees it; optional, default "/" + last component of `host`
//!
//! [limits]             # all optional; unset means the runtime default
//! timeout_ms = 5000
//! memory_mb = 64
//! max_output_bytes = 1048576
//!
//! [tools]              # hub tools agents may use (see temper-hub); default none
//! allow = ["web_search", "github.*", "http_request"]
//!
//! [resources]          # upstream resources a gateway serves (exposed URIs); default none
//! allow = ["docs.*"]
//!
//! [prompts]            # upstream prompts a gateway serves (exposed names); default none
//! allow = ["docs.*"]
//!
//! [run_code]           # capabilities code-mode runs (`run_code`) get; default none
//! allow = ["crypto"]   # each must also be in the top-level `allow`
//!
//! [determinism]        # deterministic mode; leave the section out for real clocks
//! enabled = true       # default true once the section is written
//! seed = 42            # seeds every random source a tool can read; default 0
//! epoch_ms = 1700000000000  # what Date.now() returns; default 0 (the Unix epoch)
//! ```
//!
//! Rules of the format:
//!
//! * Unknown keys anywhere are errors that name the key (typos never pass).
//! * Every domain rule is validated (syntax: [`domain`]); a malformed one is
//!   [`PolicyError::BadDomainRule`] naming the rule, never a silent allow.
//! * A `[fetch]` section with domains, or any `[[read]]` entry, while `allow`
//!   does not list the matching capability is an error
//!   ([`PolicyError::SectionWithoutCapability`]) rather than ignored
//!   configuration.
//! * Limits, when given, must be greater than zero.
//! * `determinism.epoch_ms` must be a date JavaScript can represent
//!   (at most 8.64e15 ms, [`MAX_EPOCH_MS`]); `seed` is a non-negative integer.
//! * An empty file is [`HostPolicy::deny_all`].
//!
//! # Deterministic mode
//!
//! With a [`Determinism`] in the policy (`[determinism]`, the
//! `--deterministic[=SEED]` flag or [`HostPolicy::with_determinism`]) every
//! call sees the same time and the same random numbers, on every run and
//! every machine, for the same artifact and seed:
//!
//! * the wall clock stands at `epoch_ms` (`Date.now()`, `new Date()`);
//! * the monotonic clock stands still at a value derived from the seed;
//! * `wasi:random` (secure and insecure) and the `crypto` capability's
//!   random bytes (`crypto.randomUUID()`, `crypto.getRandomValues()`,
//!   `crypto.randomBytes()`) come from generators seeded with `seed`;
//! * `Math.random()` seeds itself from the monotonic clock on its first use
//!   in a call, so it repeats too and changes with the seed.
//!
//! Time does not pass inside a call: code that waits for `Date.now()` to
//! move spins until the call's timeout (`setTimeout` and friends run on the
//! prelude's virtual clock and are unaffected). What a tool computes at its
//! top level was fixed when it was built (builds always run under fixed
//! clocks), in either mode. Without deterministic mode, each call gets the
//! host's clocks and fresh random, and `Math.random()` a fresh seed.
//!
//! # Command-line flags (Deno style)
//!
//! * `--allow-net=api.example.com,*.cdn.example.com` →
//!   [`HostPolicy::with_allow_net`]: allows `fetch` and adds the rules.
//! * `--allow-read=./data` or `--allow-read=./data:/data` →
//!   [`HostPolicy::with_allow_read`]: allows `fs.readFile` and adds a
//!   directory.
//! * `--allow-crypto` → [`HostPolicy::with_allow_crypto`].
//! * `--deterministic` or `--deterministic=SEED` →
//!   [`HostPolicy::with_determinism`] (the seed defaults to the policy
//!   file's, else 0).

// Libraries report through `tracing` (the embedder routes it), never by
// printing: the `temper` binary is the one that prints.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod domain;
pub mod explain;
mod ip;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

pub use domain::{
    CheckedUrl, DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_HEADERS, DEFAULT_MAX_REDIRECTS,
    DEFAULT_MAX_REQUEST_BODY, DEFAULT_MAX_RESPONSE_BODY, DEFAULT_MAX_URL_BYTES, DomainRule,
    FetchDenied, FetchPolicy, HostKind, MESSAGE_URL_CHARS, RuleHost, RuleScheme, check_dns_name,
    shorten,
};
pub use ip::is_public_address;

/// A capability a tool can ask for in its `allowlist`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `fetch`: outbound HTTP(S) to the hosts of [`FetchPolicy`].
    Fetch,
    /// `fs.readFile`: read-only access to the [`ReadDir`]s.
    FsReadFile,
    /// `crypto`: random bytes and digests.
    Crypto,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; 3] = [
        Capability::Fetch,
        Capability::FsReadFile,
        Capability::Crypto,
    ];

    /// The name used in allowlists and policy files.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Fetch => "fetch",
            Capability::FsReadFile => "fs.readFile",
            Capability::Crypto => "crypto",
        }
    }
}

/// Parses `fetch`, `fs.readFile` or `crypto` (exact, case-sensitive).
impl FromStr for Capability {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capability::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| PolicyError::UnknownCapability(s.to_string()))
    }
}

/// Writes the same name [`FromStr`] accepts.
impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Errors of policy parsing and granting. Each names the offending
/// capability, rule, key or path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A capability name that is not `fetch`, `fs.readFile` or `crypto`.
    #[error("unknown capability \"{0}\" (known: fetch, fs.readFile, crypto)")]
    UnknownCapability(String),
    /// The tool's allowlist names a capability the host policy does not
    /// allow.
    /// The message says that only the host's operator can allow it, and
    /// how ([`Capability::operator_grant`]).
    #[error(
        "capability \"{0}\" is requested by the tool but not allowed by the host policy; only the host's operator can allow it ({grant}); forge the tool without it, or ask the operator",
        grant = .0.operator_grant()
    )]
    NotAllowedByHost(Capability),
    /// A fetch domain rule that does not parse.
    #[error("bad domain rule \"{rule}\": {reason}")]
    BadDomainRule {
        /// The rule as written.
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A read directory (`[[read]]` entry or `--allow-read` spec) that is
    /// not acceptable.
    #[error("bad read directory \"{spec}\": {reason}")]
    BadReadDir {
        /// The host path, guest path or flag value at fault.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A section configures a capability that `allow` does not list.
    #[error("[{section}] configures capability \"{capability}\" but `allow` does not list it")]
    SectionWithoutCapability {
        /// The TOML section (`fetch` or `read`).
        section: &'static str,
        /// The capability it configures.
        capability: Capability,
    },
    /// A value that parses but is out of range (e.g. a zero limit).
    #[error("invalid value for `{key}`: {reason}")]
    BadValue {
        /// Dotted key, e.g. `limits.timeout_ms`.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The policy text is not valid TOML or has unknown keys or wrong
    /// types; the message gives the line, the line's text and the parser's
    /// reason (which names unknown keys).
    #[error("invalid policy TOML: {0}")]
    Toml(String),
    /// The policy file could not be read.
    #[error("cannot read policy file {path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
}

/// A host directory exposed read-only to tools that are granted
/// `fs.readFile`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadDir {
    /// The host path, kept exactly as given (relative paths are resolved by
    /// the runtime, against its working directory).
    pub host: PathBuf,
    /// Where the tool sees it: absolute, normalized (no `.`, `..`, empty
    /// components or trailing slash), e.g. `/data`.
    pub guest: String,
}

/// Optional per-call limits from the policy file; `None` means the
/// runtime's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Wall-clock limit per call, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Linear-memory limit per call, in MiB.
    pub memory_mb: Option<u64>,
    /// Largest output a call may return, in bytes.
    pub max_output_bytes: Option<u64>,
}

/// The largest `epoch_ms` deterministic mode accepts: the last instant a
/// JavaScript `Date` can represent (8.64e15 ms after the Unix epoch).
pub const MAX_EPOCH_MS: u64 = 8_640_000_000_000_000;

/// Deterministic mode: every call gets the same wall clock, a monotonic
/// clock that stands still, and random sources seeded from `seed` (see the
/// [module docs](self#deterministic-mode)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Determinism {
    /// Seeds every random source a tool can read.
    pub seed: u64,
    /// What the wall clock reads, in milliseconds since the Unix epoch (at
    /// most [`MAX_EPOCH_MS`]).
    pub epoch_ms: u64,
}

impl Determinism {
    /// Deterministic mode with this seed, the wall clock at the Unix epoch.
    pub fn seeded(seed: u64) -> Self {
        Determinism { seed, epoch_ms: 0 }
    }

    /// The same, with the wall clock at `epoch_ms` (clamped to
    /// [`MAX_EPOCH_MS`]).
    pub fn with_epoch_ms(mut self, epoch_ms: u64) -> Self {
        self.epoch_ms = epoch_ms.min(MAX_EPOCH_MS);
        self
    }
}

/// What a tool is actually granted: the intersection of its allowlist with
/// the host policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grants {
    /// `fetch` granted.
    pub fetch: bool,
    /// `fs.readFile` granted.
    pub fs_read: bool,
    /// `crypto` granted.
    pub crypto: bool,
}

/// The host's policy: the capabilities it allows and their configuration.
/// [`Default`] is [`HostPolicy::deny_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPolicy {
    /// Capabilities the host allows at all.
    pub allowed: BTreeSet<Capability>,
    /// Hosts and limits for `fetch`.
    pub fetch: FetchPolicy,
    /// Directories for `fs.readFile`.
    pub read_dirs: Vec<ReadDir>,
    /// Per-call limits.
    pub limits: LimitsConfig,
    /// Deterministic mode, when on (`None`: the host's clocks and random).
    pub determinism: Option<Determinism>,
    /// Which hub tools (upstream MCP tools, built-ins) agents may use:
    /// `[tools] allow`. Empty by default: none.
    pub tools: ToolAllow,
    /// Which upstream resources and resource templates (by their exposed
    /// URI and URI template) a gateway serves: `[resources] allow`. Empty
    /// by default: none.
    pub resources: ToolAllow,
    /// Which upstream prompts (by their exposed name) a gateway serves:
    /// `[prompts] allow`. Empty by default: none.
    pub prompts: ToolAllow,
    /// The capabilities code-mode runs (`run_code`) are granted:
    /// `[run_code] allow`, each one the host allows. Empty by default:
    /// none (a run calls tools, and nothing else).
    pub run_code: Vec<String>,
}

/// A list of tool-name globs (`web_search`, `github.*`, `*`): `*` matches
/// any run of characters, everything else matches itself. Deny by default:
/// the empty list allows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolAllow {
    globs: Vec<String>,
}

impl ToolAllow {
    /// A list of globs; an empty glob is refused.
    pub fn new(globs: Vec<String>) -> Result<Self, PolicyError> {
        Self::for_key("tools.allow", "a tool name", globs)
    }

    /// A list of globs for `key` (`resources.allow`), each `what` or a
    /// glob of them; an empty glob, or one with white space, is refused.
    pub fn for_key(key: &str, what: &str, globs: Vec<String>) -> Result<Self, PolicyError> {
        if let Some(bad) = globs
            .iter()
            .find(|g| g.is_empty() || g.contains(char::is_whitespace))
        {
            return Err(PolicyError::BadValue {
                key: key.into(),
                reason: format!("{bad:?} is not {what} or glob"),
            });
        }
        Ok(Self { globs })
    }

    /// The globs as written.
    pub fn globs(&self) -> &[String] {
        &self.globs
    }

    /// Whether some glob matches `name`.
    pub fn allows(&self, name: &str) -> bool {
        self.globs.iter().any(|g| glob_matches(g, name))
    }
}

/// `*`-only glob matching (no other metacharacters), iterative with
/// backtracking to the last `*`: linear in practice, never exponential.
fn glob_matches(glob: &str, name: &str) -> bool {
    let (g, n) = (glob.as_bytes(), name.as_bytes());
    let (mut gi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if gi < g.len() && g[gi] == b'*' {
            star = Some((gi, ni));
            gi += 1;
        } else if gi < g.len() && g[gi] == n[ni] {
            gi += 1;
            ni += 1;
        } else if let Some((sg, sn)) = star {
            gi = sg + 1;
            ni = sn + 1;
            star = Some((sg, sn + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|&c| c == b'*')
}

impl Default for HostPolicy {
    fn default() -> Self {
        HostPolicy::deny_all()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    allow: Vec<String>,
    fetch: Option<RawFetch>,
    #[serde(default)]
    read: Vec<RawRead>,
    #[serde(default)]
    limits: LimitsConfig,
    determinism: Option<RawDeterminism>,
    tools: Option<RawTools>,
    resources: Option<RawTools>,
    prompts: Option<RawTools>,
    run_code: Option<RawTools>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTools {
    #[serde(default)]
    allow: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeterminism {
    enabled: Option<bool>,
    seed: Option<u64>,
    epoch_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFetch {
    #[serde(default)]
    domains: Vec<String>,
    allow_private: Option<bool>,
    max_redirects: Option<u32>,
    max_request_body: Option<u64>,
    max_response_body: Option<u64>,
    max_headers: Option<u32>,
    max_header_bytes: Option<u64>,
    max_url_bytes: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRead {
    host: String,
    guest: Option<String>,
}

impl HostPolicy {
    /// The default policy: no capability, no host, no directory, runtime
    /// default limits.
    pub fn deny_all() -> Self {
        HostPolicy {
            allowed: BTreeSet::new(),
            fetch: FetchPolicy::default(),
            read_dirs: Vec::new(),
            limits: LimitsConfig::default(),
            determinism: None,
            tools: ToolAllow::default(),
            resources: ToolAllow::default(),
            prompts: ToolAllow::default(),
            run_code: Vec::new(),
        }
    }

    /// Parses a policy file's text (format in the [module docs](self)).
    /// Unknown keys, unknown capabilities, malformed domain rules, bad read
    /// directories and zero limits are errors naming the culprit.
    pub fn from_toml(text: &str) -> Result<Self, PolicyError> {
        let raw: RawPolicy = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        let mut policy = HostPolicy::deny_all();
        for name in &raw.allow {
            policy.allowed.insert(name.parse()?);
        }
        if let Some(fetch) = raw.fetch {
            if !fetch.domains.is_empty() && !policy.allowed.contains(&Capability::Fetch) {
                return Err(PolicyError::SectionWithoutCapability {
                    section: "fetch",
                    capability: Capability::Fetch,
                });
            }
            let f = &mut policy.fetch;
            for rule in &fetch.domains {
                f.rules.push(DomainRule::parse(rule)?);
            }
            f.allow_private = fetch.allow_private.unwrap_or(f.allow_private);
            f.max_redirects = fetch.max_redirects.unwrap_or(f.max_redirects);
            f.max_request_body = fetch.max_request_body.unwrap_or(f.max_request_body);
            f.max_response_body = fetch.max_response_body.unwrap_or(f.max_response_body);
            f.max_headers = fetch.max_headers.unwrap_or(f.max_headers);
            f.max_header_bytes = fetch.max_header_bytes.unwrap_or(f.max_header_bytes);
            if fetch.max_url_bytes == Some(0) {
                return Err(PolicyError::BadValue {
                    key: "fetch.max_url_bytes".into(),
                    reason: "must be greater than 0 (leave it out for the default, 8192)".into(),
                });
            }
            f.max_url_bytes = fetch.max_url_bytes.unwrap_or(f.max_url_bytes);
        }
        if !raw.read.is_empty() && !policy.allowed.contains(&Capability::FsReadFile) {
            return Err(PolicyError::SectionWithoutCapability {
                section: "read",
                capability: Capability::FsReadFile,
            });
        }
        for entry in raw.read {
            let dir = read_dir(&entry.host, entry.guest.as_deref())?;
            policy.push_read_dir(dir)?;
        }
        for (key, value) in [
            ("limits.timeout_ms", raw.limits.timeout_ms),
            ("limits.memory_mb", raw.limits.memory_mb),
            ("limits.max_output_bytes", raw.limits.max_output_bytes),
        ] {
            if value == Some(0) {
                return Err(PolicyError::BadValue {
                    key: key.to_string(),
                    reason: "must be greater than 0 (leave it out for the default)".into(),
                });
            }
        }
        policy.limits = raw.limits;
        if let Some(tools) = raw.tools {
            policy.tools = ToolAllow::new(tools.allow)?;
        }
        if let Some(resources) = raw.resources {
            policy.resources =
                ToolAllow::for_key("resources.allow", "a resource URI", resources.allow)?;
        }
        if let Some(prompts) = raw.prompts {
            policy.prompts = ToolAllow::for_key("prompts.allow", "a prompt name", prompts.allow)?;
        }
        if let Some(run_code) = raw.run_code {
            // Checked now: a capability the host does not allow is an error
            // naming it, not a run that fails later.
            policy.grants(&run_code.allow)?;
            let mut allow = run_code.allow;
            allow.sort();
            allow.dedup();
            policy.run_code = allow;
        }
        if let Some(det) = raw.determinism {
            let epoch_ms = det.epoch_ms.unwrap_or(0);
            if epoch_ms > MAX_EPOCH_MS {
                return Err(PolicyError::BadValue {
                    key: "determinism.epoch_ms".into(),
                    reason: format!(
                        "{epoch_ms} is past the last date JavaScript can represent ({MAX_EPOCH_MS})"
                    ),
                });
            }
            if det.enabled.unwrap_or(true) {
                policy.determinism = Some(Determinism {
                    seed: det.seed.unwrap_or(0),
                    epoch_ms,
                });
            }
        }
        Ok(policy)
    }

    /// Reads and parses a policy file; see [`HostPolicy::from_toml`].
    pub fn from_file(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        HostPolicy::from_toml(&text)
    }

    /// Deno-style `--allow-net=a.com,*.b.com`: allows `fetch` and adds each
    /// comma-separated rule (surrounding spaces trimmed). An empty list or
    /// empty item is a [`PolicyError::BadDomainRule`]: there is no
    /// allow-every-host form.
    pub fn with_allow_net(mut self, list: &str) -> Result<Self, PolicyError> {
        for item in list.split(',') {
            self.fetch.rules.push(DomainRule::parse(item.trim())?);
        }
        self.allowed.insert(Capability::Fetch);
        Ok(self)
    }

    /// Deno-style `--allow-read=HOST[:GUEST]`: allows `fs.readFile` and adds
    /// a directory.
    ///
    /// The spec is split at its last `:` when what follows starts with `/`
    /// (`./data:/data`, `/srv/x:/x`); otherwise the whole spec is the host
    /// path. Without a guest path, the guest path is `/` plus the host
    /// path's last normal component (`./data` and `/srv/data/` → `/data`);
    /// a host path without one (`.`, `/`, `..`) needs an explicit guest
    /// path. Two directories may not share a guest path.
    pub fn with_allow_read(mut self, spec: &str) -> Result<Self, PolicyError> {
        if spec.ends_with(':') {
            return Err(PolicyError::BadReadDir {
                spec: spec.to_string(),
                reason: "empty guest path after `:`".into(),
            });
        }
        let (host, guest) = match spec.rsplit_once(':') {
            Some((h, g)) if g.starts_with('/') => (h, Some(g)),
            _ => (spec, None),
        };
        let dir = read_dir(host, guest)?;
        self.push_read_dir(dir)?;
        self.allowed.insert(Capability::FsReadFile);
        Ok(self)
    }

    /// `--allow-crypto`: allows `crypto`.
    pub fn with_allow_crypto(mut self) -> Self {
        self.allowed.insert(Capability::Crypto);
        self
    }

    /// Turns deterministic mode on (`--deterministic[=SEED]`): fixed clocks
    /// and seeded random for every call, see the
    /// [module docs](self#deterministic-mode).
    pub fn with_determinism(mut self, determinism: Determinism) -> Self {
        self.determinism = Some(determinism);
        self
    }

    /// Intersection of a tool's allowlist with this policy. A listed
    /// capability the policy does not allow is
    /// [`PolicyError::NotAllowedByHost`] naming it; unknown names are
    /// [`PolicyError::UnknownCapability`]. Capabilities the tool does not
    /// list are never granted, whatever the policy allows. Names are
    /// checked in order; the first problem is returned.
    pub fn grants(&self, allowlist: &[String]) -> Result<Grants, PolicyError> {
        let mut grants = Grants::default();
        for name in allowlist {
            let cap: Capability = name.parse()?;
            if !self.allowed.contains(&cap) {
                return Err(PolicyError::NotAllowedByHost(cap));
            }
            match cap {
                Capability::Fetch => grants.fetch = true,
                Capability::FsReadFile => grants.fs_read = true,
                Capability::Crypto => grants.crypto = true,
            }
        }
        Ok(grants)
    }

    fn push_read_dir(&mut self, dir: ReadDir) -> Result<(), PolicyError> {
        if self.read_dirs.iter().any(|d| d.guest == dir.guest) {
            return Err(PolicyError::BadReadDir {
                spec: dir.guest,
                reason: "two read directories share this guest path".into(),
            });
        }
        self.read_dirs.push(dir);
        Ok(())
    }
}

/// Builds a [`ReadDir`], deriving the guest path when not given.
fn read_dir(host: &str, guest: Option<&str>) -> Result<ReadDir, PolicyError> {
    let bad = |spec: &str, reason: &str| PolicyError::BadReadDir {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    if host.is_empty() {
        return Err(bad(host, "empty host path"));
    }
    if host.contains('\0') {
        return Err(bad(host, "NUL in host path"));
    }
    let guest = match guest {
        Some(g) => normalize_guest(g).map_err(|r| bad(g, r))?,
        None => {
            let last = Path::new(host)
                .components()
                .next_back()
                .and_then(|c| match c {
                    Component::Normal(n) => n.to_str(),
                    _ => None,
                })
                .ok_or_else(|| {
                    bad(
                        host,
                        "cannot derive a guest path from it; give one, like HOST:/data",
                    )
                })?;
            let g = format!("/{last}");
            normalize_guest(&g).map_err(|r| bad(host, r))?
        }
    };
    Ok(ReadDir {
        host: PathBuf::from(host),
        guest,
    })
}

/// Normalizes a guest path: must start with `/`; `.` and empty components
/// and a trailing slash are dropped; `..`, backslashes and NUL are refused.
fn normalize_guest(guest: &str) -> Result<String, &'static str> {
    if !guest.starts_with('/') {
        return Err("guest path must be absolute, like /data");
    }
    if guest.contains(['\\', '\0']) {
        return Err("guest path may not contain backslashes or NUL");
    }
    let mut parts = Vec::new();
    for part in guest.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err("guest path may not contain `..`"),
            p => parts.push(p),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Formats a TOML error on one line: position, the offending line's text
/// (which shows the key) and the parser's reason.
fn toml_error(text: &str, e: &toml::de::Error) -> PolicyError {
    let message = e.message().trim().to_string();
    let Some(span) = e.span() else {
        return PolicyError::Toml(message);
    };
    let start = span.start.min(text.len());
    let line_no = text[..start].matches('\n').count() + 1;
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = text[line_start..line_end].trim();
    PolicyError::Toml(format!("line {line_no}: `{line}`: {message}"))
}

#[cfg(test)]
mod tests;
