//! The tools file (`--tools FILE`): which upstream MCP servers Temper
//! connects to, which of their tools it exposes, and which built-in tools
//! are on.
//!
//! ```toml
//! [upstream.search]                       # stdio: Temper starts and owns the child
//! command = ["python3", "search_server.py"]
//! env = { SEARCH_API_KEY = "env:SEARCH_API_KEY" }
//! tools = ["web_search"]                  # default: none; "*" = all
//! timeout_ms = 30000
//! relay = ["elicitation"]                 # its requests relayed to callers (stdio)
//!
//! [upstream.github]                       # Streamable HTTP
//! url = "https://mcp.example.com/mcp"
//! headers = { Authorization = "env:GITHUB_MCP_AUTH" }
//! tools = ["search_issues"]
//! prefix = "github."                      # exposed as github.search_issues
//!
//! [upstream.github.annotations.search_issues]   # overrides in tools/list
//! destructiveHint = true
//!
//! [builtin.http_request]
//! domains = ["api.example.com"]          # the fetch capability's rule syntax
//!
//! [builtin.generate_text]
//! url = "http://127.0.0.1:8080/v1"
//! model = "qwen2.5"
//! api_key = "env:LLM_API_KEY"
//! ```
//!
//! Unknown keys are errors, and every error names the file, the table and
//! the key. Values written `env:NAME` are read from Temper's environment
//! when the file is loaded; they are held as [`Secret`]s, which never print
//! their value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use temper_policy::DomainRule;

/// Default limit of one upstream call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default limit of an upstream's start (the child started, or the session
/// opened, and the MCP handshake done): a minute, for an `npx -y` or `uvx`
/// command that downloads its server first.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest `timeout_ms` accepted (10 minutes).
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Default cap on one upstream result (8 MiB).
pub const DEFAULT_MAX_RESULT_BYTES: usize = 8 << 20;
/// Default cap on an `http_request` response body (4 MiB).
pub const DEFAULT_HTTP_MAX_RESPONSE_BYTES: usize = 4 << 20;
/// Headers of a Streamable HTTP upstream that the MCP client sets itself;
/// `headers` may not set them.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];
/// Default `max_tokens` of a `generate_text` call.
pub const DEFAULT_MAX_TOKENS: u32 = 1024;
/// Default limit of one `generate_text` call (2 minutes: a local model on
/// a CPU may take tens of seconds for a long answer).
pub const DEFAULT_GENERATE_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a tools file was refused. Every variant names the file; those about
/// one value name its table and key too. No variant holds a secret value.
#[derive(Debug, thiserror::Error)]
pub enum ToolsFileError {
    /// The file could not be read.
    #[error("tools file {file}: cannot read: {source}")]
    Read {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not TOML, or a value has the wrong type, or a key is
    /// unknown.
    #[error("tools file {file}: [{table}] {}: {message}", key.as_deref().map(|k| format!("`{k}`")).unwrap_or_else(|| "(table)".into()))]
    Parse {
        /// The file.
        file: PathBuf,
        /// The table (`upstream.search`, `builtin.http_request`, or empty
        /// for the top level).
        table: String,
        /// The key at fault, when one is known.
        key: Option<String>,
        /// What the TOML parser said.
        message: String,
    },
    /// A value that parses but is not acceptable.
    #[error("tools file {file}: [{table}] `{key}`: {reason}")]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The table.
        table: String,
        /// The key.
        key: String,
        /// What is wrong (never quotes a secret value).
        reason: String,
    },
}

/// How Temper reaches an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Temper starts the command and speaks MCP on its stdin/stdout. The
    /// child gets a cleared environment plus `env`.
    Stdio {
        /// Program and arguments.
        command: Vec<String>,
        /// The child's whole environment.
        env: BTreeMap<String, Secret>,
    },
    /// MCP Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, Secret>,
    },
}

/// Which of an upstream's tools are exposed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolSelection {
    /// None (the default).
    #[default]
    None,
    /// All (`tools = ["*"]`).
    All,
    /// These, by their upstream name.
    Only(Vec<String>),
}

