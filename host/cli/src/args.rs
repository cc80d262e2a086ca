//! The `temper` command line: its commands, flags and shared options
//! (clap), and how the shared options become a runtime.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use temper::Runtime;
use temper::policy::HostPolicy;

use crate::registry::{JudgeArgs, Registry};
use crate::{artifacts, oci, registry, signing};

#[derive(Parser)]
#[command(
    name = "temper",
    version,
    about = "Build and run forged tools as WebAssembly components"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Which diagnostics to print on stderr, as `RUST_LOG` takes them
    /// (`LEVEL`, `TARGET=LEVEL`, comma-separated; e.g. `info,rmcp=debug`).
    /// Default: Temper's own at INFO and above, other crates' (rmcp,
    /// hyper, …) at WARN and above. Overrides `RUST_LOG`.
    #[arg(long, global = true, value_name = "SPEC")]
    pub(crate) log: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Build a JS tool (`function execute(input) {...}`) into a component;
    /// from a forge request (`.json`), the artifact carries its manifest.
    Build {
        /// The tool's JavaScript source, or a forge request (`.json`).
        source: PathBuf,
        /// Where to write the component (default: SOURCE with `.wasm`).
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Build a forge request's sandbox code and run its test cases.
    Test {
        /// A forge request (JSON, the `forge_tool` shape).
        request: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Run a tool (a `.wasm` component, or a `.js` source built in memory).
    Run {
        /// A `.wasm` component or a `.js` source.
        tool: PathBuf,
        /// The JSON input.
        #[arg(long, default_value = "{}")]
        input: String,
        #[command(flatten)]
        trust: signing::RunTrust,
        #[command(flatten)]
        common: Common,
    },
    /// Forge a tool: validate, build, test, judge, register (session tier).
    Forge {
        /// A forge request (JSON, the `forge_tool` shape).
        request: PathBuf,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        hub: registry::HubArgs,
        #[command(flatten)]
        judge: JudgeArgs,
        #[command(flatten)]
        common: Common,
    },
    /// List the tools the agent and session can call.
    Tools {
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        hub: registry::HubArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Call a registered tool (its grants ∩ the host policy, its limits).
    Call {
        /// The tool's name.
        name: String,
        /// The JSON input.
        #[arg(long, default_value = "{}")]
        input: String,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        hub: registry::HubArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Run a JavaScript body once with the tools you may call (code mode):
    /// nothing is registered.
    RunCode {
        /// The body of an async function (`return` the result).
        file: PathBuf,
        /// Only these tools may be called (comma-separated; default: all
        /// you can call).
        #[arg(long, value_delimiter = ',')]
        tools: Option<Vec<String>>,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        hub: registry::HubArgs,
        #[command(flatten)]
        common: Common,
    },
    /// A tool's call statistics.
    Stats {
        /// The tool's name.
        name: String,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        common: Common,
    },
    /// Promote a session tool to the agent tier (uses, confidence, panel).
    Promote {
        /// The tool's name.
        name: String,
        /// The tool's source, when it was not kept (checked by blake3).
        #[arg(long, value_name = "FILE")]
        source: Option<PathBuf>,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        judge: JudgeArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Delete a tool from the session tier (frees a slot; audited as a
    /// deletion naming the agent and the session). Agent-tier and shared
    /// tools are not deleted.
    Delete {
        /// The session tool's name.
        name: String,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        common: Common,
    },
    /// Approve an agent-tier tool for every agent (shared tier).
    Approve {
        /// The tool's name.
        name: String,
        /// Who approves (recorded in the audit trail).
        #[arg(long, value_name = "PERSON")]
        by: String,
        /// Why (recorded in the audit trail).
        #[arg(long)]
        note: Option<String>,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        common: Common,
    },
    /// Show an artifact's id, manifest, capabilities and WIT world.
    Inspect {
        /// A `.wasm` artifact.
        file: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Write a registered tool's artifact to a `.wasm` file.
    Export {
        /// The tool's name or artifact id.
        name: String,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Include the source for review (a different file, with its own id).
        #[arg(long)]
        with_source: bool,
        /// The source to include when it was not kept (checked by blake3).
        #[arg(long, value_name = "FILE")]
        source: Option<PathBuf>,
        /// Also write FILE.provenance.json: who forged it and when (audit
        /// entries), kept out of the artifact's bytes.
        #[arg(long)]
        sidecar: bool,
        /// A compose tool as one self-contained component: its adapter
        /// composed with its component steps; host-native steps stay
        /// imports, listed.
        #[arg(long, conflicts_with_all = ["with_source", "source"])]
        bundle: bool,
        /// What to write: `wasm` (the artifact) or `agentos` (an
        /// `agentos.emergent-tool.v1` package, JSON, with the source and
        /// the test cases).
        #[arg(long, value_enum, default_value = "wasm", conflicts_with_all = ["bundle", "sidecar"])]
        format: artifacts::ExportFormat,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        common: Common,
    },
    /// Import a `.wasm` artifact or an AgentOS package (`.json`, `.yaml`,
    /// `.yml`): check it, run its tests here, judge, register.
    Import {
        /// A `.wasm` artifact, or an `agentos.emergent-tool.v1` package.
        file: PathBuf,
        /// Test cases for an AgentOS package (a JSON list of `{input,
        /// expectedOutput}`), replacing the package's own (AgentOS
        /// packages carry none).
        #[arg(long, value_name = "FILE")]
        tests: Option<PathBuf>,
        /// Its detached signature (from `temper sign --detached`).
        #[arg(long, value_name = "FILE")]
        signature: Option<PathBuf>,
        /// Where it lands.
        #[arg(long, value_enum, default_value = "agent")]
        tier: artifacts::TierArg,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        judge: JudgeArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Write a new Ed25519 key pair: KEY (secret, mode 0600) and KEY.pub.
    Keygen {
        /// The secret key file to write (never overwritten).
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Sign a `.wasm` artifact (in place, or -o), or a registered tool in
    /// the store; another signer adds to the same signature section. The
    /// artifact's id does not change.
    Sign(signing::SignArgs),
    /// Push a tool (registered NAME or id, or a `.wasm` file) to an OCI
    /// registry in the CNCF Wasm layout: `oci://HOST[:PORT]/REPO:TAG`.
    Push {
        /// The tool's name or artifact id, or a `.wasm` artifact file.
        name: String,
        /// `oci://HOST[:PORT]/REPO:TAG`.
        reference: String,
        /// Also sign it with KEY and push the signature as an OCI 1.1
        /// referrer of the artifact's manifest.
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
        #[command(flatten)]
        oci: oci::OciArgs,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        common: Common,
    },
    /// Pull a tool from an OCI registry and verify it (layer digest, blake3
    /// id, manifest section); `--import` then imports it like `temper import`.
    Pull {
        /// `oci://HOST[:PORT]/REPO:TAG` or `oci://HOST[:PORT]/REPO@sha256:DIGEST`.
        reference: String,
        /// Write the verified `.wasm` here.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Import it into the store: tests re-run here, judge, capabilities
        /// against this host's policy.
        #[arg(long)]
        import: bool,
        /// Where an import lands.
        #[arg(long, value_enum, default_value = "agent")]
        tier: artifacts::TierArg,
        #[command(flatten)]
        oci: oci::OciArgs,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        judge: JudgeArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Rebuild an artifact from its source and compare bytes.
    Verify {
        /// A `.wasm` artifact.
        file: PathBuf,
        /// The JS source (default: the request's, or the one the file carries).
        #[arg(long, value_name = "FILE")]
        source: Option<PathBuf>,
        /// The forge request (also checks every manifest field).
        #[arg(long, value_name = "FILE")]
        request: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// The provenance audit trail.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Session management.
    Session {
        #[command(subcommand)]
        command: SessionCommand,
    },
    /// Serve MCP over stdio, or Streamable HTTP with `--http ADDR`:
    /// `forge_tool` and the forged tools, for any MCP client (each
    /// connection or HTTP session has its own session tier).
    Mcp {
        #[command(flatten)]
        http: McpHttpArgs,
        #[command(flatten)]
        metrics: MetricsArgs,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        hub: registry::HubArgs,
        #[command(flatten)]
        judge: JudgeArgs,
        #[command(flatten)]
        common: Common,
    },
}

/// How `temper mcp --http` authenticates bearer tokens besides --tokens.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AuthKind {
    /// JWTs of one issuer, checked against its key set (--auth-config).
    Jwt,
}

/// `temper mcp --metrics ADDR`: Prometheus metrics on a listener of
/// their own (stdio and HTTP alike).
#[derive(clap::Args)]
pub(crate) struct MetricsArgs {
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g.
    /// 127.0.0.1:9464; port 0 picks one). Off by default. A non-loopback
    /// ADDR requires --metrics-token-file.
    #[arg(long = "metrics", value_name = "ADDR")]
    pub(crate) addr: Option<String>,
    /// Distinct `tool` label values before further tools fold into
    /// `_other`.
    #[arg(long, value_name = "N", default_value_t = temper::observe::DEFAULT_MAX_TOOLS, requires = "addr")]
    pub(crate) metrics_max_tools: usize,
    /// A file holding the bearer token scrapers must send
    /// (`Authorization: Bearer TOKEN`); required to bind --metrics to a
    /// non-loopback address.
    #[arg(long, value_name = "FILE", requires = "addr")]
    pub(crate) metrics_token_file: Option<PathBuf>,
}

/// `temper mcp` over Streamable HTTP.
#[derive(clap::Args)]
pub(crate) struct McpHttpArgs {
    /// Serve Streamable HTTP on ADDR (e.g. 127.0.0.1:8808; port 0 picks
    /// one) at /mcp instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<String>,
    /// Bearer tokens (TOML: token hash -> agent, tiers, quota); required
    /// for a non-loopback ADDR.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub(crate) tokens: Option<PathBuf>,
    /// Accept bearer JWTs as an OAuth 2.1 resource server (`jwt`),
    /// configured by --auth-config; serves the RFC 9728 metadata. With
    /// --tokens too, a token the tokens file knows is a static token and
    /// any other is checked as a JWT.
    #[arg(long, value_enum, value_name = "KIND", requires_all = ["http", "auth_config"])]
    pub(crate) auth: Option<AuthKind>,
    /// The --auth config (TOML: issuer, audience, jwks, agent claim,
    /// scopes; see the auth reference).
    #[arg(long, value_name = "FILE", requires = "auth")]
    pub(crate) auth_config: Option<PathBuf>,
    /// A browser origin allowed besides loopback ones (repeatable).
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub(crate) allow_origin: Vec<String>,
    /// End a session (and its session tier) after this long idle.
    #[arg(long, value_name = "SECS", default_value_t = 1800, requires = "http")]
    pub(crate) session_idle_secs: u64,
    /// Largest request body.
    #[arg(long, value_name = "BYTES", requires = "http")]
    pub(crate) max_body_bytes: Option<usize>,
    /// Requests in flight per token (a token's max_concurrent overrides).
    #[arg(long, value_name = "N", default_value_t = 64, requires = "http")]
    pub(crate) max_concurrent: u32,
    /// Sessions per token (every protocol revision's together).
    #[arg(long, value_name = "N", default_value_t = 64, requires = "http")]
    pub(crate) max_sessions: usize,
    /// Call quotas are shared by the hosts on a store: a host leases
    /// max(1, limit / N) calls at a time (larger leases: fewer store round
    /// trips, a larger possible undershoot; never an overshoot).
    #[arg(long, value_name = "N", default_value_t = 10, requires = "http")]
    pub(crate) quota_lease_divisor: u32,
    /// Time allowed for a request's headers, for its body, and for a
    /// blocked write to a client that stopped reading.
    #[arg(long, value_name = "MS", default_value_t = 10_000, requires = "http")]
    pub(crate) io_timeout_ms: u64,
    /// How often to read the audit trail for registry changes other
    /// processes sharing the store made (announced as
    /// notifications/tools/list_changed); 0 turns polling off. Stdio and
    /// HTTP alike.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub(crate) registry_poll_ms: u64,
}

impl McpHttpArgs {
    pub(crate) fn config(&self) -> Option<temper::mcp::HttpConfig> {
        let addr = self.http.as_ref()?;
        let mut c = temper::mcp::HttpConfig::new(addr.clone());
        c.tokens = self.tokens.clone();
        if self.auth == Some(AuthKind::Jwt) {
            c.jwt = self.auth_config.clone();
        }
        c.allowed_origins = self.allow_origin.clone();
        c.session_idle = std::time::Duration::from_secs(self.session_idle_secs);
        if let Some(n) = self.max_body_bytes {
            c.max_body_bytes = n;
        }
        c.max_concurrent = self.max_concurrent.max(1);
        c.max_sessions = self.max_sessions.max(1);
        c.quota_lease_divisor = self.quota_lease_divisor.max(1);
        let io = std::time::Duration::from_millis(self.io_timeout_ms.max(1));
        (c.header_timeout, c.body_timeout, c.write_timeout) = (io, io, io);
        c.registry_poll = self.registry_poll();
        Some(c)
    }

    pub(crate) fn registry_poll(&self) -> Option<std::time::Duration> {
        (self.registry_poll_ms > 0).then(|| std::time::Duration::from_millis(self.registry_poll_ms))
    }
}

#[derive(Subcommand)]
pub(crate) enum AuditCommand {
    /// Check the hash chain: any edited, removed or reordered entry fails.
    Verify {
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        common: Common,
    },
    /// Print entries.
    Log {
        /// Only entries after this seq.
        #[arg(long, default_value_t = 0)]
        after: i64,
        /// At most this many entries.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Subcommand)]
pub(crate) enum SessionCommand {
    /// End the session: discard its tools (audited as deletions).
    End {
        #[command(flatten)]
        registry: Registry,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args)]
pub(crate) struct Common {
    /// Host policy file (TOML): allowed capabilities, fetch domains,
    /// readable directories, limits. Default: deny everything.
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
    /// Allow fetch to these domain rules (comma-separated; `*.suffix`
    /// wildcards, optional scheme and port), as Deno's --allow-net.
    #[arg(long, value_name = "RULES")]
    pub(crate) allow_net: Option<String>,
    /// Allow reading files under a directory (`HOST[:GUEST]`); repeatable.
    #[arg(long, value_name = "DIR[:GUEST]")]
    pub(crate) allow_read: Vec<String>,
    /// Allow the crypto capability (hashes, HMAC, random).
    #[arg(long)]
    pub(crate) allow_crypto: bool,
    /// Wall-clock limit per call, in milliseconds (default 5000).
    #[arg(long)]
    pub(crate) timeout_ms: Option<u64>,
    /// Memory cap per call, in MiB (default 128).
    #[arg(long)]
    pub(crate) memory_mb: Option<usize>,
    /// Output cap per call, in bytes (default 1 MiB).
    #[arg(long)]
    pub(crate) max_output_bytes: Option<usize>,
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Compiled-component cache directory (default: the platform cache dir).
    #[arg(long)]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Calls after which a hot tool gets its own compiled snapshot,
    /// compiled in the background (0: never; default 1000).
    #[arg(long, value_name = "CALLS")]
    pub(crate) promote_after: Option<u64>,
    /// Deterministic mode: every call reads the same wall clock (the policy's
    /// `epoch_ms`, default the Unix epoch), a standing monotonic clock and
    /// random seeded with SEED (default: the policy file's seed, else 0).
    #[arg(long, value_name = "SEED", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub(crate) deterministic: Option<String>,
    /// Record every fetch exchange that passes the policy into FILE (a JSON
    /// cassette; redirect hops one by one).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub(crate) record: Option<PathBuf>,
    /// Serve fetch from the cassette FILE only, with no network; a request
    /// it does not hold is an error naming method and URL. The policy still
    /// applies.
    #[arg(long, value_name = "FILE")]
    pub(crate) replay: Option<PathBuf>,
}

impl Common {
    pub(crate) fn policy(&self) -> Result<HostPolicy, String> {
        let mut policy =
            temper_embed::load_policy(self.policy.as_deref()).map_err(|e| e.to_string())?;
        if let Some(rules) = &self.allow_net {
            policy = policy.with_allow_net(rules).map_err(|e| e.to_string())?;
        }
        for spec in &self.allow_read {
            policy = policy.with_allow_read(spec).map_err(|e| e.to_string())?;
        }
        if self.allow_crypto {
            policy = policy.with_allow_crypto();
        }
        if let Some(seed) = &self.deterministic {
            let mut determinism = policy.determinism.unwrap_or_default();
            if !seed.is_empty() {
                determinism.seed = seed.parse().map_err(|_| {
                    format!(
                        "--deterministic={seed}: the seed must be an integer from 0 to {}",
                        u64::MAX
                    )
                })?;
            }
            policy = policy.with_determinism(determinism);
        }
        Ok(policy)
    }

    pub(crate) fn runtime(&self) -> Result<Runtime, String> {
        // The flags override the policy's `[limits]`, which override the
        // defaults (the library applies the policy's part).
        let mut builder = temper_embed::RuntimeOptions {
            policy: self.policy()?,
            limits: temper::policy::LimitsConfig {
                timeout_ms: self.timeout_ms,
                memory_mb: self.memory_mb.map(|mb| mb as u64),
                max_output_bytes: self.max_output_bytes.map(|b| b as u64),
            },
            cache_dir: self.cache_dir.clone(),
            promote_after: self.promote_after,
        }
        .builder();
        if let Some(path) = &self.record {
            let cassette = temper::capabilities::cassette::Cassette::record(path)
                .map_err(|e| e.to_string())?;
            builder = builder.cassette(cassette);
        }
        if let Some(path) = &self.replay {
            let cassette = temper::capabilities::cassette::Cassette::replay(path)
                .map_err(|e| e.to_string())?;
            builder = builder.cassette(cassette);
        }
        builder.build().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn common(args: &[&str]) -> Common {
        let mut argv = vec!["temper", "test", "request.json"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).expect("parses").command {
            Command::Test { common, .. } => common,
            _ => unreachable!("the `test` subcommand"),
        }
    }

    #[test]
    fn promote_after_reaches_the_runtime_and_defaults_to_the_librarys() {
        let rt = common(&["--promote-after", "7"]).runtime().unwrap();
        assert_eq!(rt.cache_limits().promote_after_calls, 7);
        let rt = common(&["--promote-after", "0"]).runtime().unwrap();
        assert_eq!(rt.cache_limits().promote_after_calls, 0);
        let rt = common(&[]).runtime().unwrap();
        assert_eq!(
            rt.cache_limits().promote_after_calls,
            temper::limits::DEFAULT_PROMOTE_AFTER_CALLS
        );
        assert!(
            Cli::try_parse_from(["temper", "test", "r.json", "--promote-after", "-1"]).is_err()
        );
    }
}
