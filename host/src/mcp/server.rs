//! One MCP connection over a byte stream pair (stdin/stdout for `temper
//! mcp`).
//!
//! A reader thread cuts the input into frames ([`jsonrpc::read_frame`]); a
//! writer thread owns the output and writes one message per line, so
//! messages never interleave and the output carries protocol messages only
//! (diagnostics go to stderr). Every request runs in its own task: a slow
//! forge or tool call does not hold up `ping` or `tools/list`. A handler that
//! panics still gets its request answered (`-32603`). Bad input of any kind
//! is answered and reading goes on; at the end of the input the server
//! waits for the requests in flight, discards the connection's session tier
//! ([`Forge::cleanup_session`]) and returns.
//!
//! Requests are served before `initialize` too (the server is lenient);
//! `notifications/cancelled` is accepted and ignored (a forge or call runs
//! to its end, bounded by the engine's limits, so the audit trail stays
//! whole).

use std::io::{self, BufReader, Read, Write};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::jsonrpc::{
    self, Frame, INVALID_REQUEST, Incoming, MAX_MESSAGE_BYTES, Rejected, RpcError,
};
use super::tools::{self, FORGE_TOOL};
use crate::forge::{Forge, ForgeContext, ForgeResult, InvokeError, Stage};
use crate::store::StoreError;

/// MCP protocol versions this server speaks, newest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The version to answer `initialize` with: the client's, when supported,
/// else the newest this server supports (the client then decides).
pub fn negotiate_version(requested: &str) -> &'static str {
    SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(SUPPORTED_PROTOCOL_VERSIONS[0])
}

/// Why a connection ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// Reading the input failed (not: it ended).
    #[error("mcp: cannot read the input: {0}")]
    Read(#[source] io::Error),
    /// A reader or writer thread could not be started.
    #[error("mcp: cannot start the {what} thread: {source}")]
    Thread {
        /// `reader` or `writer`.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Discarding the connection's session tier failed (its audit entries
    /// could not be written).
    #[error("mcp: cannot discard the connection's session tier: {0}")]
    Cleanup(#[source] StoreError),
}

/// The context of one connection: `base`'s agent, and a session of its own,
/// `BASE_SESSION/mcp-PID-MILLIS`, so that the connection starts with an
/// empty session tier and what it forges is discarded when it closes
/// (tools the CLI keeps in `base`'s session are not visible to it).
pub fn connection_context(base: &ForgeContext) -> ForgeContext {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    ForgeContext::new(
        base.agent_id.clone(),
        format!("{}/mcp-{}-{millis}", base.session_id, std::process::id()),
    )
}

/// Serves one connection on stdin/stdout (see [`serve`]).
pub async fn serve_stdio(forge: Forge, ctx: ForgeContext) -> Result<usize, McpError> {
    serve(forge, ctx, io::stdin(), io::stdout()).await
}

/// Serves one connection: reads messages from `input` until it ends, answers
/// on `output`, then discards `ctx`'s session tier. Returns how many
/// session tools were discarded.
pub async fn serve<R, W>(
    forge: Forge,
    ctx: ForgeContext,
    input: R,
    output: W,
) -> Result<usize, McpError>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Value>();
    let writer = std::thread::Builder::new()
        .name("mcp-writer".into())
        .spawn(move || write_loop(output, out_rx))
        .map_err(|source| McpError::Thread {
            what: "writer",
            source,
        })?;
    let (frame_tx, mut frames) = mpsc::channel::<io::Result<Frame>>(4);
    std::thread::Builder::new()
        .name("mcp-reader".into())
        .spawn(move || read_loop(input, frame_tx))
        .map_err(|source| McpError::Thread {
            what: "reader",
            source,
        })?;

    let conn = Arc::new(Connection {
        forge,
        ctx,
        out: out_tx,
    });
    let mut requests = JoinSet::new();
    let ended = loop {
        let frame = match frames.recv().await {
            None | Some(Ok(Frame::Eof)) => break Ok(()),
            Some(Err(e)) => break Err(McpError::Read(e)),
            Some(Ok(frame)) => frame,
        };
        match frame {
            Frame::Eof => unreachable!("handled above"),
            Frame::TooLarge { bytes } => {
                eprintln!("temper mcp: refused a message of {bytes} bytes");
                let error = RpcError::new(
                    INVALID_REQUEST,
                    format!("message of {bytes} bytes is over the {MAX_MESSAGE_BYTES}-byte limit"),
                );
                conn.send(jsonrpc::error_response(&Value::Null, &error));
            }
            Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace) => {}
            Frame::Line(line) => match jsonrpc::parse_message(&line) {
                Err(Rejected { id, error }) => {
                    eprintln!("temper mcp: {error}");
                    conn.send(jsonrpc::error_response(&id, &error));
                }
                Ok(Incoming::Request { id, method, params }) => {
                    requests.spawn(conn.clone().answer(id, method, params));
                }
                Ok(Incoming::Notification { method, .. }) => {
                    if !method.starts_with("notifications/") {
                        eprintln!("temper mcp: ignoring unknown notification {method:?}");
                    }
                }
                Ok(Incoming::Response { id }) => {
                    eprintln!(
                        "temper mcp: ignoring a response (id {id}): this server sends no requests"
                    );
                }
            },
        }
        while requests.try_join_next().is_some() {}
    };
    while requests.join_next().await.is_some() {}
    let discarded = conn.forge.cleanup_session(&conn.ctx);
    // The last sender: the writer drains what is queued, then ends.
    drop(conn);
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    ended?;
    discarded.map_err(McpError::Cleanup)
}