impl ToolSelection {
    /// Whether the upstream tool `name` is exposed.
    pub fn selects(&self, name: &str) -> bool {
        match self {
            Self::None => false,
            Self::All => true,
            Self::Only(names) => names.iter().any(|n| n == name),
        }
    }
}

/// One `[upstream.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// The table name.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// Which tools to expose.
    pub tools: ToolSelection,
    /// Which resources (by the upstream's URI) and resource templates (by
    /// the upstream's URI template) to expose; a URI a selected template
    /// produces may be read.
    pub resources: ToolSelection,
    /// Which prompts (by the upstream's name) to expose.
    pub prompts: ToolSelection,
    /// Prepended to each exposed tool's name (`github.`).
    pub prefix: String,
    /// Limit of one call.
    pub timeout: Duration,
    /// Limit of a start: the child started (or the session opened) and the
    /// MCP handshake done (`start_timeout_ms`).
    pub start_timeout: Duration,
    /// When true, failing to start is a warning and its tools are absent.
    pub optional: bool,
    /// Largest result accepted from it, in bytes.
    pub max_result_bytes: usize,
    /// Annotation overrides by the upstream's tool name
    /// (`[upstream.NAME.annotations.TOOL]`): each member replaces the
    /// upstream's in the listed tool's `annotations`.
    pub annotations: BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    /// Which of its requests are relayed to Temper's callers (`relay`).
    pub relay: crate::upstream::RelayRequests,
    /// The forge's tests may call its tools that are not marked
    /// `readOnlyHint: true` (`allow_live_tests`): the operator accepts the
    /// side effects of forging. Off by default: such a tool is answered
    /// from the answers recorded in the forge request.
    pub allow_live_tests: bool,
}

/// `[builtin.http_request]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequestConfig {
    /// Domain rules (the host policy's syntax); nothing else is reachable.
    pub domains: Vec<String>,
    /// Allow names that resolve to non-public addresses (loopback,
    /// private, link-local, ...). Off by default; an IP literal still needs
    /// a rule naming it.
    pub allow_private: bool,
    /// Names answered without DNS, like curl's `--resolve`: name → socket
    /// addresses (a URL on its scheme's default port connects to the given
    /// port). The addresses are still checked like resolved ones.
    pub resolve: BTreeMap<String, Vec<std::net::SocketAddr>>,
    /// Extra trusted root certificates (PEM, from `ca_file`), for an
    /// internal CA.
    pub ca_pem: Option<Vec<u8>>,
    /// Limit of one request.
    pub timeout: Duration,
    /// Cap on the response body.
    pub max_response_bytes: usize,
}

/// `[builtin.generate_text]`: an OpenAI-compatible chat-completions
/// endpoint, configured like the LLM judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateTextConfig {
    /// Base URL; requests go to `{url}/chat/completions`.
    pub url: String,
    /// Model name.
    pub model: String,
    /// The API key (`env:NAME` only), when one is configured.
    pub api_key: Option<Secret>,
    /// Limit of one generation.
    pub timeout: Duration,
    /// Default `max_tokens` when the call gives none, and its upper bound.
    pub max_tokens: u32,
}

