//! The stdio child of an upstream: spawned with a cleared environment plus
//! the configured `env`, spoken to over newline-delimited JSON-RPC on its
//! stdin/stdout ([`LineTransport`]), its stderr kept as a bounded tail with
//! secrets cut out, its exit turned into the connection's end reason.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::{Notify, watch};

use super::direct::Direct;
use super::{Conn, REASON_WAIT, Shared, UpstreamError};
use crate::config::Secret;

/// Lines of the child's stderr kept for start errors.
const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line kept (longer ones are cut).
const STDERR_LINE_MAX: usize = 512;
/// The read buffer on the child's stdout: a large result arrives in a few
/// reads rather than one per 8 KiB.
const READ_BUFFER: usize = 256 << 10;
/// The capacity asked for the child's stdout pipe (Linux; the default is
/// 64 KiB, and 1 MiB is the default `fs.pipe-max-size` an unprivileged
/// process may ask for). With the default, a result over 64 KiB fills the
/// pipe: the child blocks in its write until Temper has read, and each
/// such round costs both sides a wake-up. Measured with the hub bench
/// (1,000 items, 104 KB per result): see the hub chapter of the book.
const PIPE_CAPACITY: usize = 1 << 20;
/// The line buffer keeps its room between messages up to this size.
const KEPT_LINE_CAPACITY: usize = 1 << 20;

impl Shared {
    fn stdio_start_error(
        &self,
        reason: String,
        tail: &Arc<Mutex<VecDeque<String>>>,
    ) -> UpstreamError {
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

    /// Spawns the child `command` with the environment `env` (nothing else
    /// is inherited) and completes the MCP handshake.
    pub(super) async fn connect_stdio(
        self: &Arc<Self>,
        command: &[String],
        env: &BTreeMap<String, Secret>,
    ) -> Result<Arc<Conn>, UpstreamError> {
        let mut cmd = Command::new(&command[0]);
        cmd.args(&command[1..])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v.expose())))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let mut child = cmd.spawn().map_err(|e| {
            self.stdio_start_error(format!("cannot run {:?}: {e}", command[0]), &tail)
        })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        grow_pipe(&self.config.name, &stdout);
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
        let write = Arc::new(tokio::sync::Mutex::new(stdin));
        let direct = Arc::new(Direct::new(
            write.clone(),
            self.secrets.clone(),
            self.config.name.clone(),
            self.config.relay,
        ));
        let transport = LineTransport {
            read: BufReader::with_capacity(READ_BUFFER, stdout),
            line: Vec::new(),
            max: self.config.max_result_bytes,
            discarding: false,
            write,
            direct: direct.clone(),
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

        let handler = self.client_handler(true);
        let client = rmcp::ClientHandler::get_info(&handler);
        let started =
            tokio::time::timeout(self.config.start_timeout, handler.serve(transport)).await;
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
                return Err(self.stdio_start_error(reason, &tail));
            }
            Err(_) => {
                return Err(self.stdio_start_error(
                    format!(
                        "no MCP handshake within {} ms (start_timeout_ms)",
                        self.config.start_timeout.as_millis()
                    ),
                    &tail,
                ));
            }
        };
        // The `_meta` rmcp gives each request: on a revision without the
        // `initialize` handshake, the version, client info and capabilities.
        if let Some(info) = service.peer().peer_info() {
            let version = &info.protocol_version;
            let meta = (!version.has_initialize()).then(|| {
                serde_json::json!({
                    "io.modelcontextprotocol/protocolVersion": version,
                    "io.modelcontextprotocol/clientInfo": client.client_info,
                    "io.modelcontextprotocol/clientCapabilities": client.capabilities,
                })
            });
            direct.enable(meta);
        }
        Ok(Arc::new(Conn {
            service,
            ended: ended_rx,
            direct: Some(direct),
        }))
    }
}

/// Asks for a [`PIPE_CAPACITY`] pipe on the child's stdout. Best effort:
/// when refused (a lower `fs.pipe-max-size`, or not Linux), the default
/// pipe works, only with more wake-ups for large results.
fn grow_pipe(upstream: &str, stdout: &ChildStdout) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: `fcntl(F_SETPIPE_SZ)` on a descriptor `stdout` owns and
        // keeps open for the call; it reads no memory of ours.
        let size = unsafe {
            libc::fcntl(
                stdout.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                PIPE_CAPACITY as libc::c_int,
            )
        };
        if size < 0 {
            let e = std::io::Error::last_os_error();
            tracing::debug!(upstream, error = %e, "cannot grow the upstream's stdout pipe");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (upstream, stdout);
}

/// The capacity of the pipe `fd` (Linux), for tests.
#[cfg(all(test, target_os = "linux"))]
fn pipe_size(fd: &impl std::os::fd::AsRawFd) -> usize {
    // SAFETY: `fcntl(F_GETPIPE_SZ)` on an open descriptor; no memory read.
    let size = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ) };
    usize::try_from(size).expect("a pipe")
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
        let line = super::redact(
            &secrets,
            String::from_utf8_lossy(&buf).trim_end().to_string(),
        );
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
    /// Answers to direct calls are routed there, not to rmcp.
    direct: Arc<Direct>,
    fault: Arc<Mutex<Option<String>>>,
    closed: Arc<Notify>,
}

impl LineTransport {
    fn end(&self, fault: Option<String>) -> Option<RxJsonRpcMessage<RoleClient>> {
        if let Some(f) = fault {
            crate::lock(&self.fault).get_or_insert(f);
        }
        self.direct.close();
        self.closed.notify_one();
        None
    }
}

impl Drop for LineTransport {
    fn drop(&mut self) {
        // No reader any more: the direct calls waiting fail now.
        self.direct.close();
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
            let (take, done) = match memchr::memchr(b'\n', chunk) {
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
            if self.discarding {
                let max = self.max;
                return self.end(Some(format!("sent a message over the {max}-byte cap")));
            }
            if !done {
                continue;
            }
            let text = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            let msg = if text.iter().all(u8::is_ascii_whitespace) || self.direct.route(text) {
                None
            } else {
                Some(serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(text))
            };
            // The buffer is reused, unless a large message grew it.
            if self.line.capacity() > KEPT_LINE_CAPACITY {
                self.line = Vec::new();
            } else {
                self.line.clear();
            }
            match msg {
                None => continue,
                Some(Ok(msg)) => return Some(msg),
                // The line itself is not quoted: it may hold anything.
                Some(Err(e)) => return self.end(Some(format!("sent malformed JSON-RPC ({e})"))),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.closed.notify_one();
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_childs_stdout_pipe_is_grown() {
        let mut child = Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("cat runs");
        let stdout = child.stdout.take().unwrap();
        let before = pipe_size(&stdout);
        grow_pipe("t", &stdout);
        let after = pipe_size(&stdout);
        let max: usize = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        if max >= PIPE_CAPACITY {
            assert_eq!(after, PIPE_CAPACITY, "grown from {before}");
        } else {
            // Refused: the default pipe stays, and nothing failed.
            assert_eq!(after, before);
        }
    }
}
