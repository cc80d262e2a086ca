//! PostgreSQL-only store tests: several hosts on one database (separate
//! registries, each with its own pool), a host killed with SIGKILL in the
//! middle of its transactions, concurrent migrations, a schema from the
//! future, and passwords kept out of every message. The cases every
//! backend shares are in `store::tests::suite`.
//!
//! The crash test re-executes this test binary as a child
//! (`<test-binary> --exact store::postgres::tests::sigkill_… --nocapture`)
//! with `TEMPER_PG_CRASH_CHILD_URL` set, which makes the same test run the
//! writer loop instead.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde_json::json;

use super::testing::{TestDb, cluster_url, with_dbname};
use super::*;
use crate::tests::{crash_write_step, xorshift};
use crate::{AuditKind, Tier};

fn record(name: &str, agent: Option<&str>, tier: Tier, artifact: &ArtifactId) -> ToolRecord {
    ToolRecord {
        name: name.to_owned(),
        agent_id: agent.map(str::to_owned),
        session_id: Some("s1".into()),
        tier,
        artifact: artifact.clone(),
        manifest: json!({"input_schema": {"type": "object"}, "sourceBlake3": "cd".repeat(32)}),
        created_seq: 0,
    }
}

fn this_test(name: &str) -> String {
    let module = module_path!();
    let module = module.split_once("::").map_or("", |(_, rest)| rest);
    format!("{module}::{name}")
}

#[test]
fn redact_url_hides_the_password_in_every_form() {
    let cases = [
        (
            "postgres://temper:s3cret@db.internal:5432/temper",
            "postgres://temper:***@db.internal:5432/temper",
        ),
        (
            "postgresql://u:p%40ss@127.0.0.1/x?sslmode=disable",
            "postgresql://u:***@127.0.0.1/x?sslmode=disable",
        ),
        (
            "postgres://u@h/db?password=s3cret&application_name=a",
            "postgres://u@h/db?password=***&application_name=a",
        ),
        ("postgres://h/db", "postgres://h/db"),
        (
            "host=db.internal port=5433 user=temper password='s3cret word' dbname=t",
            "host=db.internal port=5433 user=temper password=*** dbname=t",
        ),
    ];
    for (url, want) in cases {
        let got = redact_url(url);
        assert_eq!(got, want, "{url}");
        assert!(!got.contains("s3cret") && !got.contains("p%40ss"), "{got}");
    }
    assert_eq!(
        redact_url("host='unterminated password=s3cret"),
        "<unparseable connection string>"
    );
}

#[test]
fn unreachable_server_and_bad_url_never_show_the_password() {
    // A port nothing listens on (bound then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://temper:hunter2-secret@127.0.0.1:{port}/temper");
    let options = PostgresOptions {
        connect_timeout: Duration::from_secs(2),
        ..PostgresOptions::default()
    };
    let err = Registry::open_postgres_with(&url, options).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, StoreError::Pool { op: "open", location, .. } if location.contains(":***@")),
        "{err:?}"
    );
    assert!(!msg.contains("hunter2"), "{msg}");
    assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");

    let err = Registry::open_postgres("postgres://temper:hunter2-secret@127.0.0.1:notaport/x")
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidUrl { .. }), "{err:?}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[test]
fn wrong_password_is_refused_and_location_is_redacted() {
    let Some(db) = TestDb::create(&this_test(
        "wrong_password_is_refused_and_location_is_redacted",
    )) else {
        return;
    };
    let store = Registry::open_postgres(&db.url).unwrap();
    assert_eq!(store.backend().kind(), BackendKind::Postgres);
    let real = url::Url::parse(&db.url).unwrap();
    let password = real.password().expect("the test cluster uses a password");
    let location = store.location();
    assert!(!location.contains(password), "{location}");
    assert!(location.contains(":***@"), "{location}");
    assert!(location.ends_with(&format!("/{}", db.name)), "{location}");

    let mut wrong = real.clone();
    wrong.set_password(Some("not-the-password-xyz")).unwrap();
    let err = Registry::open_postgres(wrong.as_str()).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, StoreError::Pool { op: "open", .. }),
        "{err:?}"
    );
    assert!(msg.contains("password authentication failed"), "{msg}");
    assert!(!msg.contains("not-the-password-xyz"), "{msg}");
    assert!(!msg.contains(password), "{msg}");
}

