//! An upstream MCP server reached over stdio: Temper starts the child with
//! a cleared environment plus the configured `env`, speaks MCP to it as a
//! client (`rmcp`), lists its tools, and calls them with the schema checks
//! and the timeout around each call.
//!
//! The connection is watched: when the child exits, or sends a line that is
//! not JSON-RPC or longer than `max_result_bytes`, the connection ends, the
//! calls in flight fail with the reason (`upstream "search" exited (status
//! 1)`), and the child is started again with backoff (100 ms doubling to
//! 30 s). A `notifications/tools/list_changed` from the upstream makes
//! Temper list its tools again.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{
    NotificationContext, RoleClient, RunningService, RxJsonRpcMessage, TxJsonRpcMessage,
};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::{Notify, watch};

use crate::config::{Transport, UpstreamConfig};

/// Lines of the child's stderr kept for start errors.
const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line kept (longer ones are cut).
const STDERR_LINE_MAX: usize = 512;
/// First restart delay; doubled after each failed start up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest restart delay.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long a failed call waits for the connection's end reason.
const REASON_WAIT: Duration = Duration::from_secs(2);

/// Why an upstream could not be used. Every variant names the upstream;
/// those about a call name the tool. None holds a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// The child did not start or did not complete the MCP handshake.
    #[error("upstream \"{upstream}\": start: {reason}{}", stderr_suffix(.stderr_tail))]
    Start {
        /// The upstream.
        upstream: String,
        /// What failed.
        reason: String,
        /// The last lines of its stderr (secrets from `env` redacted).
        stderr_tail: String,
    },
    /// `tools/list` failed.
    #[error("upstream \"{upstream}\": tools/list: {reason}")]
    List {
        /// The upstream.
        upstream: String,
        /// What failed.
        reason: String,
    },
    /// The input does not match the tool's input schema (nothing was sent).
    #[error("upstream \"{upstream}\" tool \"{tool}\": input {message}")]
    Input {
        /// The upstream.
        upstream: String,
        /// The tool (its name on the upstream).
        tool: String,
        /// The violations.
        message: String,
    },
    /// The output does not match the tool's output schema.
    #[error("upstream \"{upstream}\" tool \"{tool}\": output {message}")]
    Output {
        /// The upstream.
        upstream: String,
        /// The tool.
        tool: String,
        /// The violations.
        message: String,
    },
    /// No answer within `timeout_ms`.
    #[error("upstream \"{upstream}\" tool \"{tool}\": no answer within {ms} ms")]
    Timeout {
        /// The upstream.
        upstream: String,
        /// The tool.
        tool: String,
        /// The limit.
        ms: u128,
    },
    /// The connection ended during the call (the child exited, or sent a
    /// malformed or oversized message).
    #[error("upstream \"{upstream}\" {reason} (calling \"{tool}\")")]
    Gone {
        /// The upstream.
        upstream: String,
        /// The tool.
        tool: String,
        /// `exited (status 1)`, `sent malformed JSON-RPC: ...`, ...
        reason: String,
    },
    /// The upstream is not connected now (restarting, or never started).
    #[error("upstream \"{upstream}\" is not available: {reason}")]
    Unavailable {
        /// The upstream.
        upstream: String,
        /// Why.
        reason: String,
    },
    /// The upstream no longer lists the tool.
    #[error("upstream \"{upstream}\" no longer has tool \"{tool}\"")]
    NoSuchTool {
        /// The upstream.
        upstream: String,
        /// The tool.
        tool: String,
    },
    /// The upstream answered with an error (protocol error or `isError`).
    #[error("upstream \"{upstream}\" tool \"{tool}\": {message}")]
    Call {
        /// The upstream.
        upstream: String,
        /// The tool.
        tool: String,
        /// The upstream's message.
        message: String,
    },
}

fn stderr_suffix(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; stderr:\n{tail}")
    }
}

/// A tool of an upstream as Temper exposes it.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTool {
    /// The exposed name (`prefix` + the upstream's name).
    pub name: String,
    /// The upstream (table name).
    pub upstream: String,
    /// The tool's name on the upstream.
    pub remote_name: String,
    /// Its description (empty when it has none).
    pub description: String,
    /// Its input schema.
    pub input_schema: Value,
    /// Its output schema, when it declares one.
    pub output_schema: Option<Value>,
}

struct ToolEntry {
    spec: UpstreamTool,
    input: jsonschema::Validator,
    output: Option<jsonschema::Validator>,
}

