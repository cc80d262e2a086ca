//! The bench's two MCP clients: stdio (pipes to an in-process server, one
//! thread, requests pipelined) and Streamable HTTP (one keep-alive
//! connection per call in flight, a hand-written HTTP/1.1 client).

use super::*;

/// Checks one `tools/call` answer's bytes without parsing them all.
fn check_answer(bytes: &[u8]) {
    let text = std::str::from_utf8(bytes).expect("UTF-8");
    assert!(
        text.contains(SLUG) && text.contains(r#""isError":false"#),
        "unexpected answer: {text}"
    );
}

// ---- stdio -------------------------------------------------------------------

pub(super) struct Stdio {
    to_server: Arc<Mutex<std::io::PipeWriter>>,
    from_server: BufReader<std::io::PipeReader>,
    next_id: u64,
    _server: tokio::task::JoinHandle<()>,
}

impl Stdio {
    pub(super) fn start(forge: Forge, rt: &tokio::runtime::Runtime) -> Self {
        let (server_in, to_server) = std::io::pipe().unwrap();
        let (from_server, server_out) = std::io::pipe().unwrap();
        let ctx = temper::mcp::connection_context(&ForgeContext::new("bench-agent", "bench"));
        let server = rt.spawn(async move {
            temper::mcp::serve(
                forge,
                ctx,
                server_in,
                server_out,
                Some(temper::mcp::DEFAULT_POLL),
            )
            .await
            .expect("the stdio server ends cleanly");
        });
        Self {
            to_server: Arc::new(Mutex::new(to_server)),
            // As large as an event-loop client's reads (asyncio: 64 KiB).
            from_server: BufReader::with_capacity(64 << 10, from_server),
            next_id: 0,
            _server: server,
        }
    }

    fn send_line(&self, line: &[u8]) {
        let mut w = self.to_server.lock().unwrap();
        w.write_all(line).unwrap();
    }

    fn read_answer(&mut self, buf: &mut Vec<u8>) {
        loop {
            buf.clear();
            self.from_server.read_until(b'\n', buf).unwrap();
            assert!(!buf.is_empty(), "the server closed its output");
            // Notifications (list_changed, progress) are skipped: an
            // answer has its id near the start.
            if memmem(&buf[..buf.len().min(48)], br#""id":"#) {
                return;
            }
        }
    }

    fn call_line(&mut self) -> Vec<u8> {
        self.next_id += 1;
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/call\",\"params\":{CALL}}}\n",
            self.next_id
        )
        .into_bytes()
    }
}

fn memmem(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

impl Client for Stdio {
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}),
        )
        .unwrap();
        line.push(b'\n');
        self.send_line(&line);
        let mut buf = Vec::new();
        self.read_answer(&mut buf);
        let answer: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(answer["id"], self.next_id, "{answer}");
        answer["result"].clone()
    }

    fn call_once(&mut self) -> Duration {
        let line = self.call_line();
        let mut buf = Vec::with_capacity(512);
        let t = Instant::now();
        self.send_line(&line);
        self.read_answer(&mut buf);
        let took = t.elapsed();
        check_answer(&buf);
        took
    }

    fn load(&mut self, n: usize) -> (u64, Duration) {
        // One thread, as an event-loop client (Python's asyncio, Node) runs
        // it: `n` requests written, then, for each answer read, the next
        // request written at once (one write per request), until the time
        // is up; then the answers still owed are read.
        let mut line = Vec::with_capacity(256);
        let mut id = self.next_id;
        let mut send = |line: &mut Vec<u8>, to: &Mutex<std::io::PipeWriter>| {
            id += 1;
            line.clear();
            writeln!(
                line,
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{CALL}}}"
            )
            .unwrap();
            to.lock().unwrap().write_all(line).unwrap();
        };
        let to_server = self.to_server.clone();
        for _ in 0..n {
            send(&mut line, &to_server);
        }
        let mut sent = n as u64;
        let started = Instant::now();
        let mut answered = 0u64;
        let mut buf = Vec::with_capacity(512);
        let counted = loop {
            self.read_answer(&mut buf);
            check_answer(&buf);
            answered += 1;
            if started.elapsed() >= LOAD {
                break (answered, started.elapsed());
            }
            send(&mut line, &to_server);
            sent += 1;
        };
        while answered < sent {
            self.read_answer(&mut buf);
            check_answer(&buf);
            answered += 1;
        }
        self.next_id += sent;
        counted
    }
}

// ---- HTTP --------------------------------------------------------------------

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    stream: BufReader<TcpStream>,
    request: Vec<u8>,
}

impl Conn {
    fn open(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        Self {
            stream: BufReader::new(s),
            request: Vec::with_capacity(1024),
        }
    }