#[test]
fn migrations_run_once_when_four_hosts_open_a_fresh_database() {
    let Some(db) = TestDb::create(&this_test(
        "migrations_run_once_when_four_hosts_open_a_fresh_database",
    )) else {
        return;
    };
    let barrier = Barrier::new(4);
    let stores: Vec<Registry> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    Registry::open_postgres(&db.url).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        db.scalar("SELECT count(*) FROM temper_migrations"),
        PG_SCHEMA_VERSION
    );
    assert_eq!(
        db.scalar("SELECT max(version) FROM temper_migrations"),
        PG_SCHEMA_VERSION
    );
    assert_eq!(db.scalar("SELECT count(*) FROM audit_head"), 1);
    for (i, store) in stores.iter().enumerate() {
        store
            .append_audit(AuditKind::Approval, "m", Some(&format!("h{i}")), &json!({}))
            .unwrap();
    }
    // Reopening is a no-op.
    let again = Registry::open_postgres(&db.url).unwrap();
    assert_eq!(
        db.scalar("SELECT count(*) FROM temper_migrations"),
        PG_SCHEMA_VERSION
    );
    assert_eq!(again.verify_audit().unwrap().entries, 4);
}

#[test]
fn schema_too_new_is_refused() {
    let Some(db) = TestDb::create(&this_test("schema_too_new_is_refused")) else {
        return;
    };
    drop(Registry::open_postgres(&db.url).unwrap());
    db.exec(&format!(
        "INSERT INTO temper_migrations (version) VALUES ({})",
        PG_SCHEMA_VERSION + 1
    ));
    let err = Registry::open_postgres(&db.url).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::SchemaTooNew { found, supported }
                if found == PG_SCHEMA_VERSION + 1 && supported == PG_SCHEMA_VERSION
        ),
        "{err:?}"
    );
}

#[test]
fn a_tool_forged_on_one_host_is_served_by_another_and_stats_add_up() {
    let Some(db) = TestDb::create(&this_test(
        "a_tool_forged_on_one_host_is_served_by_another_and_stats_add_up",
    )) else {
        return;
    };
    let a = Registry::open_postgres(&db.url).unwrap();
    let b = Registry::open_postgres(&db.url).unwrap();
    let bytes = b"\0asm component forged on host a".to_vec();
    let id = a.put_artifact(&bytes).unwrap();
    a.register(record("fmt", Some("alice"), Tier::Agent, &id))
        .unwrap();
    // Host B fetches and verifies the artifact it never had.
    assert_eq!(b.get_artifact(&id).unwrap(), bytes);
    let seen = b.get("fmt", "alice").unwrap().unwrap();
    assert_eq!(seen.artifact, id);
    assert!(b.get("fmt", "bob").unwrap().is_none());
    for i in 0..10u64 {
        a.record_invocation("fmt", "alice", true, 1000 + i).unwrap();
        b.record_invocation("fmt", "alice", i % 2 == 0, 2000 + i)
            .unwrap();
    }
    // Each host reads its own calls at once, the other's once written
    // (one flush interval; here, flushed by hand).
    assert_eq!(a.stats("fmt", "alice").unwrap().total_calls, 10);
    b.flush_stats().unwrap();
    let (sa, sb) = (
        a.stats("fmt", "alice").unwrap(),
        b.stats("fmt", "alice").unwrap(),
    );
    assert_eq!(sa, sb);
    assert_eq!((sa.total_calls, sa.successes), (20, 15));
    b.approve_and_promote("fmt", "alice", &json!({"by": "reviewer"}))
        .unwrap();
    assert_eq!(a.get("fmt", "bob").unwrap().unwrap().tier, Tier::Shared);
    assert_eq!(a.stats("fmt", "bob").unwrap().total_calls, 20);
    let (ra, rb) = (a.verify_audit().unwrap(), b.verify_audit().unwrap());
    assert_eq!(ra, rb);
    assert_eq!(ra.entries, 3);
}