/// One live connection to the child.
struct Conn {
    service: RunningService<RoleClient, Handler>,
    /// `Some(reason)` once the connection has ended.
    ended: watch::Receiver<Option<String>>,
}

struct Shared {
    config: UpstreamConfig,
    /// Secret values to cut out of the child's stderr.
    secrets: Vec<String>,
    tools: Mutex<Arc<Vec<Arc<ToolEntry>>>>,
    conn: Mutex<Option<Arc<Conn>>>,
    /// Why there is no connection, when there is none.
    down: Mutex<String>,
    list_changed: Arc<Notify>,
}

/// A connected upstream MCP server. Dropping it stops the child.
pub struct Upstream {
    shared: Arc<Shared>,
    supervisor: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.supervisor.abort();
        if let Some(conn) = crate::lock(&self.shared.conn).take() {
            conn.service.cancellation_token().cancel();
        }
    }
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.shared.config.name)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Starts the child, completes the MCP handshake and lists its tools,
    /// within the upstream's `timeout_ms`. Keeps it running (restarting it
    /// when it exits) until dropped. Only stdio upstreams are supported.
    pub async fn start(config: UpstreamConfig) -> Result<Self, UpstreamError> {
        let secrets = match &config.transport {
            Transport::Stdio { env, .. } => env
                .values()
                .filter(|s| s.origin().starts_with("env:") && s.expose().len() >= 4)
                .map(|s| s.expose().to_string())
                .collect(),
            Transport::Http { .. } => {
                return Err(UpstreamError::Start {
                    upstream: config.name.clone(),
                    reason: "Streamable HTTP upstreams are not supported yet".into(),
                    stderr_tail: String::new(),
                });
            }
        };
        let shared = Arc::new(Shared {
            config,
            secrets,
            tools: Mutex::new(Arc::new(Vec::new())),
            conn: Mutex::new(None),
            down: Mutex::new("not started".into()),
            list_changed: Arc::new(Notify::new()),
        });
        let conn = shared.connect().await?;
        shared.relist(&conn).await?;
        *crate::lock(&shared.conn) = Some(conn.clone());
        let supervisor = tokio::spawn(supervise(shared.clone(), conn));
        Ok(Self { shared, supervisor })
    }

    /// The upstream's table name.
    pub fn name(&self) -> &str {
        &self.shared.config.name
    }

    /// Its configuration.
    pub fn config(&self) -> &UpstreamConfig {
        &self.shared.config
    }

    /// The exposed tools, as last listed.
    pub fn tools(&self) -> Vec<UpstreamTool> {
        crate::lock(&self.shared.tools)
            .iter()
            .map(|t| t.spec.clone())
            .collect()
    }

    /// Calls the exposed tool `name` with `input`: the input is checked
    /// against its input schema before anything is sent, the output
    /// (`structuredContent`, else the text parsed as JSON when it is JSON,
    /// else `{"text": ...}`) against its output schema; the call is bounded
    /// by `timeout_ms`.
    pub async fn call(&self, name: &str, input: Value) -> Result<Value, UpstreamError> {
        let shared = &self.shared;
        let up = shared.config.name.clone();
        let entry = crate::lock(&shared.tools)
            .iter()
            .find(|t| t.spec.name == name)
            .cloned();
        let Some(entry) = entry else {
            let remote = name
                .strip_prefix(shared.config.prefix.as_str())
                .unwrap_or(name);
            return Err(UpstreamError::NoSuchTool {
                upstream: up,
                tool: remote.to_string(),
            });
        };
        let tool = entry.spec.remote_name.clone();
        check(&entry.input, &input).map_err(|message| UpstreamError::Input {
            upstream: up.clone(),
            tool: tool.clone(),
            message: format!("does not match inputSchema: {message}"),
        })?;
        let arguments = match input {
            Value::Object(map) => map,
            other => {
                return Err(UpstreamError::Input {
                    upstream: up,
                    tool,
                    message: format!("must be a JSON object, got {other}"),
                });
            }
        };
        let conn = crate::lock(&shared.conn).clone();
        let Some(conn) = conn else {
            return Err(UpstreamError::Unavailable {
                upstream: up,
                reason: crate::lock(&shared.down).clone(),
            });
        };
        let params = CallToolRequestParams::new(tool.clone()).with_arguments(arguments);
        let timeout = shared.config.timeout;
        let result = match tokio::time::timeout(timeout, conn.service.call_tool(params)).await {
            Err(_) => {
                return Err(UpstreamError::Timeout {
                    upstream: up,
                    tool,
                    ms: timeout.as_millis(),
                });
            }
            Ok(Err(e)) => {
                return Err(match e {
                    rmcp::ServiceError::McpError(data) => UpstreamError::Call {
                        upstream: up,
                        tool,
                        message: format!("error {}: {}", data.code.0, data.message),
                    },
                    other => {
                        let reason = end_reason(&conn, other.to_string()).await;
                        UpstreamError::Gone {
                            upstream: up,
                            tool,
                            reason,
                        }
                    }
                });
            }
            Ok(Ok(result)) => result,
        };
        let output = output_of(result).map_err(|message| UpstreamError::Call {
            upstream: up.clone(),
            tool: tool.clone(),
            message,
        })?;
        if let Some(schema) = &entry.output {
            check(schema, &output).map_err(|message| UpstreamError::Output {
                upstream: up,
                tool,
                message: format!("does not match outputSchema: {message}"),
            })?;
        }
        Ok(output)
    }
}

