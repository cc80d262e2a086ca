//! The MCP path end to end: an in-process `temper mcp` server (the same
//! `temper::mcp` code the binary serves), driven by a Rust client in this
//! process over stdio (a pair of OS pipes, one JSON-RPC message per line)
//! and over Streamable HTTP (keep-alive connections on 127.0.0.1, one
//! session, a minimal HTTP/1.1 client: the client's own cost stays small
//! next to the server's). The tool is the slugify seed, three copies of it
//! under names of their own: one kept in the connection's session tier,
//! one promoted to the agent tier, one approved into the shared tier, on a
//! SQLite store and, when `TEMPER_TEST_PG_URL` is set (`bash
//! scripts/with-postgres.sh cargo bench -p temper-cli --bench mcp`), on a
//! fresh PostgreSQL database.
//!
//! The tiers are compared in interleaved rounds (each round measures every
//! tier once, back to back, in an order that rotates), so the machine's
//! load, which moves between measurements seconds apart, moves every
//! tier's figures alike. Per tier and round: p50 and p99 of a call's round
//! trip with one call in flight; calls/s with 32 and with 64 in flight
//! (stdio: requests pipelined on the one connection; HTTP: one keep-alive
//! connection per call in flight); the server-side time per call, p50
//! (stdio: the request's line read to its answer written; HTTP: its headers
//! read to its answer handed to hyper), from the server's
//! `temper_mcp::timing` trace events. The report gives each tier's medians
//! over the rounds and, per round, its ratio to the session tier.
//!
//! The server runs on a tokio runtime of 2 workers, as `temper mcp` does on
//! this 2-core machine; the client's threads share the cores with it. The
//! report is written to `target/bench-mcp.md` with the date, the core count
//! and the load average before and after (the machine may be shared).
//!
//! Run: `cargo bench -p temper-cli --bench mcp` (about a minute per store
//! and transport; `MCP_BENCH=stdio` or `MCP_BENCH=http` runs one transport,
//! `MCP_ROUNDS=N` sets the rounds, 5 by default).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use temper::Runtime;
use temper::forge::judge::RulesJudge;
use temper::forge::{Forge, ForgeConfig, ForgeContext, PromotionThreshold};
use temper::store::{Registry, StoreLocation};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Calls with one in flight, per tier and round (after the warm-up).
const SEQUENTIAL: usize = 1000;
/// Calls each tier warms up with, once, before the rounds.
const WARM_CALLS: usize = 2000;
/// The least time each tier warms up for.
const WARM_UP: Duration = Duration::from_secs(2);
/// How long a warm-up waits at most for its tool's promotion (a cold
/// compile takes about half a second, and the one before it delays it 9x
/// as long).
const PROMOTION_WAIT: Duration = Duration::from_secs(60);
/// How long each concurrent run lasts.
const LOAD: Duration = Duration::from_secs(1);
/// Calls in flight in the concurrent runs.
const IN_FLIGHT: [usize; 2] = [32, 64];
/// Rounds of the tier comparison (`MCP_ROUNDS` overrides): each round
/// measures every tier once, back to back.
const ROUNDS: usize = 5;

/// The protocol version the HTTP client negotiates and then sends.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// The tiers compared, each a copy of the slugify seed under a name of its
/// own (the tier a name resolves to is the first that has it, so one name
/// cannot be in three tiers at once): kept in the connection's session,
/// promoted to the agent tier, and promoted then approved into the shared
/// tier.
const TIERS: [(&str, &str); 3] = [
    ("session", "slugify"),
    ("agent", "slugify_agent"),
    ("shared", "slugify_shared"),
];

/// Which of [`TIERS`] the calls go to now (switched between rounds).
static TIER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The `params` of a `tools/call` of the current tier's tool (formats as
/// JSON).
struct Call;

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            r#"{{"name":"{}","arguments":{{"text":"Hello World, from the MCP bench!"}}}}"#,
            TIERS[TIER.load(Ordering::Relaxed)].1
        )
    }
}

const CALL: Call = Call;
const SLUG: &str = "hello-world-from-the-mcp-bench";

// ---- the server's timing events ---------------------------------------------

/// Collects the `micros` field of `temper_mcp::timing` events while
/// `RECORDING` is set.
static RECORDING: AtomicBool = AtomicBool::new(false);
static SERVER_MICROS: Mutex<Vec<u64>> = Mutex::new(Vec::new());

