//! The request limits of `temper mcp --http`: oversized bodies, slow
//! senders, a client that stops reading, and 1,000 requests of which 10%
//! time out.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use serde_json::json;

use super::{HANG, Server, seed, spin_request, text_json, token_entry};

/// Reads from `s` until EOF or a reset; returns the bytes read.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(HANG)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("the server never closed the connection: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bodies_slow_clients_and_a_client_that_stops_reading() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, token_entry("t0k3n", "erin", "")).unwrap();
    let server = Server::start(
        store.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--max-body-bytes",
            "65536",
            "--io-timeout-ms",
            "1000",
        ],
    );
    let mut c = server.client(Some("t0k3n"));
    c.open().await;
    let sid = c.session.clone().unwrap();
    let head = |extra: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t0k3n\r\nMcp-Session-Id: {sid}\r\nContent-Type: application/json\r\nAccept: application/json\r\n{extra}"
        )
    };

    // An oversized body: declared, or streamed in chunks without a length.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(100_000)
    );
    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .header("content-type", "application/json")
                .body(big.clone()),
        )
        .await;
    assert_eq!(a.status, 413, "{a:?}");
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(head("Transfer-Encoding: chunked\r\n\r\n").as_bytes())
        .unwrap();
    for chunk in big.as_bytes().chunks(8192) {
        if s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .is_err()
            || s.write_all(chunk).is_err()
            || s.write_all(b"\r\n").is_err()
        {
            break;
        }
    }
    let _ = s.write_all(b"0\r\n\r\n");
    let answer = String::from_utf8_lossy(&read_to_close(&mut s)).to_string();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    // Slowloris: headers that never end, and a body that never comes.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1")
        .unwrap();
    let got = read_to_close(&mut s);
    assert!(
        got.is_empty() || String::from_utf8_lossy(&got).starts_with("HTTP/1.1 408"),
        "{got:?}"
    );
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(head("Content-Length: 1000\r\n\r\n{\"jsonrpc\"").as_bytes())
        .unwrap();
    let answer = String::from_utf8_lossy(&read_to_close(&mut s)).to_string();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // An idle connection that never sends a request is closed too.
    let mut s = TcpStream::connect(server.addr).unwrap();
    assert!(read_to_close(&mut s).is_empty());

    // A client that sends requests and stops reading the answers: the
    // server's writes block, and the connection is closed rather than held.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let one = format!("{}Content-Length: {}\r\n\r\n{list}", head(""), list.len());
    let s = TcpStream::connect(server.addr).unwrap();
    let mut w = s.try_clone().unwrap();
    w.set_write_timeout(Some(HANG)).unwrap();
    // Far more than the socket buffers hold: the server must stop reading.
    const SENT: usize = 100_000;
    let writer = std::thread::spawn(move || {
        for _ in 0..SENT {
            w.write_all(one.as_bytes())?;
        }
        Ok::<(), std::io::Error>(())
    });
    // The server closes the connection: the writer's next write fails with
    // a broken pipe or a reset (not our own time limit), then this side
    // drains what was buffered to the end.
    let err = writer.join().unwrap().expect_err("every request was taken");
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        ),
        "{err}"
    );
    let mut s = s;
    let got = read_to_close(&mut s);
    let answered = String::from_utf8_lossy(&got)
        .matches("HTTP/1.1 200")
        .count();
    assert!(
        answered < SENT,
        "all {SENT} answered: the connection was never cut"
    );
    // The host is healthy.
    assert_eq!(c.rpc("ping", json!({})).await.result(), &json!({}));
    assert!(
        server
            .stderr
            .lock()
            .unwrap()
            .iter()
            .all(|l| !l.contains("panicked")),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_requests_with_a_tenth_timing_out() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, token_entry("load-token", "loader", "")).unwrap();
    let server = Server::start(
        store.path(),
        &["--tokens", tokens.to_str().unwrap(), "--timeout-ms", "300"],
    );
    let mut c = server.client(Some("load-token"));
    c.open().await;
    c.forge(seed("slugify")).await;
    c.forge(spin_request()).await;

    let c = Arc::new(c);
    let gate = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000u32 {
        let (c, gate) = (c.clone(), gate.clone());
        tasks.spawn(async move {
            let _p = gate.acquire().await.unwrap();
            let spin = i % 10 == 0;
            let m = if spin {
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "spin", "arguments": {"spin": true}}})
            } else {
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "slugify", "arguments": {"text": format!("Item {i}")}}})
            };
            let a = c.post(&m).await;
            (i, spin, a)
        });
    }
    let (mut ok, mut timed_out) = (0, 0);
    while let Some(joined) = tasks.join_next().await {
        let (i, spin, a) = joined.unwrap();
        let r = a.result();
        assert_eq!(a.response()["id"], i);
        if spin {
            assert_eq!(r["isError"], true, "{r}");
            assert!(
                text_json(r)["error"]
                    .as_str()
                    .unwrap()
                    .contains("timed out"),
                "{r}"
            );
            timed_out += 1;
        } else {
            assert_eq!(r["structuredContent"], json!({"slug": format!("item-{i}")}));
            ok += 1;
        }
    }
    assert_eq!((ok, timed_out), (900, 100));
    let c = Arc::try_unwrap(c).ok().unwrap();
    let mut c = c;
    assert_eq!(c.rpc("ping", json!({})).await.result(), &json!({}));
    let s = c.call("tool_stats", json!({"name": "spin"})).await;
    let s = &s.result()["structuredContent"];
    assert_eq!(
        (s["total_calls"].as_u64(), s["successes"].as_u64()),
        (Some(100), Some(0))
    );
    let s = c.call("tool_stats", json!({"name": "slugify"})).await;
    let s = &s.result()["structuredContent"];
    assert_eq!(
        (s["total_calls"].as_u64(), s["successes"].as_u64()),
        (Some(900), Some(900))
    );
}