/// The reason the connection ended, waiting briefly for it; `fallback` when
/// it is still up (the error was something else).
async fn end_reason(conn: &Conn, fallback: String) -> String {
    let mut ended = conn.ended.clone();
    match tokio::time::timeout(REASON_WAIT, ended.wait_for(Option::is_some)).await {
        Ok(Ok(reason)) => reason.clone().unwrap_or(fallback),
        _ => fallback,
    }
}

/// The output of a tool call, or the upstream's error text when `isError`.
fn output_of(result: CallToolResult) -> Result<Value, String> {
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("");
    if result.is_error == Some(true) {
        let text = if text.is_empty() {
            "the tool reported an error".to_string()
        } else {
            shorten(&text, 2000)
        };
        return Err(text);
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    Ok(serde_json::from_str(&text).unwrap_or_else(|_| json!({ "text": text })))
}

fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

fn check(validator: &jsonschema::Validator, value: &Value) -> Result<(), String> {
    let violations: Vec<String> = validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "(root)".into() } else { at };
            format!("{at}: {e}")
        })
        .collect();
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations.join("; "))
    }
}

/// The connection's end reason, once it has ended.
async fn wait_ended(ended: &mut watch::Receiver<Option<String>>) -> String {
    match ended.wait_for(Option::is_some).await {
        Ok(r) => r.clone().unwrap_or_default(),
        Err(_) => "ended".into(),
    }
}