/// A loaded tools file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolsFile {
    /// The file it was read from.
    pub path: PathBuf,
    /// Upstreams by table name.
    pub upstreams: BTreeMap<String, UpstreamConfig>,
    /// `[builtin.http_request]`, when present.
    pub http_request: Option<HttpRequestConfig>,
    /// `[builtin.generate_text]`, when present.
    pub generate_text: Option<GenerateTextConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    upstream: BTreeMap<String, RawUpstream>,
    #[serde(default)]
    builtin: RawBuiltins,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBuiltins {
    http_request: Option<RawHttpRequest>,
    generate_text: Option<RawGenerateText>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpstream {
    command: Option<Vec<String>>,
    url: Option<String>,
    env: Option<BTreeMap<String, String>>,
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    prompts: Vec<String>,
    prefix: Option<String>,
    timeout_ms: Option<u64>,
    start_timeout_ms: Option<u64>,
    #[serde(default)]
    optional: bool,
    max_result_bytes: Option<u64>,
    #[serde(default)]
    annotations: BTreeMap<String, RawAnnotations>,
    #[serde(default)]
    relay: Vec<String>,
    #[serde(default)]
    allow_live_tests: bool,
}

/// `[upstream.NAME.annotations.TOOL]`: MCP's tool annotations, by their
/// MCP names.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAnnotations {
    title: Option<String>,
    #[serde(rename = "readOnlyHint")]
    read_only_hint: Option<bool>,
    #[serde(rename = "destructiveHint")]
    destructive_hint: Option<bool>,
    #[serde(rename = "idempotentHint")]
    idempotent_hint: Option<bool>,
    #[serde(rename = "openWorldHint")]
    open_world_hint: Option<bool>,
}