    /// POSTs `body` (with the session, if any); the response's headers
    /// (lower-cased names) and body (chunks joined).
    fn post(&mut self, addr: SocketAddr, session: Option<&str>, body: &[u8]) -> (Vec<u8>, Vec<u8>) {
        post_request(&mut self.request, addr, session, body);
        self.stream.get_mut().write_all(&self.request).unwrap();
        self.read_response()
    }

    fn read_response(&mut self) -> (Vec<u8>, Vec<u8>) {
        let mut head = Vec::with_capacity(256);
        let mut line = Vec::with_capacity(128);
        let mut length = None;
        let mut chunked = false;
        loop {
            line.clear();
            self.stream.read_until(b'\n', &mut line).unwrap();
            assert!(!line.is_empty(), "the server closed the connection");
            if line == b"\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix(b"content-length:") {
                length = Some(
                    std::str::from_utf8(v)
                        .unwrap()
                        .trim()
                        .parse::<usize>()
                        .unwrap(),
                );
            }
            if lower.starts_with(b"transfer-encoding:") && memmem(&lower, b"chunked") {
                chunked = true;
            }
            head.extend_from_slice(&lower);
        }
        assert!(
            head.starts_with(b"http/1.1 200"),
            "{}",
            String::from_utf8_lossy(&head)
        );
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.stream.read_until(b'\n', &mut line).unwrap();
                let size =
                    usize::from_str_radix(std::str::from_utf8(&line).unwrap().trim(), 16).unwrap();
                let start = body.len();
                body.resize(start + size, 0);
                self.stream.read_exact(&mut body[start..]).unwrap();
                let mut crlf = [0u8; 2];
                self.stream.read_exact(&mut crlf).unwrap();
                if size == 0 {
                    break;
                }
            }
        } else if let Some(n) = length {
            body.resize(n, 0);
            self.stream.read_exact(&mut body).unwrap();
        }
        (head, body)
    }
}

/// Writes a `POST /mcp` of `body` into `request` (cleared first), with the
/// session, if any.
fn post_request(request: &mut Vec<u8>, addr: SocketAddr, session: Option<&str>, body: &[u8]) {
    request.clear();
    write!(
        request,
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n",
        body.len()
    )
    .unwrap();
    if let Some(s) = session {
        // As a real client sends them after `initialize`: the session and
        // the negotiated protocol version (checked per request).
        write!(
            request,
            "mcp-session-id: {s}\r\nmcp-protocol-version: {PROTOCOL_VERSION}\r\n"
        )
        .unwrap();
    }
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(body);
}

/// The JSON-RPC message of a response body: JSON, or the last SSE event.
fn message_of(body: &[u8]) -> Value {
    let text = std::str::from_utf8(body).unwrap();
    match text.lines().rev().find_map(|l| l.strip_prefix("data: ")) {
        Some(data) => serde_json::from_str(data).unwrap(),
        None => serde_json::from_str(text).unwrap(),
    }
}

pub(super) struct Http {
    addr: SocketAddr,
    session: String,
    conn: Conn,
    next_id: u64,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Http {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Http {
    pub(super) fn start(forge: Forge, rt: &tokio::runtime::Runtime) -> Self {
        let mut config = temper::mcp::HttpConfig::new("127.0.0.1:0");
        config.max_concurrent = 1024;
        let base = ForgeContext::new("bench-agent", "bench");
        let server = rt
            .block_on(temper::mcp::HttpServer::bind(forge, &base, config))
            .unwrap();
        let addr = server.local_addr().unwrap();
        let server = rt.spawn(async move {
            let _ = server.run().await;
        });
        let mut conn = Conn::open(addr);
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}});
        let (head, body) = conn.post(addr, None, init.to_string().as_bytes());
        assert!(message_of(&body).get("result").is_some());
        let head = String::from_utf8(head).unwrap();
        let session = head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id:"))
            .expect("a session id")
            .trim()
            .to_string();
        Self {
            addr,
            session,
            conn,
            next_id: 0,
            server,
        }
    }

    fn call_body(id: u64) -> Vec<u8> {
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{CALL}}}")
            .into_bytes()
    }
}

impl Client for Http {
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let body =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let (_, body) = self
            .conn
            .post(self.addr, Some(&self.session), body.to_string().as_bytes());
        let answer = message_of(&body);
        assert_eq!(answer["id"], self.next_id, "{answer}");
        answer["result"].clone()
    }

    fn call_once(&mut self) -> Duration {
        self.next_id += 1;
        let body = Self::call_body(self.next_id);
        let t = Instant::now();
        let (_, answer) = self.conn.post(self.addr, Some(&self.session), &body);
        let took = t.elapsed();
        check_answer(&answer);
        took
    }

    fn load(&mut self, n: usize) -> (u64, Duration) {
        if http_client_threads() {
            self.load_threads(n)
        } else {
            self.load_event_loop(n)
        }
    }
}

