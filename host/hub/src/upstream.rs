//! An upstream MCP server: Temper speaks MCP to it as a client (`rmcp`),
//! lists its tools, and calls them with the schema checks and the timeout
//! around each call. This module holds the session logic shared by the
//! transports; [`stdio`] starts and owns a child process, [`output`] turns
//! a call's result into the tool's output.
//!
//! The connection is watched: when the child exits, or sends a line that is
//! not JSON-RPC or longer than `max_result_bytes`, the connection ends, the
//! calls in flight fail with the reason (`upstream "search" exited (status
//! 1)`), and the child is started again with backoff (100 ms doubling to
//! 30 s). A `notifications/tools/list_changed` from the upstream makes
//! Temper list its tools again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::service::{RoleClient, RunningService};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::{Notify, broadcast, mpsc, watch};

use crate::config::{Transport, UpstreamConfig};

mod client_handler;
mod direct;
mod features;
use client_handler::Handler;
mod http;
mod http_client;
mod output;
mod relay;
mod stdio;
mod strict;

pub use features::{Feature, ListChange, template_matches};
use output::{Bad, check, read_result};
pub use output::{CallOutput, ToolResult, value_of_content};
pub use relay::{AskRefused, CallNote, RELAY_QUEUE, Relay, RelayRequests, UpstreamAsk};

/// First restart delay; doubled after each failed start up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest restart delay.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// List changes a subscriber may fall behind by before it hears "lagged"
/// (then it should take every list as changed).
pub const LIST_CHANGES: usize = 16;
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
    /// A request other than a tool call (a resources or prompts method)
    /// failed.
    #[error("upstream \"{upstream}\": {method}: {message}")]
    Request {
        /// The upstream.
        upstream: String,
        /// The method (`resources/read`, ...).
        method: String,
        /// What failed.
        message: String,
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
    /// The tool as the upstream listed it (`title`, `annotations`,
    /// `execution`, `icons`, `outputSchema`, `_meta`, ... unchanged), with
    /// the exposed name and the tools file's annotation overrides.
    pub definition: Map<String, Value>,
}

struct ToolEntry {
    spec: UpstreamTool,
    input: jsonschema::Validator,
    output: Option<jsonschema::Validator>,
}

/// One live connection (to the child, or a session with the server).
struct Conn {
    service: RunningService<RoleClient, Handler>,
    /// `Some(reason)` once the connection has ended.
    ended: watch::Receiver<Option<String>>,
    /// A stdio connection's direct path for `tools/call` (`direct.rs`).
    direct: Option<Arc<direct::Direct>>,
}

struct Shared {
    config: UpstreamConfig,
    /// Secret values (from `env` or `headers`) cut out of the child's
    /// stderr and of every error message.
    secrets: Vec<String>,
    tools: Mutex<Arc<Vec<Arc<ToolEntry>>>>,
    /// Moves each time `tools` is replaced (a relist).
    generation: AtomicU64,
    conn: Mutex<Option<Arc<Conn>>>,
    /// Why there is no connection, when there is none.
    down: Mutex<String>,
    list_changed: Arc<Notify>,
    /// Where its list changes are announced.
    changes: broadcast::Sender<ListChange>,
    /// The progress tokens of the calls in flight through rmcp (Streamable
    /// HTTP) whose callers asked for progress, and where it goes.
    http_progress: ProgressRoutes,
}