/// Keeps the upstream connected: waits for the connection to end, then
/// starts the child again with backoff; relists the tools on
/// `list_changed`.
async fn supervise(shared: Arc<Shared>, mut conn: Arc<Conn>) {
    let name = shared.config.name.clone();
    loop {
        let mut ended = conn.ended.clone();
        let reason = loop {
            tokio::select! {
                reason = wait_ended(&mut ended) => break reason,
                _ = shared.list_changed.notified() => {
                    if let Err(e) = shared.relist(&conn).await {
                        tracing::warn!(upstream = %name, error = %e, "tools/list after list_changed failed");
                    }
                }
            }
        };
        tracing::warn!(upstream = %name, %reason, "upstream connection ended; restarting");
        *crate::lock(&shared.down) = format!("{reason}; restarting");
        crate::lock(&shared.conn).take();
        let mut backoff = FIRST_BACKOFF;
        conn = loop {
            tokio::time::sleep(backoff).await;
            match shared.connect().await {
                Ok(c) => match shared.relist(&c).await {
                    Ok(()) => break c,
                    Err(e) => {
                        tracing::warn!(upstream = %name, error = %e, "restart failed");
                        *crate::lock(&shared.down) = e.to_string();
                    }
                },
                Err(e) => {
                    tracing::warn!(upstream = %name, error = %e, "restart failed");
                    *crate::lock(&shared.down) = e.to_string();
                }
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        };
        tracing::info!(upstream = %name, "upstream restarted");
        *crate::lock(&shared.conn) = Some(conn.clone());
    }
}

impl Shared {
    fn start_error(&self, reason: String, tail: &Arc<Mutex<VecDeque<String>>>) -> UpstreamError {
        UpstreamError::Start {
            upstream: self.config.name.clone(),
            reason,
            stderr_tail: crate::lock(tail)
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// Spawns the child and completes the handshake.
    async fn connect(self: &Arc<Self>) -> Result<Arc<Conn>, UpstreamError> {
        let Transport::Stdio { command, env } = &self.config.transport else {
            unreachable!("checked in start")
        };
        let mut cmd = Command::new(&command[0]);
        cmd.args(&command[1..])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v.expose())))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let mut child = cmd
            .spawn()
            .map_err(|e| self.start_error(format!("cannot run {:?}: {e}", command[0]), &tail))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let stderr_done = tokio::spawn(read_stderr(
            self.config.name.clone(),
            stderr,
            self.secrets.clone(),
            tail.clone(),
        ));

        let (ended_tx, ended_rx) = watch::channel(None);
        let closed = Arc::new(Notify::new());
        let fault = Arc::new(Mutex::new(None));
        let transport = LineTransport {
            read: BufReader::new(stdout),
            line: Vec::new(),
            max: self.config.max_result_bytes,
            discarding: false,
            write: Arc::new(tokio::sync::Mutex::new(stdin)),
            fault: fault.clone(),
            closed: closed.clone(),
        };
        // The child's end: exit, or the transport's close (fault or EOF).
        let name = self.config.name.clone();
        let (exit_tx, exit_rx) = watch::channel(None::<String>);
        tokio::spawn(async move {
            let reason = tokio::select! {
                status = child.wait() => exit_text(status),
                _ = closed.notified() => {
                    let fault = crate::lock(&fault).clone();
                    match fault {
                        Some(fault) => {
                            let _ = child.start_kill();
                            let _ = child.wait().await;
                            fault
                        }
                        None => match tokio::time::timeout(REASON_WAIT, child.wait()).await {
                            Ok(status) => exit_text(status),
                            Err(_) => {
                                let _ = child.start_kill();
                                let _ = child.wait().await;
                                "closed its stdout".to_string()
                            }
                        },
                    }
                }
            };
            let _ = stderr_done.await;
            tracing::debug!(upstream = %name, %reason, "upstream connection ended");
            let _ = exit_tx.send(Some(reason.clone()));
            let _ = ended_tx.send(Some(reason));
        });

        let handler = Handler {
            list_changed: self.list_changed.clone(),
        };
        let started = tokio::time::timeout(self.config.timeout, handler.serve(transport)).await;
        let service = match started {
            Ok(Ok(service)) => service,
            Ok(Err(e)) => {
                let mut exit_rx = exit_rx;
                let exit = tokio::time::timeout(REASON_WAIT, exit_rx.wait_for(Option::is_some))
                    .await
                    .ok()
                    .and_then(|r| r.ok().and_then(|r| r.clone()));
                let reason = match exit {
                    Some(exit) => format!("{exit} during the MCP handshake"),
                    None => format!("MCP handshake failed: {e}"),
                };
                return Err(self.start_error(reason, &tail));
            }
            Err(_) => {
                return Err(self.start_error(
                    format!(
                        "no MCP handshake within {} ms",
                        self.config.timeout.as_millis()
                    ),
                    &tail,
                ));
            }
        };
        Ok(Arc::new(Conn {
            service,
            ended: ended_rx,
        }))
    }

    /// Lists the upstream's tools and keeps the selected ones whose schemas
    /// compile (the others are skipped with a warning).
    async fn relist(&self, conn: &Conn) -> Result<(), UpstreamError> {
        let name = &self.config.name;
        let listed = tokio::time::timeout(self.config.timeout, conn.service.list_all_tools())
            .await
            .map_err(|_| UpstreamError::List {
                upstream: name.clone(),
                reason: format!("no answer within {} ms", self.config.timeout.as_millis()),
            })?;
        let listed = match listed {
            Ok(l) => l,
            Err(e) => {
                let reason = end_reason(conn, e.to_string()).await;
                return Err(UpstreamError::List {
                    upstream: name.clone(),
                    reason,
                });
            }
        };
        let mut tools = Vec::new();
        for tool in listed {
            if !self.config.tools.selects(&tool.name) {
                continue;
            }
            match self.entry(tool) {
                Ok(entry) => tools.push(Arc::new(entry)),
                Err((tool, reason)) => {
                    tracing::warn!(upstream = %name, %tool, %reason, "upstream tool skipped");
                }
            }
        }
        if let crate::config::ToolSelection::Only(wanted) = &self.config.tools {
            for w in wanted {
                if !tools.iter().any(|t| &t.spec.remote_name == w) {
                    tracing::warn!(upstream = %name, tool = %w, "the tools file selects a tool the upstream does not list");
                }
            }
        }
        *crate::lock(&self.tools) = Arc::new(tools);
        Ok(())
    }

    fn entry(&self, tool: Tool) -> Result<ToolEntry, (String, String)> {
        let remote = tool.name.to_string();
        let input_schema = Value::Object((*tool.input_schema).clone());
        let output_schema = tool.output_schema.map(|s| Value::Object((*s).clone()));
        let input = jsonschema::validator_for(&input_schema)
            .map_err(|e| (remote.clone(), format!("inputSchema does not compile: {e}")))?;
        let output = output_schema
            .as_ref()
            .map(jsonschema::validator_for)
            .transpose()
            .map_err(|e| {
                (
                    remote.clone(),
                    format!("outputSchema does not compile: {e}"),
                )
            })?;
        Ok(ToolEntry {
            spec: UpstreamTool {
                name: format!("{}{remote}", self.config.prefix),
                upstream: self.config.name.clone(),
                remote_name: remote,
                description: tool.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema,
                output_schema,
            },
            input,
            output,
        })
    }
}