/// Whether the HTTP load runs on one thread per connection
/// (`MCP_HTTP_CLIENT=threads`, the client of earlier rounds, kept for A/B
/// runs) rather than on one event-loop thread (the default).
fn http_client_threads() -> bool {
    std::env::var("MCP_HTTP_CLIENT").is_ok_and(|v| v == "threads")
}

/// The HTTP client's name in the report.
pub(super) fn http_client_name() -> &'static str {
    if http_client_threads() {
        "one thread per connection, blocking I/O (MCP_HTTP_CLIENT=threads)"
    } else {
        "one event-loop thread for all connections (tokio current_thread), as wrk runs each of its threads"
    }
}

/// One `tools/call` on a keep-alive connection of the event-loop client:
/// the request written whole, the response read until its headers and its
/// `content-length` body are in `buf`; the answer checked.
async fn post_call(stream: &mut tokio::net::TcpStream, request: &[u8], buf: &mut Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(request).await.unwrap();
    buf.clear();
    let (head_end, body_len) = loop {
        let read = stream.read_buf(buf).await.unwrap();
        assert!(read > 0, "the server closed the connection");
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = buf[..end].to_ascii_lowercase();
            assert!(
                head.starts_with(b"http/1.1 200"),
                "{}",
                String::from_utf8_lossy(&head)
            );
            let length = head
                .split(|&b| b == b'\n')
                .find_map(|l| l.strip_prefix(b"content-length:"))
                .map(|v| {
                    std::str::from_utf8(v)
                        .unwrap()
                        .trim()
                        .parse::<usize>()
                        .unwrap()
                })
                .expect("a JSON answer with a content-length");
            break (end + 4, length);
        }
    };
    while buf.len() < head_end + body_len {
        let read = stream.read_buf(buf).await.unwrap();
        assert!(read > 0, "the server closed the connection");
    }
    assert_eq!(buf.len(), head_end + body_len, "one answer per request");
    check_answer(&buf[head_end..]);
}

impl Http {
    /// The load on one event-loop thread: `n` keep-alive connections, each
    /// sending its next request as soon as its answer is read (wrk's
    /// closed loop), so the client costs a few system calls per call, not
    /// a thread's sleep and wake-up.
    fn load_event_loop(&mut self, n: usize) -> (u64, Duration) {
        let (addr, session) = (self.addr, self.session.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut conns = Vec::with_capacity(n);
                for _ in 0..n {
                    let s = tokio::net::TcpStream::connect(addr).await.unwrap();
                    s.set_nodelay(true).unwrap();
                    conns.push(s);
                }
                let stop = Arc::new(AtomicBool::new(false));
                let calls = Arc::new(AtomicU64::new(0));
                let started = Instant::now();
                let tasks: Vec<_> = conns
                    .into_iter()
                    .enumerate()
                    .map(|(w, mut stream)| {
                        let (stop, calls, session) = (stop.clone(), calls.clone(), session.clone());
                        tokio::task::spawn(async move {
                            let mut id = 1_000_000 * (w as u64 + 1);
                            let mut buf = Vec::with_capacity(4096);
                            let mut request = Vec::with_capacity(1024);
                            while !stop.load(Ordering::Relaxed) {
                                id += 1;
                                let body = Self::call_body(id);
                                post_request(&mut request, addr, Some(&session), &body);
                                post_call(&mut stream, &request, &mut buf).await;
                                calls.fetch_add(1, Ordering::Relaxed);
                            }
                        })
                    })
                    .collect();
                tokio::time::sleep(LOAD).await;
                let done = calls.load(Ordering::SeqCst);
                let elapsed = started.elapsed();
                stop.store(true, Ordering::SeqCst);
                for t in tasks {
                    t.await.unwrap();
                }
                (done, elapsed)
            })
        })
        .join()
        .unwrap()
    }

    /// The load on one thread per connection, blocking I/O (the client of
    /// earlier rounds: each call costs the client a sleep and a wake-up).
    fn load_threads(&mut self, n: usize) -> (u64, Duration) {
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let barrier = Arc::new(std::sync::Barrier::new(n + 1));
        let workers: Vec<_> = (0..n)
            .map(|w| {
                let (stop, calls, barrier) = (stop.clone(), calls.clone(), barrier.clone());
                let (addr, session) = (self.addr, self.session.clone());
                std::thread::spawn(move || {
                    let mut conn = Conn::open(addr);
                    let mut id = 1_000_000 * (w as u64 + 1);
                    barrier.wait();
                    while !stop.load(Ordering::Relaxed) {
                        id += 1;
                        let (_, answer) = conn.post(addr, Some(&session), &Self::call_body(id));
                        check_answer(&answer);
                        calls.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        std::thread::sleep(LOAD);
        let done = calls.load(Ordering::SeqCst);
        let elapsed = started.elapsed();
        stop.store(true, Ordering::SeqCst);
        for w in workers {
            w.join().unwrap();
        }
        (done, elapsed)
    }
}
