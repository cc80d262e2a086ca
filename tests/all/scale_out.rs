//! Scale-out with real parts: three `temper mcp --http` hosts on one
//! throw-away PostgreSQL database (one tokens file), behind HAProxy on
//! 127.0.0.1 (round robin, no stickiness, the configuration written here),
//! driven by the official MCP Python SDK (`tests/scale_out_client.py`).
//!
//! The client forges a session tool through the balancer and calls it
//! 1,000 times, 8 in flight; after 300 calls one host is killed (SIGKILL),
//! after 500 the client holds while the host is restarted on its port and
//! HAProxy sees it up again. Requests in flight on the killed host fail at
//! the balancer (502) and the client retries them; every call must end
//! well, with the right answer. The session tier follows the client: every
//! host (the restarted one too) served calls of the session tool forged on
//! one of them (HAProxy's per-server counters say so). The session then
//! ends (a legacy client's DELETE when it closes; a 2026-07-28 session
//! when it has idled out on every host): its tool is gone from the store,
//! and the trail holds its one forge decision and its one deletion. The
//! run is made once with a 2025-06-18 client and once with a 2026-07-28
//! one.
//!
//! Needs `TEMPER_TEST_PG_URL` (`scripts/with-postgres.sh`), the `haproxy`
//! binary (`scripts/haproxy.sh`) and the SDK venv (`scripts/mcp-venv.sh`);
//! a missing part skips the test unless `TEMPER_REQUIRE_PG=1`,
//! `TEMPER_REQUIRE_HAPROXY=1` or `TEMPER_REQUIRE_MCP_PY=1` make it a
//! failure (scripts/test.sh sets all three).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use temper::store::{AuditKind, Registry};

use crate::mcp_http::{python, token_entry};
use crate::multihost::admin_exec;
use crate::support::cache_dir;

/// Only a safety net against a hung process; no assertion depends on it.
const HANG: Duration = Duration::from_secs(600);
const CALLS: usize = 1000;
const KILL_AT: usize = 300;
const HOLD_AT: usize = 500;
const TOKEN: &str = "scale-out-token";
const AGENT: &str = "scale";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `what` is missing: a skip, or a failure when `var` is 1.
fn missing(var: &str, what: &str) {
    crate::support::skip_unless_required(var, what, "scale_out");
}

fn haproxy() -> Option<PathBuf> {
    let found = Command::new("haproxy")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some(PathBuf::from("haproxy"));
    }
    missing(
        "TEMPER_REQUIRE_HAPROXY",
        "no haproxy on PATH (run scripts/haproxy.sh)",
    );
    None
}

/// A fresh database on the test cluster, dropped at the end.
struct Database {
    admin: String,
    name: String,
    url: String,
}