fn read_loop<R: Read>(input: R, frames: mpsc::Sender<io::Result<Frame>>) {
    let mut reader = BufReader::with_capacity(64 << 10, input);
    loop {
        let frame = jsonrpc::read_frame(&mut reader, MAX_MESSAGE_BYTES);
        let last = matches!(frame, Ok(Frame::Eof) | Err(_));
        if frames.blocking_send(frame).is_err() || last {
            return;
        }
    }
}

fn write_loop<W: Write>(mut output: W, mut messages: mpsc::UnboundedReceiver<Value>) {
    while let Some(message) = messages.blocking_recv() {
        let written = serde_json::to_writer(&mut output, &message)
            .map_err(io::Error::from)
            .and_then(|()| output.write_all(b"\n"))
            .and_then(|()| output.flush());
        if let Err(e) = written {
            eprintln!("temper mcp: cannot write to the client: {e}");
            return;
        }
    }
}

/// What every request handler shares.
struct Connection {
    forge: Forge,
    ctx: ForgeContext,
    out: mpsc::UnboundedSender<Value>,
}

impl Connection {
    fn send(&self, message: Value) {
        // Fails only once the writer gave up (the client is gone).
        let _ = self.out.send(message);
    }

    /// Handles one request in a task of its own and sends the answer.
    async fn answer(self: Arc<Self>, id: Value, method: String, params: Option<Value>) {
        let handler = tokio::spawn(self.clone().handle(method, params));
        let message = match handler.await {
            Ok(Ok(result)) => jsonrpc::response(&id, result),
            Ok(Err(error)) => jsonrpc::error_response(&id, &error),
            Err(e) => {
                eprintln!("temper mcp: request {id} failed: {e}");
                jsonrpc::error_response(
                    &id,
                    &RpcError::internal(format!("the handler failed: {e}")),
                )
            }
        };
        self.send(message);
    }

    async fn handle(
        self: Arc<Self>,
        method: String,
        params: Option<Value>,
    ) -> Result<Value, RpcError> {
        match method.as_str() {
            "initialize" => initialize(params.as_ref()),
            "ping" => Ok(json!({})),
            "tools/list" => self.list_tools(),
            "tools/call" => self.call_tool(params.as_ref()).await,
            _ => Err(RpcError::method_not_found(&method)),
        }
    }

    fn list_tools(&self) -> Result<Value, RpcError> {
        let allowed: Vec<_> = self
            .forge
            .runtime()
            .policy()
            .allowed
            .iter()
            .copied()
            .collect();
        let visible = self
            .forge
            .visible_tools(&self.ctx)
            .map_err(|e| RpcError::internal(format!("cannot list the tools: {e}")))?;
        let mut list = vec![tools::forge_tool_definition(&allowed)];
        list.extend(visible.iter().map(tools::registered_tool_definition));
        Ok(json!({ "tools": list }))
    }