struct Timings;

struct Micros(Option<u64>);

impl tracing::field::Visit for Micros {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "micros" {
            self.0 = Some(value);
        }
    }
    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl tracing::Subscriber for Timings {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        m.target() == temper::mcp::TIMING_TARGET
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        if !RECORDING.load(Ordering::Relaxed) {
            return;
        }
        let mut v = Micros(None);
        e.record(&mut v);
        if let Some(us) = v.0 {
            SERVER_MICROS.lock().unwrap().push(us);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn record_server(on: bool) -> Vec<u64> {
    RECORDING.store(on, Ordering::SeqCst);
    std::mem::take(&mut *SERVER_MICROS.lock().unwrap())
}

// ---- figures ---------------------------------------------------------------

fn percentile<T: Copy + Ord>(v: &mut [T], p: f64) -> T {
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

// ---- a client over a transport ---------------------------------------------

/// What a bench drives: one call at a time, and N at a time for a while.
trait Client {
    /// One JSON-RPC request, its answer (the `result` object).
    fn request(&mut self, method: &str, params: Value) -> Value;
    /// One `tools/call` of the current tier's slugify, checked, timed.
    fn call_once(&mut self) -> Duration;
    /// Calls with `n` in flight for `LOAD`: how many, in how long.
    fn load(&mut self, n: usize) -> (u64, Duration);
}

#[path = "mcp/clients.rs"]
mod clients;
use clients::{Http, Stdio};

// ---- the cases -----------------------------------------------------------------

fn seed(name: &str) -> Value {
    let path = format!(
        "{}/../../tests/fixtures/seeds/slugify.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut seed: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    seed["name"] = Value::from(name);
    seed
}

/// One tier's figures in one round.
#[derive(Debug, Clone)]
struct Round {
    p50: Duration,
    p99: Duration,
    /// Calls/s at each load.
    per_sec: Vec<(usize, f64)>,
    /// CPU time of the whole process per call, µs, at each load.
    cpu_us: Vec<(usize, f64)>,
    /// Context switches of the whole process per call at each load:
    /// voluntary (a thread waits: a wake-up follows) and involuntary.
    switches: Vec<(usize, f64, f64)>,
    server_p50_us: u64,
    /// Sandbox calls of the one-in-flight run that found a pre-warmed
    /// instance, and those that made their own.
    warm: (u64, u64),
    /// The load average after it.
    load: String,
}

impl Round {
    fn rate(&self, n: usize) -> f64 {
        self.per_sec
            .iter()
            .find(|(k, _)| *k == n)
            .map_or(f64::NAN, |(_, v)| *v)
    }
    fn switches(&self, n: usize) -> (f64, f64) {
        self.switches
            .iter()
            .find(|(k, _, _)| *k == n)
            .map_or((f64::NAN, f64::NAN), |(_, v, i)| (*v, *i))
    }
    fn cpu(&self, n: usize) -> f64 {
        self.cpu_us
            .iter()
            .find(|(k, _)| *k == n)
            .map_or(f64::NAN, |(_, v)| *v)
    }
}

/// One tier's rounds.
#[derive(Debug, Clone)]
struct Row {
    transport: &'static str,
    store: &'static str,
    tier: &'static str,
    rounds: Vec<Round>,
}

/// Warms the current tier's tool up: at least `WARM_CALLS` calls and
/// `WARM_UP` (a hot tool is promoted to its own compiled snapshot in the
/// background; its first calls are slower).
fn warm_up(client: &mut dyn Client) {
    let warm = Instant::now();
    let mut warmed = 0;
    while warmed < WARM_CALLS || warm.elapsed() < WARM_UP {
        client.call_once();
        warmed += 1;
    }
}

/// Measures the current tier's tool once: one in flight, then each load.
fn measure(client: &mut dyn Client, runtime: &Runtime) -> Round {
    record_server(true);
    let warm_before = runtime.cache_stats();
    let mut one: Vec<Duration> = (0..SEQUENTIAL).map(|_| client.call_once()).collect();
    let warm_after = runtime.cache_stats();
    let mut server = record_server(false);
    let server_p50_us = percentile(&mut server, 0.5);
    let (p50, p99) = (percentile(&mut one, 0.5), percentile(&mut one, 0.99));
    let mut per_sec = Vec::new();
    let mut cpu_us = Vec::new();
    let mut switches = Vec::new();
    for n in IN_FLIGHT {
        let (cpu, (vol, invol)) = (process_cpu(), context_switches());
        let (calls, elapsed) = client.load(n);
        // The process's CPU time per call: the server's and this client's.
        cpu_us.push((n, (process_cpu() - cpu).as_secs_f64() * 1e6 / calls as f64));
        let (vol_after, invol_after) = context_switches();
        switches.push((
            n,
            (vol_after - vol) as f64 / calls as f64,
            (invol_after - invol) as f64 / calls as f64,
        ));
        per_sec.push((n, calls as f64 / elapsed.as_secs_f64()));
    }
    Round {
        p50,
        p99,
        per_sec,
        cpu_us,
        switches,
        server_p50_us,
        warm: (
            warm_after.warm_hits - warm_before.warm_hits,
            warm_after.warm_misses - warm_before.warm_misses,
        ),
        load: load_average(),
    }
}

fn rusage() -> libc::rusage {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) }, 0);
    u
}

/// This process's CPU time so far (all threads, ended ones included:
/// server and client).
fn process_cpu() -> Duration {
    let u = rusage();
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// This process's voluntary and involuntary context switches so far (all
/// threads, ended ones included).
fn context_switches() -> (i64, i64) {
    let u = rusage();
    (u.ru_nvcsw, u.ru_nivcsw)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A forge on `store` with the bench's settings.
fn forge(runtime: &Runtime, store: Registry) -> Forge {
    Forge::builder(runtime.clone(), Arc::new(store))
        .judge(Arc::new(RulesJudge::standard()))
        .config(ForgeConfig {
            promotion_threshold: PromotionThreshold {
                uses: 0,
                confidence: 0.5,
            },
            max_in_flight_calls: 1024,
            ..ForgeConfig::default()
        })
        .build()
}

/// After how many calls a hot tool is promoted to its own compiled
/// snapshot (`MCP_PROMOTE_AFTER`, 0: never; default the runtime's).
fn promote_after() -> u64 {
    std::env::var("MCP_PROMOTE_AFTER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(temper::limits::DEFAULT_PROMOTE_AFTER_CALLS)
}

/// How many rounds to run (`MCP_ROUNDS`, default [`ROUNDS`]).
fn rounds() -> usize {
    std::env::var("MCP_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(ROUNDS)
}

/// The three tiers over `client`, interleaved: every tier's tool is forged
/// (and promoted, and approved) over the connection first and warmed up;
/// then each round measures every tier once, back to back, the order
/// rotating from round to round (session agent shared, agent shared
/// session, ...), so a change in the machine's load between rounds moves
/// every tier's figures alike and each round's ratio to the session tier
/// compares figures taken seconds apart.
fn tiers(
    client: &mut dyn Client,
    forge: &Forge,
    runtime: &Runtime,
    transport: &'static str,
    store: &'static str,
) -> Vec<Row> {
    for (tier, name) in TIERS {
        let forged = client.request(
            "tools/call",
            json!({"name": "forge_tool", "arguments": seed(name)}),
        );
        assert_eq!(forged["isError"], false, "{forged}");
        if tier != "session" {
            let promoted = client.request(
                "tools/call",
                json!({"name": "promote_tool", "arguments": {"name": name}}),
            );
            assert_eq!(promoted["isError"], false, "{promoted}");
        }
        if tier == "shared" {
            // A human's approval (the CLI's `temper approve`).
            let info = forge
                .approve(name, "bench-agent", "bench", Some("the MCP bench"))
                .expect("approved into the shared tier");
            assert_eq!(info.tier.as_str(), "shared");
        }
    }
    for (i, (tier, _)) in TIERS.iter().enumerate() {
        TIER.store(i, Ordering::SeqCst);
        let promoted = runtime.cache_stats().promoted_tools;
        warm_up(client);
        // Every tier is measured promoted (when promotion is on): the
        // warm-up goes on until this tier's tool is.
        let waited = Instant::now();
        while promote_after() > 0 && runtime.cache_stats().promoted_tools == promoted {
            assert!(
                waited.elapsed() < PROMOTION_WAIT,
                "{transport}: the {tier} tier's tool was not promoted: {:?}",
                runtime.cache_stats()
            );
            client.call_once();
        }
    }
    let mut rows: Vec<Row> = TIERS
        .iter()
        .map(|(tier, _)| Row {
            transport,
            store,
            tier,
            rounds: Vec::new(),
        })
        .collect();
    for round in 0..rounds() {
        for k in 0..TIERS.len() {
            let i = (round + k) % TIERS.len();
            TIER.store(i, Ordering::SeqCst);
            let r = measure(client, runtime);
            println!(
                "{transport:5} {store:10} round {round} {:7}  p50 {:>6.1} µs  server p50 {:>3} µs  {}  pre-warmed {}/{}  (load {})",
                TIERS[i].0,
                us(r.p50),
                r.server_p50_us,
                r.per_sec
                    .iter()
                    .zip(&r.cpu_us)
                    .zip(&r.switches)
                    .map(|(((n, v), (_, c)), (_, vol, inv))| format!(
                        "{n}: {v:>6.0}/s {c:>5.1} µs CPU {vol:.2}+{inv:.2} cs"
                    ))
                    .collect::<Vec<_>>()
                    .join("  "),
                r.warm.0,
                r.warm.0 + r.warm.1,
                r.load
            );
            rows[i].rounds.push(r);
        }
    }
    TIER.store(0, Ordering::SeqCst);
    rows
}

/// A fresh PostgreSQL database on the cluster at `url` (dropped by the
/// returned guard's owner at the end): its URL.
fn postgres_database(rt: &tokio::runtime::Runtime, url: &str, name: &str) -> String {
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect to TEMPER_TEST_PG_URL");
        tokio::spawn(conn);
        // One statement each: DROP and CREATE DATABASE refuse to run in
        // the implicit transaction of a multi-statement batch.
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            client.batch_execute(&sql).await.unwrap();
        }
    });
    let mut u = url::Url::parse(url).unwrap();
    u.set_path(&format!("/{name}"));
    u.to_string()
}

fn drop_postgres_database(rt: &tokio::runtime::Runtime, url: &str, name: &str) {
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        let _ = client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    });
}