#[test]
fn four_hosts_times_eight_threads_keep_one_chain_and_unique_names() {
    const HOSTS: usize = 4;
    const THREADS: usize = 8;
    const NAMES: usize = 6;
    const APPENDS: usize = 6;
    let Some(db) = TestDb::create(&this_test(
        "four_hosts_times_eight_threads_keep_one_chain_and_unique_names",
    )) else {
        return;
    };
    let hosts: Vec<Registry> = (0..HOSTS)
        .map(|_| Registry::open_postgres(&db.url).unwrap())
        .collect();
    let id = hosts[0].put_artifact(b"raced artifact").unwrap();
    let barrier = Barrier::new(HOSTS * THREADS);
    let start = Instant::now();
    // (wins per name, appended entries)
    let results: Vec<(Vec<(String, i64)>, usize)> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (h, host) in hosts.iter().enumerate() {
            for t in 0..THREADS {
                let (barrier, id) = (&barrier, &id);
                handles.push(s.spawn(move || {
                    let agent = format!("h{h}t{t}");
                    barrier.wait();
                    let mut wins = Vec::new();
                    let mut appended = 0;
                    for k in 0..NAMES.max(APPENDS) {
                        if k < NAMES {
                            // Every thread of every host races for the same
                            // shared name and the same agent-tier name.
                            for (name, owner, tier) in [
                                (format!("shared{k}"), Some(agent.as_str()), Tier::Shared),
                                (format!("mine{k}"), Some("alice"), Tier::Agent),
                            ] {
                                match host.register(record(&name, owner, tier, id)) {
                                    Ok(rec) => wins.push((name, rec.created_seq)),
                                    Err(StoreError::Conflict { .. }) => {}
                                    Err(e) => panic!("host {h} thread {t}: {e}"),
                                }
                            }
                        }
                        if k < APPENDS {
                            host.append_audit(
                                AuditKind::ForgeDecision,
                                &format!("x{k}"),
                                Some(&agent),
                                &json!({"host": h, "thread": t, "k": k}),
                            )
                            .unwrap_or_else(|e| panic!("host {h} thread {t}: {e}"));
                            appended += 1;
                        }
                    }
                    (wins, appended)
                }));
            }
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!(
        "{HOSTS} hosts x {THREADS} threads: {} registrations and appends in {:?}",
        HOSTS * THREADS * (2 * NAMES + APPENDS),
        start.elapsed()
    );
    let mut wins: Vec<(String, i64)> = results.iter().flat_map(|r| r.0.clone()).collect();
    let appended: usize = results.iter().map(|r| r.1).sum();
    assert_eq!(appended, HOSTS * THREADS * APPENDS);
    wins.sort();
    let names: Vec<&str> = wins.iter().map(|w| w.0.as_str()).collect();
    let mut want: Vec<String> = (0..NAMES)
        .flat_map(|k| [format!("shared{k}"), format!("mine{k}")])
        .collect();
    want.sort();
    assert_eq!(names, want, "exactly one winner per name");
    let expected = (appended + wins.len()) as u64;
    let mut heads = Vec::new();
    for (h, host) in hosts.iter().enumerate() {
        let report = host
            .verify_audit()
            .unwrap_or_else(|e| panic!("host {h}: {e}"));
        assert_eq!(report.entries, expected, "host {h}");
        heads.push(report.head_hash);
    }
    assert!(heads.windows(2).all(|w| w[0] == w[1]));
    // Each winner's registration entry is in the chain under its seq.
    let entries = hosts[1].audit_entries(0, expected as usize + 10).unwrap();
    assert_eq!(entries.len() as u64, expected);
    for (name, seq) in &wins {
        let e = &entries[*seq as usize - 1];
        assert_eq!(
            (e.kind, e.subject.as_str()),
            (AuditKind::Registration, name.as_str())
        );
    }
    assert_eq!(hosts[2].shared_tools().unwrap().len(), NAMES);
    assert_eq!(hosts[3].agent_tool_count("alice").unwrap(), NAMES);
}

#[test]
fn concurrent_promotions_from_four_hosts_have_one_winner_and_no_stray_approval() {
    const HOSTS: usize = 4;
    const AGENTS_PER_HOST: usize = 4;
    let Some(db) = TestDb::create(&this_test(
        "concurrent_promotions_from_four_hosts_have_one_winner_and_no_stray_approval",
    )) else {
        return;
    };
    let hosts: Vec<Registry> = (0..HOSTS)
        .map(|_| Registry::open_postgres(&db.url).unwrap())
        .collect();
    let id = hosts[0].put_artifact(b"promoted artifact").unwrap();
    let agents: Vec<String> = (0..HOSTS * AGENTS_PER_HOST)
        .map(|i| format!("agent{i}"))
        .collect();
    for agent in &agents {
        hosts[0]
            .register(record("p", Some(agent), Tier::Agent, &id))
            .unwrap();
    }
    let barrier = Barrier::new(agents.len());
    let wins: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = agents
            .iter()
            .enumerate()
            .map(|(i, agent)| {
                let (host, barrier) = (&hosts[i % HOSTS], &barrier);
                s.spawn(move || {
                    barrier.wait();
                    match host.approve_and_promote("p", agent, &json!({"by": "reviewer"})) {
                        Ok(rec) => Some(rec.agent_id.unwrap()),
                        Err(StoreError::Conflict { op: "promote", .. }) => None,
                        Err(e) => panic!("{agent}: {e}"),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect()
    });
    assert_eq!(wins.len(), 1, "exactly one promotion wins: {wins:?}");
    let entries = hosts[3].audit_entries(0, 1000).unwrap();
    let count = |k: AuditKind| entries.iter().filter(|e| e.kind == k).count();
    assert_eq!(
        count(AuditKind::Approval),
        1,
        "a refused promotion left its approval"
    );
    assert_eq!(count(AuditKind::Promotion), 1);
    assert_eq!(entries.len(), agents.len() + 2);
    for host in &hosts {
        assert_eq!(
            host.verify_audit().unwrap().entries as usize,
            agents.len() + 2
        );
    }
    let shared = hosts[2].get("p", "nobody").unwrap().unwrap();
    assert_eq!(shared.tier, Tier::Shared);
    assert_eq!(shared.agent_id.as_deref(), Some(wins[0].as_str()));
    assert_eq!(hosts[1].agent_tool_count(&wins[0]).unwrap(), 0);
}

#[tokio::test]
async fn works_from_a_current_thread_runtime_and_drops_inside_it() {
    let Some(db) = TestDb::create(&this_test(
        "works_from_a_current_thread_runtime_and_drops_inside_it",
    )) else {
        return;
    };
    let store = Registry::open_postgres(&db.url).unwrap();
    let id = store.put_artifact(b"async caller").unwrap();
    store
        .register(record("t", Some("a"), Tier::Agent, &id))
        .unwrap();
    // The runtime of this test keeps working while the store is used.
    let ticker = tokio::spawn(async { tokio::time::sleep(Duration::from_millis(1)).await });
    assert_eq!(store.get("t", "a").unwrap().unwrap().artifact, id);
    ticker.await.unwrap();
    drop(store);
    let again = Registry::open_postgres(&db.url).unwrap();
    assert_eq!(again.verify_audit().unwrap().entries, 1);
    drop(again);
}

// ---- a host killed with SIGKILL mid-transaction -----------------------------

const CHILD_URL_ENV: &str = "TEMPER_PG_CRASH_CHILD_URL";
const CHILD_ROUND_ENV: &str = "TEMPER_PG_CRASH_ROUND";
const READY: &str = "TEMPER_PG_CHILD_READY";
const CRASH_ROUNDS: u64 = 12;

/// The child: four writer threads, forever (bounded at 30 s), until killed.
fn child_writer(url: &str, round: u64) {
    let store = Registry::open_postgres(url).unwrap();
    println!("\n{READY}");
    let deadline = Instant::now() + Duration::from_secs(30);
    std::thread::scope(|s| {
        for w in 0..4u64 {
            let store = &store;
            s.spawn(move || {
                let mut rng = xorshift(round * 16 + w + 1);
                let mut i = 0u64;
                while Instant::now() < deadline {
                    rng = xorshift(rng);
                    let name = format!("r{round}-w{w}-t{i}");
                    crash_write_step(store, &name, round, i, rng);
                    match rng % 5 {
                        0 => drop(
                            store
                                .approve_and_promote(&name, "crash", &json!({"round": round}))
                                .unwrap(),
                        ),
                        1 => drop(store.delete(&name, "crash").unwrap()),
                        _ => {}
                    }
                    i += 1;
                }
            });
        }
    });
    std::process::exit(0);
}

#[test]
fn sigkill_mid_transaction_leaves_the_shared_store_consistent() {
    if let Ok(url) = std::env::var(CHILD_URL_ENV) {
        let round = std::env::var(CHILD_ROUND_ENV)
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        child_writer(&url, round);
        return;
    }
    let name = this_test("sigkill_mid_transaction_leaves_the_shared_store_consistent");
    let Some(db) = TestDb::create(&name) else {
        return;
    };
    let survivor = Registry::open_postgres(&db.url).unwrap();
    let exe = std::env::current_exe().unwrap();
    let start = Instant::now();
    let mut last_entries = 0u64;
    for round in 0..CRASH_ROUNDS {
        let mut child = Command::new(&exe)
            .args(["--exact", &name, "--nocapture", "--test-threads=1"])
            .env(CHILD_URL_ENV, &db.url)
            .env(CHILD_ROUND_ENV, round.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let ready = lines
            .by_ref()
            .any(|l| l.map(|l| l.contains(READY)).unwrap_or(false));
        assert!(ready, "round {round}: child exited before it was ready");
        std::thread::sleep(Duration::from_millis(50 + xorshift(round) % 250));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "round {round}: child was not killed");
        drop(lines);

        // The surviving host goes on: the killed one's locks are gone.
        let own = survivor
            .append_audit(
                AuditKind::Approval,
                "survivor",
                None,
                &json!({"round": round}),
            )
            .unwrap_or_else(|e| panic!("round {round}: survivor cannot append: {e}"));
        let report = survivor
            .verify_audit()
            .unwrap_or_else(|e| panic!("round {round}: audit chain broken after kill: {e}"));
        assert!(report.entries >= own.seq as u64);
        assert!(
            report.entries > last_entries,
            "round {round}: committed audit entries lost"
        );
        last_entries = report.entries;
        // A fresh host sees a consistent store.
        let fresh = Registry::open_postgres(&db.url).unwrap();
        assert_eq!(fresh.verify_audit().unwrap(), report);
        let mut tools = fresh.tools_for_agent("crash").unwrap();
        tools.extend(fresh.shared_tools().unwrap());
        for tool in &tools {
            fresh
                .get_artifact(&tool.artifact)
                .unwrap_or_else(|e| panic!("round {round}: tool {}: {e}", tool.name));
            assert!(tool.created_seq >= 1 && tool.created_seq as u64 <= report.entries);
        }
    }
    eprintln!(
        "postgres crash test: {CRASH_ROUNDS} SIGKILL rounds in {:?}; {last_entries} audit entries",
        start.elapsed()
    );
    assert!(
        last_entries > 4 * CRASH_ROUNDS,
        "the child made too little progress to test anything"
    );
}

#[test]
fn test_databases_are_isolated() {
    // with_dbname only swaps the path: credentials and host stay.
    let url = with_dbname("postgres://u:p@127.0.0.1:5/postgres", "other");
    assert_eq!(url, "postgres://u:p@127.0.0.1:5/other");
    if cluster_url("store::postgres::tests::test_databases_are_isolated").is_none() {
        return;
    }
    let (a, b) = (
        TestDb::create("isolation a").unwrap(),
        TestDb::create("isolation b").unwrap(),
    );
    assert_ne!(a.name, b.name);
    let ra = Registry::open_postgres(&a.url).unwrap();
    let rb = Registry::open_postgres(&b.url).unwrap();
    ra.append_audit(AuditKind::Approval, "x", None, &json!({}))
        .unwrap();
    assert_eq!(rb.verify_audit().unwrap().entries, 0);
}

#[test]
fn a_database_that_cannot_answer_is_an_error_not_a_missing_artifact() {
    let Some(db) = TestDb::create(&this_test(
        "a_database_that_cannot_answer_is_an_error_not_a_missing_artifact",
    )) else {
        return;
    };
    let store = Registry::open_postgres(&db.url).unwrap();
    let id = store.put_artifact(b"kept").unwrap();
    assert!(store.has_artifact(&id).unwrap());
    db.exec("DROP TABLE artifacts");
    let err = store.has_artifact(&id).unwrap_err();
    assert!(matches!(err, StoreError::Postgres { .. }), "{err:?}");
}