impl RawAnnotations {
    /// The members given, as MCP writes them.
    fn into_map(self) -> serde_json::Map<String, serde_json::Value> {
        let mut map = serde_json::Map::new();
        if let Some(t) = self.title {
            map.insert("title".into(), t.into());
        }
        for (key, v) in [
            ("readOnlyHint", self.read_only_hint),
            ("destructiveHint", self.destructive_hint),
            ("idempotentHint", self.idempotent_hint),
            ("openWorldHint", self.open_world_hint),
        ] {
            if let Some(v) = v {
                map.insert(key.into(), v.into());
            }
        }
        map
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttpRequest {
    domains: Vec<String>,
    #[serde(default)]
    allow_private: bool,
    #[serde(default)]
    resolve: BTreeMap<String, Vec<String>>,
    ca_file: Option<PathBuf>,
    timeout_ms: Option<u64>,
    max_response_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGenerateText {
    url: String,
    model: String,
    api_key: Option<String>,
    timeout_ms: Option<u64>,
    max_tokens: Option<u32>,
}

impl ToolsFile {
    /// Reads and checks `path`; `env:` values come from Temper's
    /// environment.
    pub fn load(path: &Path) -> Result<Self, ToolsFileError> {
        Self::load_with_env(path, |name| std::env::var(name).ok())
    }

    /// Like [`Self::load`], with `env:` values looked up by `env`.
    pub fn load_with_env(
        path: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ToolsFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ToolsFileError::Read {
            file: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text, env)
    }

    /// Parses `text` as the tools file `path` (named in errors).
    pub fn parse(
        path: &Path,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ToolsFileError> {
        let file = path.to_path_buf();
        let raw: RawFile = parse_raw(&file, text)?;
        let mut out = ToolsFile {
            path: file.clone(),
            ..Default::default()
        };
        for (name, raw) in raw.upstream {
            let up = Checker {
                file: &file,
                table: format!("upstream.{name}"),
                env: &env,
            }
            .upstream(&name, raw)?;
            out.upstreams.insert(name, up);
        }
        if let Some(raw) = raw.builtin.http_request {
            out.http_request = Some(
                Checker {
                    file: &file,
                    table: "builtin.http_request".into(),
                    env: &env,
                }
                .http_request(raw)?,
            );
        }
        if let Some(raw) = raw.builtin.generate_text {
            out.generate_text = Some(
                Checker {
                    file: &file,
                    table: "builtin.generate_text".into(),
                    env: &env,
                }
                .generate_text(raw)?,
            );
        }
        Ok(out)
    }
}

/// Deserializes with the path of the failing value, and splits it into
/// table and key for the error.
fn parse_raw(file: &Path, text: &str) -> Result<RawFile, ToolsFileError> {
    let de = toml::Deserializer::parse(text).map_err(|e| ToolsFileError::Parse {
        file: file.to_path_buf(),
        table: String::new(),
        key: None,
        message: one_line(&e.to_string()),
    })?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let segments: Vec<String> = e
            .path()
            .iter()
            .filter_map(|s| match s {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                serde_path_to_error::Segment::Seq { index } => Some(format!("[{index}]")),
                _ => None,
            })
            .collect();
        let message = one_line(e.inner().message());
        // "unknown field `x`": the path is the table, the key is in the message.
        let unknown = message
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split('`').next())
            .map(str::to_string);
        let (table, key) = match unknown {
            Some(key) => {
                let mut table = segments;
                if table.last() == Some(&key) {
                    table.pop();
                }
                (table, Some(key))
            }
            None => table_and_key(segments),
        };
        ToolsFileError::Parse {
            file: file.to_path_buf(),
            table: table.join("."),
            key,
            message,
        }
    })
}

/// `upstream.search.timeout_ms` → (`upstream.search`, `timeout_ms`);
/// `upstream.search.env.K` → (`upstream.search`, `env.K`).
fn table_and_key(segments: Vec<String>) -> (Vec<String>, Option<String>) {
    let table_len = match segments.first().map(String::as_str) {
        Some("upstream") | Some("builtin") => 2.min(segments.len()),
        _ => 0,
    };
    let (table, key) = segments.split_at(table_len);
    let key = (!key.is_empty()).then(|| {
        key.iter().fold(String::new(), |mut acc, s| {
            if !acc.is_empty() && !s.starts_with('[') {
                acc.push('.');
            }
            acc.push_str(s);
            acc
        })
    });
    (table.to_vec(), key)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct Checker<'a, E> {
    file: &'a Path,
    table: String,
    env: &'a E,
}

impl<E: Fn(&str) -> Option<String>> Checker<'_, E> {
    fn err(&self, key: impl Into<String>, reason: impl Into<String>) -> ToolsFileError {
        ToolsFileError::Invalid {
            file: self.file.to_path_buf(),
            table: self.table.clone(),
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// An `env:NAME` value read from the environment; `literal` says whether
    /// other values are kept as they are.
    fn secret(&self, key: &str, value: &str, literal: bool) -> Result<Secret, ToolsFileError> {
        match value.strip_prefix("env:") {
            Some(name) => {
                if name.is_empty() || name.contains('=') || name.contains('\0') {
                    return Err(self.err(key, "`env:` needs a variable name"));
                }
                match (self.env)(name) {
                    Some(v) => Ok(Secret::new(format!("env:{name}"), v)),
                    None => Err(self.err(key, format!("environment variable {name} is not set"))),
                }
            }
            None if literal => Ok(Secret::new("<literal>", value)),
            None => Err(self.err(
                key,
                "must be `env:NAME` (a key is never written in the tools file)",
            )),
        }
    }

    fn timeout(&self, ms: Option<u64>, default: Duration) -> Result<Duration, ToolsFileError> {
        self.timeout_key("timeout_ms", ms, default)
    }

    fn timeout_key(
        &self,
        key: &str,
        ms: Option<u64>,
        default: Duration,
    ) -> Result<Duration, ToolsFileError> {
        match ms {
            None => Ok(default),
            Some(0) => Err(self.err(key, "must be at least 1")),
            Some(ms) if ms > MAX_TIMEOUT_MS => {
                Err(self.err(key, format!("must be at most {MAX_TIMEOUT_MS}")))
            }
            Some(ms) => Ok(Duration::from_millis(ms)),
        }
    }

    fn bytes(&self, key: &str, v: Option<u64>, default: usize) -> Result<usize, ToolsFileError> {
        match v {
            None => Ok(default),
            Some(0) => Err(self.err(key, "must be at least 1")),
            Some(v) => usize::try_from(v).map_err(|_| self.err(key, "is too large")),
        }
    }

    fn url(&self, key: &str, raw: &str) -> Result<String, ToolsFileError> {
        let parsed = url::Url::parse(raw).map_err(|e| self.err(key, format!("not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(self.err(key, "must be an http or https URL"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(self.err(
                key,
                "must not carry credentials (use headers or api_key = \"env:NAME\")",
            ));
        }
        Ok(raw.trim_end_matches('/').to_string())
    }

    /// A `tools`, `resources` or `prompts` list: none when empty, all for
    /// `["*"]`, else these (each once, none empty).
    fn selection(
        &self,
        key: &str,
        what: &str,
        list: Vec<String>,
    ) -> Result<ToolSelection, ToolsFileError> {
        if list.is_empty() {
            return Ok(ToolSelection::None);
        }
        if list.iter().any(|t| t == "*") {
            if list.len() > 1 {
                return Err(self.err(key, format!("\"*\" means all {key} and stands alone")));
            }
            return Ok(ToolSelection::All);
        }
        let mut seen = std::collections::BTreeSet::new();
        for t in &list {
            if t.is_empty() {
                return Err(self.err(key, format!("an empty {what} name")));
            }
            if !seen.insert(t) {
                return Err(self.err(key, format!("\"{t}\" is listed twice")));
            }
        }
        Ok(ToolSelection::Only(list))
    }

    fn upstream(&self, name: &str, raw: RawUpstream) -> Result<UpstreamConfig, ToolsFileError> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            return Err(self.err(
                "(name)",
                "an upstream name is lowercase letters, digits, `_` and `-`",
            ));
        }
        let transport = match (raw.command, raw.url) {
            (Some(_), Some(_)) => {
                return Err(self.err("url", "give either `command` (stdio) or `url`, not both"));
            }
            (None, None) => {
                return Err(self.err(
                    "command",
                    "give `command` (stdio) or `url` (Streamable HTTP)",
                ));
            }
            (Some(command), None) => {
                if raw.headers.is_some() {
                    return Err(self.err("headers", "only for a `url` upstream"));
                }
                if command.first().is_none_or(|p| p.is_empty()) {
                    return Err(self.err("command", "must name a program"));
                }
                if command.iter().any(|a| a.contains('\0')) {
                    return Err(self.err("command", "contains a NUL byte"));
                }
                let mut env = BTreeMap::new();
                for (k, v) in raw.env.unwrap_or_default() {
                    let key = format!("env.{k}");
                    if k.is_empty() || k.contains('=') || k.contains('\0') {
                        return Err(self.err(key, "not a valid environment variable name"));
                    }
                    let secret = self.secret(&key, &v, true)?;
                    env.insert(k, secret);
                }
                Transport::Stdio { command, env }
            }
            (None, Some(url)) => {
                if raw.env.is_some() {
                    return Err(self.err("env", "only for a `command` upstream"));
                }
                let url = self.url("url", &url)?;
                let mut headers = BTreeMap::new();
                for (k, v) in raw.headers.unwrap_or_default() {
                    let key = format!("headers.{k}");
                    if k.is_empty()
                        || !k.bytes().all(|b| b.is_ascii_graphic() && b != b':')
                        || http::HeaderName::from_bytes(k.as_bytes()).is_err()
                    {
                        return Err(self.err(key, "not a valid header name"));
                    }
                    if RESERVED_HEADERS.iter().any(|r| r.eq_ignore_ascii_case(&k)) {
                        return Err(self.err(
                            key,
                            "is set by Temper's MCP client (the transport's own header)",
                        ));
                    }
                    let secret = self.secret(&key, &v, true)?;
                    if secret
                        .expose()
                        .bytes()
                        .any(|b| b == b'\r' || b == b'\n' || b == 0)
                    {
                        return Err(self.err(key, "the value contains a line break or NUL"));
                    }
                    if http::HeaderValue::from_str(secret.expose()).is_err() {
                        // The value is not quoted: it may be a secret.
                        return Err(self.err(key, "the value has characters HTTP refuses"));
                    }
                    headers.insert(k, secret);
                }
                Transport::Http { url, headers }
            }
        };
        let tools = self.selection("tools", "tool", raw.tools)?;
        let resources = self.selection("resources", "resource", raw.resources)?;
        let prompts = self.selection("prompts", "prompt", raw.prompts)?;
        let prefix = raw.prefix.unwrap_or_default();
        if !prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.'))
        {
            return Err(self.err("prefix", "lowercase letters, digits, `_`, `-` and `.` only"));
        }
        Ok(UpstreamConfig {
            name: name.to_string(),
            transport,
            tools,
            resources,
            prompts,
            prefix,
            timeout: self.timeout(raw.timeout_ms, DEFAULT_TIMEOUT)?,
            start_timeout: self.timeout_key(
                "start_timeout_ms",
                raw.start_timeout_ms,
                DEFAULT_START_TIMEOUT,
            )?,
            optional: raw.optional,
            max_result_bytes: self.bytes(
                "max_result_bytes",
                raw.max_result_bytes,
                DEFAULT_MAX_RESULT_BYTES,
            )?,
            annotations: raw
                .annotations
                .into_iter()
                .map(|(tool, a)| (tool, a.into_map()))
                .collect(),
            relay: relay::relay_requests(&raw.relay).map_err(|e| self.err("relay", e))?,
            allow_live_tests: raw.allow_live_tests,
        })
    }