fn main() {
    tracing::subscriber::set_global_default(Timings).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let load_before = load_average();
    let started = Instant::now();
    let runtime = rt.block_on(async {
        let runtime = Runtime::builder()
            .cache_limits(temper::limits::CacheLimits {
                promote_after_calls: promote_after(),
                ..Default::default()
            })
            .build()
            .unwrap();
        runtime.warm_up().await.unwrap();
        runtime
    });
    let target_dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target"));
    let mut rows = Vec::new();
    // MCP_BENCH=stdio or http runs one transport (to profile it).
    let only = std::env::var("MCP_BENCH").ok();
    let transports: Vec<&'static str> = ["stdio", "http"]
        .into_iter()
        .filter(|t| only.as_deref().is_none_or(|o| o == *t))
        .collect();

    // SQLite: one store directory per transport.
    for &transport in &transports {
        let dir = tempfile::Builder::new()
            .prefix("bench-mcp-")
            .tempdir_in(&target_dir)
            .unwrap();
        let forge = forge(&runtime, Registry::open(dir.path()).unwrap());
        rows.extend(run(transport, "SQLite", forge, &runtime, &rt));
    }
    // PostgreSQL, when a cluster is given.
    match std::env::var("TEMPER_TEST_PG_URL") {
        Ok(url) => {
            for &transport in &transports {
                let name = format!("temper_bench_mcp_{transport}_{}", std::process::id());
                let db = postgres_database(&rt, &url, &name);
                let store = rt
                    .block_on(async {
                        let location = StoreLocation::parse(&db).unwrap();
                        tokio::task::spawn_blocking(move || location.open()).await
                    })
                    .unwrap()
                    .unwrap();
                let forge = forge(&runtime, store);
                rows.extend(run(transport, "PostgreSQL", forge, &runtime, &rt));
                drop_postgres_database(&rt, &url, &name);
            }
        }
        Err(_) => println!("PostgreSQL skipped: TEMPER_TEST_PG_URL is not set"),
    }

    let promoted = runtime.cache_stats().promoted_tools;
    let report = report(&rows, &load_before, started.elapsed(), promoted);
    let path = target_dir.join("bench-mcp.md");
    std::fs::write(&path, report).unwrap();
    println!("report: {}", path.display());
    // The servers' tasks end with the runtime.
    rt.shutdown_timeout(Duration::from_secs(5));
}