    async fn call_tool(&self, params: Option<&Value>) -> Result<Value, RpcError> {
        let params = params
            .filter(|p| p.is_object())
            .ok_or_else(|| RpcError::invalid_params("tools/call needs params {name, arguments}"))?;
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("tools/call: params.name must be a string"))?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(a @ Value::Object(_)) => a.clone(),
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "tools/call: params.arguments must be an object",
                ));
            }
        };
        let progress = Progress {
            conn: self,
            token: params
                .pointer("/_meta/progressToken")
                .filter(|t| t.is_string() || t.is_number())
                .cloned(),
        };
        if name == FORGE_TOOL {
            self.forge_tool(&arguments, &progress).await
        } else {
            Ok(self.invoke(name, &arguments, &progress).await)
        }
    }

    async fn forge_tool(
        &self,
        request: &Value,
        progress: &Progress<'_>,
    ) -> Result<Value, RpcError> {
        let name = request
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("(unnamed)");
        // One step per stage (validate, build, test, judge, register), then done.
        let report_stage = |stage: Stage| {
            let step = match stage {
                Stage::Validate => 0,
                Stage::Build => 1,
                Stage::Test => 2,
                Stage::Judge => 3,
                _ => 4,
            };
            progress.report(step, FORGE_STEPS, format!("{name}: {stage}"));
        };
        let outcome = self
            .forge
            .forge_json_with_progress(&request.to_string(), &self.ctx, &report_stage)
            .await;
        let result = ForgeResult::from(&outcome);
        match &outcome {
            Ok(forged) => {
                eprintln!(
                    "temper mcp: forged {} ({})",
                    forged.tool.name,
                    &forged.tool.id[..12]
                );
                progress.report(FORGE_STEPS, FORGE_STEPS, format!("{name}: registered"));
                self.send(jsonrpc::notification(
                    "notifications/tools/list_changed",
                    json!({}),
                ));
            }
            Err(e) => {
                eprintln!("temper mcp: forge of {name} refused: {e}");
                progress.report(
                    FORGE_STEPS,
                    FORGE_STEPS,
                    format!("{name}: refused at the {} stage", e.stage()),
                );
            }
        }
        let value = serde_json::to_value(&result)
            .map_err(|e| RpcError::internal(format!("cannot encode the forge result: {e}")))?;
        Ok(tools::tool_result(&value, !result.success))
    }

    async fn invoke(&self, name: &str, arguments: &Value, progress: &Progress<'_>) -> Value {
        progress.report(0, 1, format!("calling {name}"));
        let outcome = self.forge.invoke(name, arguments, &self.ctx).await;
        progress.report(1, 1, format!("{name}: done"));
        match outcome {
            Ok(invocation) => {
                for line in &invocation.logs {
                    eprintln!("[{name} console.{}] {}", line.level, line.message);
                }
                tools::tool_result(&invocation.output, false)
            }
            Err(e @ InvokeError::NotFound { .. }) => {
                tools::tool_error("invoke", &format!("unknown tool {name:?}: {e}"))
            }
            Err(e) => {
                if let InvokeError::Run { failure, .. } = &e {
                    for line in &failure.logs {
                        eprintln!("[{name} console.{}] {}", line.level, line.message);
                    }
                }
                tools::tool_error("invoke", &e.to_string())
            }
        }
    }
}

/// Progress steps of a forge: the five stages, then done.
const FORGE_STEPS: u32 = 5;

/// Progress notifications for one request, when the client asked for them
/// (`_meta.progressToken`).
struct Progress<'c> {
    conn: &'c Connection,
    token: Option<Value>,
}

impl Progress<'_> {
    fn report(&self, progress: u32, total: u32, message: String) {
        if let Some(token) = &self.token {
            self.conn.send(jsonrpc::notification(
                "notifications/progress",
                json!({ "progressToken": token, "progress": progress, "total": total, "message": message }),
            ));
        }
    }
}

fn initialize(params: Option<&Value>) -> Result<Value, RpcError> {
    let requested = params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            RpcError::invalid_params("initialize: params.protocolVersion must be a string")
        })?;
    Ok(json!({
        "protocolVersion": negotiate_version(requested),
        "capabilities": { "tools": { "listChanged": true } },
        "serverInfo": { "name": "temper", "version": env!("CARGO_PKG_VERSION") },
        "instructions": "Call forge_tool to create a tool when none of the listed tools fits; \
            once forged it is listed and callable for the rest of this connection.",
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiates_the_clients_version_or_the_newest() {
        assert_eq!(negotiate_version("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate_version("2024-11-05"), "2024-11-05");
        assert_eq!(
            negotiate_version("1999-01-01"),
            SUPPORTED_PROTOCOL_VERSIONS[0]
        );
        let r = initialize(Some(&json!({"protocolVersion": "2025-03-26"}))).unwrap();
        assert_eq!(r["protocolVersion"], "2025-03-26");
        assert_eq!(r["capabilities"]["tools"]["listChanged"], true);
        assert_eq!(r["serverInfo"]["name"], "temper");
        assert_eq!(
            initialize(Some(&json!({}))).unwrap_err().code,
            jsonrpc::INVALID_PARAMS
        );
    }

    #[test]
    fn each_connection_gets_its_own_session() {
        let base = ForgeContext::new("a", "s");
        let ctx = connection_context(&base);
        assert_eq!(ctx.agent_id, "a");
        assert!(
            ctx.session_id
                .starts_with(&format!("s/mcp-{}-", std::process::id()))
        );
    }
}