fn exit_text(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(s) => match s.code() {
            Some(code) => format!("exited (status {code})"),
            None => {
                use std::os::unix::process::ExitStatusExt;
                match s.signal() {
                    Some(sig) => format!("exited (signal {sig})"),
                    None => "exited".to_string(),
                }
            }
        },
        Err(e) => format!("exited (wait failed: {e})"),
    }
}

/// Reads the child's stderr: each line (secrets cut out) goes to `tracing`
/// at debug level and into the bounded tail.
async fn read_stderr(
    upstream: String,
    stderr: tokio::process::ChildStderr,
    secrets: Vec<String>,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut lines = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // Bounded: a line longer than the cap is cut, the rest skipped.
        match read_bounded_line(&mut lines, &mut buf, STDERR_LINE_MAX).await {
            Ok(false) => break,
            Ok(true) => {}
            Err(_) => break,
        }
        let mut line = String::from_utf8_lossy(&buf).trim_end().to_string();
        for s in &secrets {
            line = line.replace(s.as_str(), "[redacted]");
        }
        tracing::debug!(target: "temper_hub::stderr", upstream = %upstream, "{line}");
        let mut tail = crate::lock(&tail);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}

/// Reads one line into `buf`, keeping at most `max` bytes of it; false at
/// end of stream.
async fn read_bounded_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<bool> {
    let mut any = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(any);
        }
        any = true;
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = max.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..take.min(room)]);
        r.consume(take);
        if done {
            return Ok(true);
        }
    }
}

/// The client handler: notes `list_changed`.
struct Handler {
    list_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.list_changed.notify_one();
        std::future::ready(())
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.client_info.name = "temper".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }
}

/// Newline-delimited JSON-RPC over the child's stdin/stdout, where a line
/// that is not JSON-RPC, or longer than the cap, ends the connection with
/// that reason (rmcp's own stdio transport skips such lines, which would
/// leave the call waiting for its timeout).
struct LineTransport {
    read: BufReader<ChildStdout>,
    line: Vec<u8>,
    max: usize,
    discarding: bool,
    write: Arc<tokio::sync::Mutex<ChildStdin>>,
    fault: Arc<Mutex<Option<String>>>,
    closed: Arc<Notify>,
}

impl LineTransport {
    fn end(&self, fault: Option<String>) -> Option<RxJsonRpcMessage<RoleClient>> {
        if let Some(f) = fault {
            crate::lock(&self.fault).get_or_insert(f);
        }
        self.closed.notify_one();
        None
    }
}

impl rmcp::transport::Transport<RoleClient> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        async move {
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut w = write.lock().await;
            w.write_all(&bytes).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        // Cancel-safe: the partial line stays in `self.line` between polls.
        loop {
            let chunk = match self.read.fill_buf().await {
                Ok(c) => c,
                Err(e) => return self.end(Some(format!("stdout read failed: {e}"))),
            };
            if chunk.is_empty() {
                return self.end(None);
            }
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            if self.line.len() + take > self.max + 1 {
                self.discarding = true;
            }
            if !self.discarding {
                self.line.extend_from_slice(&chunk[..take]);
            }
            self.read.consume(take);
            if !done {
                if self.discarding {
                    let max = self.max;
                    return self.end(Some(format!("sent a message over the {max}-byte cap")));
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(text) {
                Ok(msg) => Some(msg),
                // The line itself is not quoted: it may hold anything.
                Err(e) => self.end(Some(format!("sent malformed JSON-RPC ({e})"))),
            };
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.closed.notify_one();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