fn run(
    transport: &'static str,
    store: &'static str,
    forge: Forge,
    runtime: &Runtime,
    rt: &tokio::runtime::Runtime,
) -> Vec<Row> {
    let handle = forge.clone();
    match transport {
        "stdio" => {
            let mut c = Stdio::start(forge, rt);
            tiers(&mut c, &handle, runtime, transport, store)
        }
        _ => {
            let mut c = Http::start(forge, rt);
            tiers(&mut c, &handle, runtime, transport, store)
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The median of `f` over `row`'s rounds.
fn med(row: &Row, f: impl Fn(&Round) -> f64) -> f64 {
    median(row.rounds.iter().map(f).collect())
}

/// Per round, `f` of `row` over `f` of `base` (the session tier's row of
/// the same case): median and range, as text.
fn ratio(row: &Row, base: &Row, f: impl Fn(&Round) -> f64) -> String {
    let r: Vec<f64> = row
        .rounds
        .iter()
        .zip(&base.rounds)
        .map(|(a, b)| f(a) / f(b))
        .collect();
    let (lo, hi) = r
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(*x), hi.max(*x))
        });
    format!("{:.2} ({lo:.2}–{hi:.2})", median(r))
}

fn report(rows: &[Row], load_before: &str, took: Duration, promoted: u64) -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let rounds = rows.first().map_or(0, |r| r.rounds.len());
    let mut out = String::new();
    out.push_str("# MCP path bench\n\n");
    out.push_str(&format!(
        "`cargo bench -p temper-cli --bench mcp`, {date}: {cores} cores, load average {load_before} before \
         and {} after; {:.0} s in all. The slugify seed through an in-process `temper mcp` \
         (2 tokio workers), client in the same process.\n\n",
        load_average(),
        took.as_secs_f64(),
    ));
    out.push_str(&format!(
        "**Method.** Three copies of the seed, one per tier (`slugify` kept in the connection's \
         session, `slugify_agent` promoted to the agent tier, `slugify_shared` promoted and \
         approved into the shared tier), are forged over the connection first, and each is \
         warmed up ({WARM_CALLS} calls and at least {} s). Then {rounds} rounds: each measures \
         every tier once, back to back, the order rotating from round to round (session agent \
         shared, agent shared session, shared session agent, ...). A tier's measurement is \
         {SEQUENTIAL} calls with one in flight (round trip p50 and p99; server-side time per \
         call p50: stdio from the request line read to the answer written, HTTP from the \
         headers read to the answer handed to hyper), then {} s with 32 and {} s with 64 calls \
         in flight (stdio: requests pipelined on the one connection, one client thread; HTTP: \
         one keep-alive connection per call in flight, the client {}). A figure below is the median over the rounds; \
         *ratio to session* divides each round's figure by the session tier's of the same \
         round (taken seconds apart, so a change in the machine's load moves both) and gives \
         the median and the range over the rounds.\n\n",
        WARM_UP.as_secs(),
        LOAD.as_secs(),
        LOAD.as_secs(),
        clients::http_client_name(),
    ));
    out.push_str(&format!(
        "CPU per call is the whole process's (server and client) over the run, so it holds when \
         other work shares the cores; *CPU-bound* is {cores} cores divided by it, the rate the \
         process would reach with the cores to itself.\n\n"
    ));
    out.push_str(&format!(
        "*Pre-warmed* counts the one-in-flight runs' sandbox calls that found a pre-warmed \
         instance, of all their sandbox calls, summed over the rounds (a miss instantiates and \
         loads the tool on the call's path). `TEMPER_MCP_READER_INLINE={}` in this run (0: every \
         stdio request is handed to a tokio worker); `TEMPER_MCP_RETIRE_AFTER={}` (0: a call \
         answered on the stdio reader hands its used store to the reaper and spawns its pre-warm \
         refill before the answer is written, not after); `TEMPER_MCP_HTTP_INLINE={}` (2: an HTTP request is handled in its \
         connection's task, which then yields once; 1: without the yield; 0: in a task of its \
         own).\n\n",
        std::env::var("TEMPER_MCP_READER_INLINE").unwrap_or_else(|_| "1 (default)".into()),
        std::env::var("TEMPER_MCP_RETIRE_AFTER").unwrap_or_else(|_| "1 (default)".into()),
        std::env::var("TEMPER_MCP_HTTP_INLINE").unwrap_or_else(|_| "2 (default)".into())
    ));
    out.push_str(&format!(
        "Hot tools are promoted to their own compiled snapshot after {} calls on the shared \
         engine (`MCP_PROMOTE_AFTER`; 0: never), compiled in the background; each tier's \
         warm-up goes on until its tool is promoted. {promoted} promotions in this run.\n\n",
        promote_after()
    ));
    out.push_str("| transport | store | tier | p50, 1 in flight | p99, 1 in flight | calls/s, 32 in flight | calls/s, 64 in flight | CPU per call, 32 / 64 in flight | CPU-bound calls/s, 64 in flight | context switches per call, 64 in flight (voluntary + involuntary) | server-side p50 | pre-warmed |\n");
    out.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let warm = r
            .rounds
            .iter()
            .fold((0, 0), |(h, m), x| (h + x.warm.0, m + x.warm.1));
        out.push_str(&format!(
            "| {} | {} | {} | {:.1} µs | {:.1} µs | {:.0} | {:.0} | {:.0} / {:.0} µs | {:.0} | {:.2} + {:.2} | {:.0} µs | {}/{} |\n",
            r.transport,
            r.store,
            r.tier,
            med(r, |x| us(x.p50)),
            med(r, |x| us(x.p99)),
            med(r, |x| x.rate(32)),
            med(r, |x| x.rate(64)),
            med(r, |x| x.cpu(32)),
            med(r, |x| x.cpu(64)),
            med(r, |x| cores as f64 * 1e6 / x.cpu(64)),
            med(r, |x| x.switches(64).0),
            med(r, |x| x.switches(64).1),
            med(r, |x| x.server_p50_us as f64),
            warm.0,
            warm.0 + warm.1,
        ));
    }
    out.push_str("\n**Ratio to session**, per round (median, range):\n\n");
    out.push_str("| transport | store | tier | p50, 1 in flight | server-side p50 | calls/s, 64 in flight | CPU per call, 64 in flight |\n");
    out.push_str("|---|---|---|---:|---:|---:|---:|\n");
    for r in rows.iter().filter(|r| r.tier != "session") {
        let Some(base) = rows
            .iter()
            .find(|b| b.tier == "session" && b.transport == r.transport && b.store == r.store)
        else {
            continue;
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.transport,
            r.store,
            r.tier,
            ratio(r, base, |x| us(x.p50)),
            ratio(r, base, |x| x.server_p50_us as f64),
            ratio(r, base, |x| x.rate(64)),
            ratio(r, base, |x| x.cpu(64)),
        ));
    }
    out.push_str(
        "\n**Rounds** (in the order run; each tier's figures and the load average after them):\n\n",
    );
    out.push_str("| transport | store | round | tier | p50, 1 in flight | server-side p50 | calls/s, 64 in flight | CPU per call, 64 in flight | pre-warmed | load |\n");
    out.push_str("|---|---|---:|---|---:|---:|---:|---:|---:|---|\n");
    let mut cases: Vec<(&str, &str)> = rows.iter().map(|r| (r.transport, r.store)).collect();
    cases.dedup();
    for (transport, store) in cases {
        let case: Vec<&Row> = rows
            .iter()
            .filter(|r| r.transport == transport && r.store == store)
            .collect();
        for round in 0..rounds {
            for k in 0..case.len() {
                let row = case[(round + k) % case.len()];
                let Some(x) = row.rounds.get(round) else {
                    continue;
                };
                out.push_str(&format!(
                    "| {transport} | {store} | {round} | {} | {:.1} µs | {} µs | {:.0} | {:.0} µs | {}/{} | {} |\n",
                    row.tier,
                    us(x.p50),
                    x.server_p50_us,
                    x.rate(64),
                    x.cpu(64),
                    x.warm.0,
                    x.warm.0 + x.warm.1,
                    x.load
                ));
            }
        }
    }
    out
}