impl Database {
    fn create() -> Option<Self> {
        let Ok(admin) = std::env::var("TEMPER_TEST_PG_URL") else {
            missing(
                "TEMPER_REQUIRE_PG",
                "TEMPER_TEST_PG_URL is not set (scripts/with-postgres.sh sets it)",
            );
            return None;
        };
        // One database per run: the two runs share this process.
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("temper_scale{}_{run}", std::process::id());
        admin_exec(&admin, &format!("CREATE DATABASE {name}")).expect("CREATE DATABASE");
        let mut url = url::Url::parse(&admin).expect("TEMPER_TEST_PG_URL is a URL");
        url.set_path(&format!("/{name}"));
        Some(Self {
            admin,
            name,
            url: url.to_string(),
        })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = admin_exec(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

/// One `temper mcp --http` host; killed when dropped.
struct Host {
    child: Child,
    addr: SocketAddr,
}

impl Host {
    /// Starts a host on `bind` (`127.0.0.1:0` picks a port) and waits
    /// until it says where it listens. Its stderr goes to `log`.
    fn start(bind: &str, store: &str, dir: &Path, log: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args(["mcp", "--http", bind, "--judge", "rules", "--store", store])
            .args(extra)
            .arg("--cache-dir")
            .arg(cache_dir())
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--tokens")
            .arg(dir.join("tokens.toml"))
            .args(["--registry-poll-ms", "200"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn temper mcp --http");
        let stderr = child.stderr.take().unwrap();
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                let _ = writeln!(log, "{line}");
                if let Some(rest) = line.strip_prefix("temper mcp: listening on http://") {
                    let _ = tx.send(rest.trim_end_matches("/mcp").to_string());
                }
            }
        });
        let addr = rx
            .recv_timeout(HANG)
            .expect("the host says where it listens")
            .parse()
            .unwrap();
        Self { child, addr }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HAProxy in the foreground with the configuration `config`; stopped
/// when dropped.
struct Balancer {
    child: Child,
    socket: PathBuf,
}

/// The configuration the test runs (and docs/src/deployment.md shows):
/// round robin, no stickiness; a host that refuses connections is
/// marked down within a check interval, and a request that could not
/// connect is sent to another host; a request in flight on a host that
/// dies is answered 502 (not replayed: the client decides).
fn haproxy_config(listen: SocketAddr, hosts: &[SocketAddr], socket: &Path) -> String {
    let servers: String = hosts
        .iter()
        .enumerate()
        .map(|(i, a)| format!("    server h{i} {a}\n"))
        .collect();
    format!(
        "global
    maxconn 1024
    stats socket {socket} mode 600 level admin

defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    retries 3
    option redispatch 1
    retry-on conn-failure

frontend mcp
    bind {listen}
    default_backend temper

backend temper
    balance roundrobin
    default-server check inter 200ms fall 1 rise 1
{servers}",
        socket = socket.display()
    )
}

impl Balancer {
    fn start(haproxy: &Path, dir: &Path, listen: SocketAddr, hosts: &[SocketAddr]) -> Self {
        let socket = dir.join("haproxy.sock");
        let config = dir.join("haproxy.cfg");
        std::fs::write(&config, haproxy_config(listen, hosts, &socket)).unwrap();
        let check = Command::new(haproxy)
            .arg("-c")
            .arg("-f")
            .arg(&config)
            .output()
            .expect("run haproxy -c");
        assert!(
            check.status.success(),
            "haproxy rejects {}: {}",
            config.display(),
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn haproxy");
        let balancer = Self { child, socket };
        let start = Instant::now();
        while TcpStream::connect(listen).is_err() || balancer.servers_up() < hosts.len() {
            assert!(start.elapsed() < HANG, "haproxy never came up");
            std::thread::sleep(Duration::from_millis(50));
        }
        balancer
    }

    /// `show stat` from the stats socket: one map per row, by column.
    fn stats(&self) -> Vec<std::collections::HashMap<String, String>> {
        let Ok(mut s) = UnixStream::connect(&self.socket) else {
            return Vec::new();
        };
        s.write_all(b"show stat\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let mut lines = text.lines();
        let Some(header) = lines.next() else {
            return Vec::new();
        };
        let columns: Vec<&str> = header.trim_start_matches("# ").split(',').collect();
        lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                columns
                    .iter()
                    .zip(l.split(','))
                    .map(|(c, v)| (c.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    }

    fn server(&self, name: &str) -> std::collections::HashMap<String, String> {
        self.stats()
            .into_iter()
            .find(|r| r["pxname"] == "temper" && r["svname"] == name)
            .unwrap_or_else(|| panic!("no server {name} in haproxy's stats"))
    }

    fn servers_up(&self) -> usize {
        self.stats()
            .iter()
            .filter(|r| r["pxname"] == "temper" && r["svname"].starts_with('h'))
            .filter(|r| r["status"] == "UP")
            .count()
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn count(row: &std::collections::HashMap<String, String>, column: &str) -> u64 {
    row[column].parse().unwrap_or(0)
}

/// The idle limit of the 2026-07-28 run's hosts: longer than the hold
/// while a host restarts, short enough to wait for the session's expiry.
const MODERN_IDLE_SECS: u64 = 15;

#[test]
fn three_hosts_behind_haproxy_serve_one_legacy_session() {
    scale_out("2025-06-18");
}

/// The same run with a 2026-07-28 client as a standard one speaks it: no
/// handshake and no session named, so the tool it forges through the
/// balancer lands in its agent's default session and every host serves
/// its calls; the session ends when it has idled out on every host (that
/// revision has no DELETE): the store's expiry, judged by whichever host
/// reaps first.
#[test]
fn three_hosts_behind_haproxy_serve_one_2026_session() {
    scale_out("2026-07-28");
}

fn scale_out(mode: &str) {
    let modern = mode == "2026-07-28";
    let idle = MODERN_IDLE_SECS.to_string();
    let extra: Vec<&str> = if modern {
        vec!["--session-idle-secs", &idle]
    } else {
        Vec::new()
    };
    let Some(haproxy) = haproxy() else { return };
    let Some(python) = python() else { return };
    let Some(db) = Database::create() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tokens.toml"),
        token_entry(TOKEN, AGENT, ""),
    )
    .unwrap();
    let logs: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("host{i}.log")))
        .collect();
    let mut hosts: Vec<Option<Host>> = logs
        .iter()
        .map(|log| Some(Host::start("127.0.0.1:0", &db.url, dir.path(), log, &extra)))
        .collect();
    let addrs: Vec<SocketAddr> = hosts.iter().map(|h| h.as_ref().unwrap().addr).collect();
    let listen = free_port();
    let balancer = Balancer::start(&haproxy, dir.path(), listen, &addrs);

    let mut client = Command::new(python)
        .arg(root().join("tests/scale_out_client.py"))
        .arg(mode)
        .arg(format!("http://{listen}/mcp"))
        .arg(TOKEN)
        .arg(root().join("tests/fixtures/seeds/slugify.json"))
        .arg(CALLS.to_string())
        .arg(HOLD_AT.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run tests/scale_out_client.py");
    let mut stdin: Option<ChildStdin> = client.stdin.take();
    let mut killed = false;
    let mut served_before_kill = 0;
    let mut summary = None;
    for line in BufReader::new(client.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("progress ") {
            let n: usize = n.parse().unwrap();
            if n >= KILL_AT && !killed {
                // SIGKILL, mid-run: nothing of it is shut down cleanly.
                served_before_kill = count(&balancer.server("h1"), "stot");
                drop(hosts[1].take());
                killed = true;
                eprintln!("scale_out: killed host 1 after {n} calls");
            }
        } else if line.starts_with("hold ") {
            assert!(killed, "the host is killed before the hold");
            // Back on its port; HAProxy's check finds it up.
            hosts[1] = Some(Host::start(
                &addrs[1].to_string(),
                &db.url,
                dir.path(),
                &logs[1],
                &extra,
            ));
            let start = Instant::now();
            while balancer.servers_up() < 3 {
                assert!(start.elapsed() < HANG, "the restarted host never came up");
                std::thread::sleep(Duration::from_millis(50));
            }
            eprintln!("scale_out: host 1 restarted and up");
            let mut go = stdin.take().expect("one hold");
            writeln!(go, "go").unwrap();
        } else if line.starts_with('{') {
            summary = Some(serde_json::from_str::<Value>(&line).unwrap());
        }
    }
    let status = client.wait().unwrap();
    assert!(
        status.success(),
        "tests/scale_out_client.py failed: {status}"
    );
    let summary = summary.expect("the client's summary");
    assert_eq!(summary["calls"], CALLS as u64, "{summary}");
    eprintln!("scale_out: client summary {summary}");

    // Every host served requests of the session; the restarted one too.
    for name in ["h0", "h1", "h2"] {
        let row = balancer.server(name);
        eprintln!(
            "scale_out: {name}: {} requests, {} 2xx, {} 5xx",
            row["stot"], row["hrsp_2xx"], row["hrsp_5xx"]
        );
        assert!(
            count(&row, "hrsp_2xx") > 0,
            "{name} served nothing: {row:?}"
        );
    }
    let h1 = count(&balancer.server("h1"), "stot");
    assert!(
        h1 > served_before_kill,
        "the restarted host served calls: {h1} > {served_before_kill}"
    );

    // The session ended (legacy: the client's DELETE; 2026-07-28: it idled
    // out): its tool is gone, with one decision and one deletion in the
    // trail; the trail verifies.
    let store = Registry::open_postgres(&db.url).unwrap();
    let decided = |entries: &[temper::store::AuditEntry]| -> Option<String> {
        let decisions: Vec<_> = entries
            .iter()
            .filter(|e| e.kind == AuditKind::ForgeDecision && e.subject == "slugify")
            .collect();
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        decisions[0].payload["session"].as_str().map(str::to_string)
    };
    let mut entries = store.audit_entries(0, 1_000_000).unwrap();
    let session = decided(&entries).expect("the decision names its session");
    if modern {
        let named = summary["session"]
            .as_str()
            .expect("the session forge_tool's result named");
        assert_eq!(named, "default");
        assert_eq!(session, "m:default");
        // Idle for MODERN_IDLE_SECS on every host, then reaped (each host
        // reaps every idle / 4).
        let start = Instant::now();
        while store.session(AGENT, &session).unwrap().is_some() {
            assert!(
                start.elapsed() < Duration::from_secs(4 * MODERN_IDLE_SECS),
                "the 2026-07-28 session never idled out"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        entries = store.audit_entries(0, 1_000_000).unwrap();
    } else {
        assert!(session.starts_with("mcp-http/"), "{session}");
    }
    let deletions: Vec<_> = entries
        .iter()
        .filter(|e| e.kind == AuditKind::Deletion && e.payload["session"] == session.as_str())
        .collect();
    assert_eq!(deletions.len(), 1, "{deletions:?}");
    assert_eq!(deletions[0].subject, "slugify");
    assert_eq!(deletions[0].payload["reason"], "session ended");
    if modern {
        assert_eq!(deletions[0].payload["expired"], true, "{:?}", deletions[0]);
    }
    assert!(store.session(AGENT, &session).unwrap().is_none());
    assert!(store.session_tools(AGENT, &session).unwrap().is_empty());
    store.verify_audit().unwrap();
    drop(balancer);
    drop(hosts);
}

/// The quota every host holds together: three hosts behind HAProxy on one
/// PostgreSQL database, a token limited to 60 `tools/call` requests a
/// minute, 150 calls sent through the balancer (round robin: each host
/// gets a third). Within one minute window the agent gets at most 60 in
/// all (the store never leases more: the documented overshoot is zero),
/// and at least 60 − (hosts − 1) × (lease − 1) = 50 (what a host leased
/// and did not spend); each host answered some, so the leases were
/// shared. Every refusal is `429` with `Retry-After` and SEP-3304's
/// `-32023` over 2026-07-28; a legacy session's call is refused with
/// `-32000` and `Retry-After` too. Before the quota was shared each host
/// admitted 60 (180 in all).
#[test]
fn three_hosts_behind_haproxy_hold_one_quota() {
    use crate::mcp_principals::{assert_rate_limited, fresh_window, initialize, post, window};
    const LIMIT: usize = 60;
    const HOSTS: usize = 3;
    const LEASE: usize = LIMIT / 10;
    let Some(haproxy) = haproxy() else { return };
    let Some(db) = Database::create() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tokens.toml"),
        token_entry(TOKEN, AGENT, &format!("calls_per_minute = {LIMIT}")),
    )
    .unwrap();
    let hosts: Vec<Host> = (0..HOSTS)
        .map(|i| {
            let log = dir.path().join(format!("host{i}.log"));
            Host::start("127.0.0.1:0", &db.url, dir.path(), &log, &[])
        })
        .collect();
    let addrs: Vec<SocketAddr> = hosts.iter().map(|h| h.addr).collect();
    let listen = free_port();
    let balancer = Balancer::start(&haproxy, dir.path(), listen, &addrs);
    let url = format!("http://{listen}/mcp");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let call = || serde_json::json!({"name": "tool_stats", "arguments": {"name": "run_code"}});
    rt.block_on(async {
        loop {
            fresh_window(40).await;
            let started = window();
            let before: Vec<u64> = ["h0", "h1", "h2"]
                .iter()
                .map(|h| count(&balancer.server(h), "hrsp_2xx"))
                .collect();
            let (mut admitted, mut refused) = (0, 0);
            for _ in 0..150 {
                let r = post(&url, TOKEN, "tools/call", call(), None, None).await;
                if r.status == 200 {
                    r.result();
                    admitted += 1;
                } else {
                    assert_rate_limited(&r, -32023);
                    refused += 1;
                }
            }
            let served: Vec<u64> = ["h0", "h1", "h2"]
                .iter()
                .zip(&before)
                .map(|(h, b)| count(&balancer.server(h), "hrsp_2xx") - b)
                .collect();
            // A legacy session's call: the same quota, the legacy code.
            let sid = initialize(&url, TOKEN).await.session.expect("a session");
            let r = post(&url, TOKEN, "tools/call", call(), None, Some(&sid)).await;
            if window() != started {
                eprintln!("scale_out: the minute turned during the burst; again");
                continue;
            }
            assert_rate_limited(&r, -32000);
            eprintln!("scale_out: quota {LIMIT}/min on {HOSTS} hosts: {admitted} admitted, {refused} refused");
            assert!(admitted <= LIMIT, "{admitted} > {LIMIT}: the quota leaked");
            assert!(
                admitted > LIMIT - (HOSTS - 1) * (LEASE - 1) - 1,
                "{admitted}: more undershoot than documented"
            );
            // Every host admitted calls: the leases were shared.
            assert!(served.iter().all(|&n| n > 0), "{served:?}");
            break;
        }
    });
    drop(balancer);
    drop(hosts);
}