/// Progress tokens of calls in flight → their relays (bounded by the calls
/// in flight: an entry leaves when its call ends).
pub(super) type ProgressRoutes =
    Arc<Mutex<std::collections::HashMap<String, mpsc::Sender<CallNote>>>>;

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
    /// Starts the child (stdio) or opens a session (Streamable HTTP),
    /// completes the MCP handshake and lists its tools, within the
    /// upstream's `timeout_ms`. Keeps it connected (restarting the child
    /// when it exits, reconnecting when the server is lost) until dropped.
    pub async fn start(config: UpstreamConfig) -> Result<Self, UpstreamError> {
        Self::start_reporting(config, broadcast::channel(LIST_CHANGES).0).await
    }

    /// [`Self::start`], announcing its list changes to `changes`.
    pub async fn start_reporting(
        config: UpstreamConfig,
        changes: broadcast::Sender<ListChange>,
    ) -> Result<Self, UpstreamError> {
        let secrets = match &config.transport {
            Transport::Stdio { env, .. } => env
                .values()
                .filter(|s| s.origin().starts_with("env:") && s.expose().len() >= 4)
                .map(|s| s.expose().to_string())
                .collect(),
            // Every header value: an `Authorization` written literally is
            // as secret as one read from the environment.
            Transport::Http { headers, .. } => headers
                .values()
                .filter(|s| s.expose().len() >= 4)
                .map(|s| s.expose().to_string())
                .collect(),
        };
        let shared = Arc::new(Shared {
            config,
            secrets,
            tools: Mutex::new(Arc::new(Vec::new())),
            generation: AtomicU64::new(0),
            conn: Mutex::new(None),
            down: Mutex::new("not started".into()),
            list_changed: Arc::new(Notify::new()),
            changes,
            http_progress: ProgressRoutes::default(),
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

    /// A counter that moves each time the tools are listed again: equal
    /// values mean an unchanged list.
    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// Whether it exposes the tool `name` now (without copying the list).
    pub fn has_tool(&self, name: &str) -> bool {
        crate::lock(&self.shared.tools)
            .iter()
            .any(|t| t.spec.name == name)
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
    /// against its output schema; the call is bounded by `timeout_ms`. The
    /// value is the output's ([`CallOutput::value`]); an `isError` result
    /// is an [`UpstreamError::Call`] with the upstream's text.
    pub async fn call(&self, name: &str, input: Value) -> Result<Value, UpstreamError> {
        let out = self.call_output(name, input, None).await?;
        match out.error {
            None => Ok(out.value),
            Some(message) => Err(UpstreamError::Call {
                upstream: self.name().to_string(),
                tool: self.remote_name(name),
                message,
            }),
        }
    }

    /// The upstream's own name of the exposed tool `name`.
    fn remote_name(&self, name: &str) -> String {
        name.strip_prefix(self.shared.config.prefix.as_str())
            .unwrap_or(name)
            .to_string()
    }

    /// [`Self::call`] for a gateway: the upstream's result as it came
    /// ([`CallOutput::result`]), an `isError` result included
    /// ([`CallOutput::error`]). With a `relay`, what the upstream sends
    /// for the call (progress, when the caller asked for it; log messages
    /// and requests, when attributable) goes there (stdio upstreams; see
    /// [`Relay`]). The checks are the same.
    pub async fn call_output(
        &self,
        name: &str,
        input: Value,
        relay: Option<Relay>,
    ) -> Result<CallOutput, UpstreamError> {
        let shared = &self.shared;
        // The names are copied into an error only (none on a call that
        // succeeds).
        let up = || shared.config.name.clone();
        let entry = crate::lock(&shared.tools)
            .iter()
            .find(|t| t.spec.name == name)
            .cloned();
        let Some(entry) = entry else {
            return Err(UpstreamError::NoSuchTool {
                upstream: up(),
                tool: self.remote_name(name),
            });
        };
        let tool = entry.spec.remote_name.as_str();
        check(&entry.input, &input).map_err(|message| UpstreamError::Input {
            upstream: up(),
            tool: tool.to_string(),
            message: format!("does not match inputSchema: {message}"),
        })?;
        let arguments = match input {
            Value::Object(map) => map,
            other => {
                return Err(UpstreamError::Input {
                    upstream: up(),
                    tool: tool.to_string(),
                    message: format!("must be a JSON object, got {other}"),
                });
            }
        };
        let conn = crate::lock(&shared.conn).clone();
        let Some(conn) = conn else {
            return Err(UpstreamError::Unavailable {
                upstream: up(),
                reason: crate::lock(&shared.down).clone(),
            });
        };
        let timeout = shared.config.timeout;
        let raw = match conn.direct.as_ref().filter(|d| d.enabled()) {
            Some(direct) => {
                let mut params = Map::new();
                params.insert("name".into(), Value::String(tool.to_string()));
                params.insert("arguments".into(), Value::Object(arguments));
                match direct.request("tools/call", &params, relay, timeout).await {
                    Ok(direct::Reply::Result(raw)) => Ok(raw),
                    Ok(direct::Reply::Error(message)) => Err(message),
                    Err(direct::NoReply::Timeout) => {
                        return Err(UpstreamError::Timeout {
                            upstream: up(),
                            tool: tool.to_string(),
                            ms: timeout.as_millis(),
                        });
                    }
                    Err(direct::NoReply::Gone(write_error)) => {
                        let fallback = write_error.unwrap_or_else(|| "connection closed".into());
                        let reason = end_reason(&conn, fallback).await;
                        return Err(UpstreamError::Gone {
                            upstream: up(),
                            tool: tool.to_string(),
                            reason: shared.redact(reason),
                        });
                    }
                }
            }
            None => shared.call_rmcp(&conn, tool, arguments, relay).await?,
        };
        let raw = raw.map_err(|message| UpstreamError::Call {
            upstream: up(),
            tool: tool.to_string(),
            message: shared.redact(message),
        })?;
        let output = read_result(raw).map_err(|bad| match bad {
            Bad::Result(message) => UpstreamError::Call {
                upstream: up(),
                tool: tool.to_string(),
                message: shared.redact(message),
            },
            Bad::Structured(message) => UpstreamError::Output {
                upstream: up(),
                tool: tool.to_string(),
                message: shared.redact(message),
            },
        })?;
        let mut output = output;
        output.error = output.error.map(|e| shared.redact(e));
        output.result = output.result.map(|r| shared.redact_result(r));
        if let Some(schema) = &entry.output
            && output.error.is_none()
        {
            check(schema, &output.value).map_err(|message| UpstreamError::Output {
                upstream: up(),
                tool: tool.to_string(),
                message: format!("does not match outputSchema: {message}"),
            })?;
        }
        Ok(output)
    }
}

/// `text` with every one of `secrets` cut out (as `[redacted]`): what an
/// upstream says is cut this way before Temper shows or relays it.
fn redact(secrets: &[String], text: String) -> String {
    let mut text = text;
    for s in secrets {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), "[redacted]");
        }
    }
    text
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

/// The connection's end reason, once it has ended.
async fn wait_ended(ended: &mut watch::Receiver<Option<String>>) -> String {
    match ended.wait_for(Option::is_some).await {
        Ok(r) => r.clone().unwrap_or_default(),
        Err(_) => "ended".into(),
    }
}

/// Keeps the upstream connected: waits for the connection to end, then
/// starts the child again (or opens a new session) with backoff; relists
/// the tools on `list_changed`.
async fn supervise(shared: Arc<Shared>, mut conn: Arc<Conn>) {
    let name = shared.config.name.clone();
    loop {
        let mut ended = conn.ended.clone();
        let reason = loop {
            tokio::select! {
                reason = wait_ended(&mut ended) => break reason,
                _ = shared.list_changed.notified() => {
                    match shared.relist(&conn).await {
                        Ok(()) => {
                            let _ = shared.changes.send(ListChange::Tools);
                        }
                        Err(e) => tracing::warn!(upstream = %name, error = %e, "tools/list after list_changed failed"),
                    }
                }
            }
        };
        let again = match shared.config.transport {
            Transport::Stdio { .. } => "restarting",
            Transport::Http { .. } => "reconnecting",
        };
        tracing::warn!(upstream = %name, %reason, "upstream connection ended; {again}");
        *crate::lock(&shared.down) = format!("{reason}; {again}");
        crate::lock(&shared.conn).take();
        // rmcp's HTTP worker would go on retrying its event stream.
        conn.service.cancellation_token().cancel();
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
        // Listed again: it may list other tools now.
        let _ = shared.changes.send(ListChange::Tools);
    }
}

impl Shared {
    /// A result to pass on with every secret value cut out of its text (an
    /// upstream that echoes the `Authorization` it was sent must not show
    /// it to Temper's caller); as it is when it holds none.
    fn redact_result(&self, result: ToolResult) -> ToolResult {
        if self.secrets.is_empty() {
            return result;
        }
        let text = match &result {
            ToolResult::Raw(raw) => std::borrow::Cow::Borrowed(raw.get()),
            ToolResult::Value(map) => match serde_json::to_string(map) {
                Ok(text) => std::borrow::Cow::Owned(text),
                Err(_) => return result,
            },
        };
        let holds = self
            .secrets
            .iter()
            .any(|s| memchr::memmem::find(text.as_bytes(), s.as_bytes()).is_some());
        if !holds {
            return result;
        }
        let redacted = self.redact(text.into_owned());
        match RawValue::from_string(redacted) {
            Ok(raw) => ToolResult::Raw(raw),
            // A secret cut out of an escape: nothing of it is passed on.
            Err(_) => ToolResult::Value(Map::from_iter([(
                "content".to_string(),
                serde_json::json!([{"type": "text", "text": "[redacted]"}]),
            )])),
        }
    }

    /// `text` with every secret value cut out.
    fn redact(&self, text: String) -> String {
        redact(&self.secrets, text)
    }

    /// Opens a connection (for stdio: starts the child; for Streamable
    /// HTTP: opens a session) and completes the MCP handshake.
    async fn connect(self: &Arc<Self>) -> Result<Arc<Conn>, UpstreamError> {
        match &self.config.transport {
            Transport::Stdio { command, env } => self.connect_stdio(command, env).await,
            Transport::Http { url, headers } => self.connect_http(url, headers).await,
        }
    }

    /// Lists the upstream's tools and keeps the selected ones whose schemas
    /// compile (the others are skipped with a warning).
    async fn relist(&self, conn: &Conn) -> Result<(), UpstreamError> {
        let name = &self.config.name;
        let listed = self
            .list_tools(conn)
            .await
            .map_err(|reason| UpstreamError::List {
                upstream: name.clone(),
                reason: self.redact(reason),
            })?;
        let mut tools = Vec::new();
        for tool in listed {
            let Some(remote) = tool.get("name").and_then(Value::as_str) else {
                tracing::warn!(upstream = %name, "upstream tool without a name skipped");
                continue;
            };
            if !self.config.tools.selects(remote) {
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
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Every tool the upstream lists, each as the upstream wrote it: on
    /// stdio read from the upstream's own answers (every page), over
    /// Streamable HTTP as rmcp models them (members rmcp does not know,
    /// such as `execution`, are not kept).
    async fn list_tools(&self, conn: &Conn) -> Result<Vec<Map<String, Value>>, String> {
        let timeout = self.config.timeout;
        let Some(direct) = conn.direct.as_ref().filter(|d| d.enabled()) else {
            let listed = tokio::time::timeout(timeout, conn.service.list_all_tools())
                .await
                .map_err(|_| format!("no answer within {} ms", timeout.as_millis()))?;
            return match listed {
                Ok(tools) => Ok(tools
                    .iter()
                    .filter_map(|t| match serde_json::to_value(t) {
                        Ok(Value::Object(map)) => Some(map),
                        _ => None,
                    })
                    .collect()),
                Err(e) => Err(match http_client::describe(&e) {
                    Some(reason) => reason,
                    None => end_reason(conn, e.to_string()).await,
                }),
            };
        };
        #[derive(serde::Deserialize)]
        struct Page {
            tools: Vec<Map<String, Value>>,
            #[serde(rename = "nextCursor", default)]
            next_cursor: Option<String>,
        }
        let mut tools = Vec::new();
        let mut params = Map::new();
        for _ in 0..MAX_PAGES {
            let page = match direct.request("tools/list", &params, None, timeout).await {
                Ok(direct::Reply::Result(raw)) => serde_json::from_str::<Page>(raw.get())
                    .map_err(|e| format!("sent a tools/list result Temper does not read: {e}"))?,
                Ok(direct::Reply::Error(message)) => return Err(message),
                Err(direct::NoReply::Timeout) => {
                    return Err(format!("no answer within {} ms", timeout.as_millis()));
                }
                Err(direct::NoReply::Gone(e)) => {
                    return Err(
                        end_reason(conn, e.unwrap_or_else(|| "connection closed".into())).await,
                    );
                }
            };
            tools.extend(page.tools);
            match page.next_cursor {
                Some(cursor) => {
                    params.insert("cursor".into(), Value::String(cursor));
                }
                None => return Ok(tools),
            }
        }
        Err(format!("listed more than {MAX_PAGES} pages of tools"))
    }

    /// The entry of the upstream tool `tool` (as listed): its schemas
    /// compiled, its definition with the exposed name and the tools
    /// file's annotation overrides.
    fn entry(&self, mut tool: Map<String, Value>) -> Result<ToolEntry, (String, String)> {
        let remote = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let input_schema = match tool.get("inputSchema") {
            Some(s @ Value::Object(_)) => s.clone(),
            _ => {
                return Err((remote, "inputSchema is not a JSON object".into()));
            }
        };
        let output_schema = match tool.get("outputSchema") {
            None | Some(Value::Null) => None,
            Some(s @ Value::Object(_)) => Some(s.clone()),
            Some(_) => return Err((remote, "outputSchema is not a JSON object".into())),
        };
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
        let description = tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let name = format!("{}{remote}", self.config.prefix);
        tool.insert("name".into(), Value::String(name.clone()));
        if let Some(overrides) = self.config.annotations.get(&remote) {
            let annotations = tool
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            if !annotations.is_object() {
                *annotations = Value::Object(Map::new());
            }
            if let Value::Object(annotations) = annotations {
                for (k, v) in overrides {
                    annotations.insert(k.clone(), v.clone());
                }
            }
        }
        Ok(ToolEntry {
            spec: UpstreamTool {
                name,
                upstream: self.config.name.clone(),
                remote_name: remote,
                description,
                input_schema,
                output_schema,
                definition: tool,
            },
            input,
            output,
        })
    }
}

/// Most pages of a listing read from one upstream.
const MAX_PAGES: usize = 100;

#[cfg(test)]
mod tests;
