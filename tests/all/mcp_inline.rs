//! The stdio server answers a short request on its reader thread when the
//! client waits for it (see `temper_mcp`'s `inline` module). These tests
//! hold it to what handing each request to a task gave: a long call does
//! not keep `ping` waiting, and a client that sends requests without
//! reading its answers never stalls the reading.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use temper::forge::judge::RulesJudge;
use temper::forge::{Forge, ForgeContext};
use temper::store::Registry;

/// A stdio server in this process over two pipes.
struct Pipes {
    to_server: std::io::PipeWriter,
    from_server: BufReader<std::io::PipeReader>,
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

impl Pipes {
    fn start() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let runtime = support::runtime_builder().build().unwrap();
        let forge = Forge::builder(runtime, Arc::new(Registry::open(dir.path()).unwrap()))
            .judge(Arc::new(RulesJudge::standard()))
            .build();
        let (server_in, to_server) = std::io::pipe().unwrap();
        let (from_server, server_out) = std::io::pipe().unwrap();
        let ctx = temper::mcp::connection_context(&ForgeContext::new("inline", "s"));
        rt.spawn(async move {
            let _ = temper::mcp::serve(
                forge,
                ctx,
                server_in,
                server_out,
                Some(temper::mcp::DEFAULT_POLL),
            )
            .await;
        });
        Self {
            to_server,
            from_server: BufReader::new(from_server),
            rt,
            _dir: dir,
        }
    }

    fn send(&mut self, id: u64, method: &str, params: Value) {
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap();
        line.push(b'\n');
        self.to_server.write_all(&line).unwrap();
    }

    /// The next answer (notifications skipped).
    fn answer(&mut self) -> Value {
        loop {
            let mut line = String::new();
            let n = self.from_server.read_line(&mut line).unwrap();
            assert!(n > 0, "the server closed its output");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id").is_some() {
                return v;
            }
        }
    }

    fn forge_spin(&mut self) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/mcp/spin.json");
        let request: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        self.send(
            1,
            "tools/call",
            json!({"name": "forge_tool", "arguments": request}),
        );
        let forged = self.answer();
        assert_eq!(forged["result"]["isError"], false, "{forged}");
    }
}

/// A call that runs about 600 ms of guest code starts on the reader thread
/// (the client waits for it, nothing else is buffered) and is handed to a
/// worker at its first yield: a `ping` sent after it is answered first,
/// well before the call ends.
#[test]
fn a_long_call_does_not_keep_ping_waiting() {
    /// Loop rounds of the calibrating call.
    const CALIBRATE: u64 = 300_000;
    let mut p = Pipes::start();
    p.forge_spin();
    let call = |p: &mut Pipes, id: u64, n: u64| {
        p.send(
            id,
            "tools/call",
            json!({"name": "spin", "arguments": {"n": n}}),
        );
    };
    // Once to have the tool compiled and warm, once to time a round.
    call(&mut p, 2, 10);
    assert_eq!(p.answer()["result"]["structuredContent"], json!({"x": 3}));
    let timed = Instant::now();
    call(&mut p, 3, CALIBRATE);
    assert_eq!(p.answer()["id"], 3);
    let per_round = timed.elapsed().as_secs_f64() / CALIBRATE as f64;
    let n = ((0.6 / per_round) as u64).max(CALIBRATE * 2);

    let started = Instant::now();
    call(&mut p, 4, n);
    std::thread::sleep(Duration::from_millis(50));
    p.send(5, "ping", json!({}));
    let first = p.answer();
    let pinged = started.elapsed();
    assert_eq!(first["id"], 5, "ping answered first: {first}");
    assert_eq!(first["result"], json!({}));
    let long = p.answer();
    let ended = started.elapsed();
    assert_eq!(long["id"], 4);
    assert_eq!(long["result"]["isError"], false, "{long}");
    assert!(
        pinged < ended / 2,
        "ping answered after {pinged:?}, the call after {ended:?}"
    );
    drop(p.rt);
}

/// 20,000 `ping`s written one by one without reading a single answer:
/// their answers (about 700 KB) are far more than the output pipe holds,
/// so a reader that wrote them itself would block, stop reading, and the
/// client's writes would block on the full input pipe. Every request is
/// written, then every answer read, each id once.
#[test]
fn a_client_that_does_not_read_never_stalls_the_reading() {
    const N: u64 = 20_000;
    let mut p = Pipes::start();
    let mut to_server = p.to_server.try_clone().unwrap();
    let (done_tx, done) = mpsc::channel();
    std::thread::spawn(move || {
        for id in 1..=N {
            let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n");
            to_server.write_all(line.as_bytes()).unwrap();
        }
        let _ = done_tx.send(());
    });
    done.recv_timeout(Duration::from_secs(120))
        .expect("every request written while no answer was read");
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..N {
        let a = p.answer();
        assert_eq!(a["result"], json!({}), "{a}");
        assert!(seen.insert(a["id"].as_u64().unwrap()));
    }
    assert_eq!(seen.len() as u64, N);
    drop(p.rt);
}