    fn http_request(&self, raw: RawHttpRequest) -> Result<HttpRequestConfig, ToolsFileError> {
        if raw.domains.is_empty() {
            return Err(self.err("domains", "list at least one domain rule"));
        }
        for d in &raw.domains {
            DomainRule::parse(d).map_err(|e| self.err("domains", e.to_string()))?;
        }
        let mut resolve = BTreeMap::new();
        for (name, addrs) in raw.resolve {
            let key = format!("resolve.{name}");
            let host = name.trim_end_matches('.').to_ascii_lowercase();
            if host.is_empty()
                || !host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            {
                return Err(self.err(key, "not a host name"));
            }
            if addrs.is_empty() {
                return Err(self.err(key, "list at least one address (`IP:PORT`)"));
            }
            let parsed = addrs
                .iter()
                .map(|a| a.parse::<std::net::SocketAddr>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.err(&key, format!("an address is not `IP:PORT`: {e}")))?;
            resolve.insert(host, parsed);
        }
        let ca_pem = match raw.ca_file {
            None => None,
            Some(path) => {
                // Relative to the tools file's directory.
                let path = match self.file.parent() {
                    Some(dir) if path.is_relative() => dir.join(&path),
                    _ => path,
                };
                let pem = std::fs::read(&path).map_err(|e| {
                    self.err("ca_file", format!("cannot read {}: {e}", path.display()))
                })?;
                if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                    return Err(self.err(
                        "ca_file",
                        format!("{} holds no PEM certificate", path.display()),
                    ));
                }
                Some(pem)
            }
        };
        Ok(HttpRequestConfig {
            domains: raw.domains,
            allow_private: raw.allow_private,
            resolve,
            ca_pem,
            timeout: self.timeout(raw.timeout_ms, DEFAULT_TIMEOUT)?,
            max_response_bytes: self.bytes(
                "max_response_bytes",
                raw.max_response_bytes,
                DEFAULT_HTTP_MAX_RESPONSE_BYTES,
            )?,
        })
    }

    fn generate_text(&self, raw: RawGenerateText) -> Result<GenerateTextConfig, ToolsFileError> {
        let url = self.url("url", &raw.url)?;
        if raw.model.trim().is_empty() {
            return Err(self.err("model", "must not be empty"));
        }
        let api_key = raw
            .api_key
            .map(|k| self.secret("api_key", &k, false))
            .transpose()?;
        let max_tokens = match raw.max_tokens {
            Some(0) => return Err(self.err("max_tokens", "must be at least 1")),
            Some(n) => n,
            None => DEFAULT_MAX_TOKENS,
        };
        Ok(GenerateTextConfig {
            url,
            model: raw.model,
            api_key,
            timeout: self.timeout(raw.timeout_ms, DEFAULT_GENERATE_TIMEOUT)?,
            max_tokens,
        })
    }
}

mod relay;
mod secret;
pub use secret::Secret;

#[cfg(test)]
mod tests;
