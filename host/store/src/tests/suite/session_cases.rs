//! The session-tier cases of the store suite (`store::sessions`), on each
//! backend: a session tool and its forge decision commit together, ending
//! and expiring discard the tools with one deletion entry each (once, when
//! hosts race), uses are written behind, and a promotion takes the tool
//! out of its session in the registration's transaction.

use std::sync::{Arc, Barrier};

use super::*;

fn session(agent: &str, id: &str, idle_ms: i64) -> SessionRecord {
    SessionRecord::new(agent, id, "sha256:owner", idle_ms)
}

fn decision(name: &str) -> serde_json::Value {
    json!({"approved": true, "tier": "session", "session": "s1", "tool": name})
}

/// Adds session tool `name` to (alice, `id`).
fn add(store: &Registry, id: &str, name: &str, artifact: &ArtifactId) -> Result<i64, StoreError> {
    store.add_session_tool(
        &session("alice", id, 60_000),
        name,
        artifact,
        &json!({"name": name, "sourceBlake3": "ab"}),
        &decision(name),
        3,
    )
}

fn entries(store: &Registry) -> Vec<AuditEntry> {
    store.audit_entries(0, 10_000).unwrap()
}

/// SQL that makes every audit append of subject `boom` fail.
fn failing_append_sql(fx: &Fixture) -> &'static str {
    match fx {
        Fixture::Sqlite(_) => {
            "CREATE TRIGGER audit_boom BEFORE INSERT ON audit WHEN NEW.subject = 'boom'
             BEGIN SELECT RAISE(ABORT, 'injected audit failure'); END;"
        }
        Fixture::Postgres(_) => {
            "CREATE FUNCTION audit_boom() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               IF NEW.subject = 'boom' THEN RAISE EXCEPTION 'injected audit failure'; END IF;
               RETURN NEW;
             END $$;
             CREATE TRIGGER audit_boom BEFORE INSERT ON audit
               FOR EACH ROW EXECUTE FUNCTION audit_boom();"
        }
    }
}

pub(super) fn session_tool_and_its_decision_commit_together(fx: &Fixture) {
    let store = fx.open();
    let id = store.put_artifact(b"session tool").unwrap();
    let seq = add(&store, "s1", "a", &id).unwrap();
    let all = entries(&store);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].seq, seq);
    assert_eq!(all[0].kind, AuditKind::ForgeDecision);
    assert_eq!(all[0].agent.as_deref(), Some("alice"));
    let tools = store.session_tools("alice", "s1").unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!((tools[0].name.as_str(), tools[0].created_seq), ("a", seq));
    assert_eq!(tools[0].artifact, id);
    // Made implicitly with the tool, owned as given.
    let s = store.session("alice", "s1").unwrap().expect("stored");
    assert_eq!(s.owner, "sha256:owner");
    // Another agent's session of the same id is another session.
    assert!(store.session_tools("bob", "s1").unwrap().is_empty());

    // A taken name: refused, and its decision is not kept.
    let err = add(&store, "s1", "a", &id).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                tier: "session",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(entries(&store).len(), 1, "no decision without its tool");

    // A full session: refused the same way.
    add(&store, "s1", "b", &id).unwrap();
    add(&store, "s1", "c", &id).unwrap();
    let err = add(&store, "s1", "d", &id).unwrap_err();
    assert!(
        matches!(err, StoreError::SessionFull { limit: 3, .. }),
        "{err}"
    );
    assert_eq!(entries(&store).len(), 3);

    // An artifact that is not stored: refused before anything is written.
    let missing = ArtifactId::of(b"never stored");
    let err = add(&store, "s2", "m", &missing).unwrap_err();
    assert!(matches!(err, StoreError::MissingArtifact { .. }), "{err}");
    assert!(store.session("alice", "s2").unwrap().is_none());

    // The audit append fails: the tool is not kept either (what a forge
    // killed between the two used to leave, the other way round).
    fx.try_exec(failing_append_sql(fx)).unwrap();
    let err = add(&store, "s2", "boom", &id).unwrap_err();
    assert!(err.to_string().contains("injected audit failure"), "{err}");
    assert!(store.session_tools("alice", "s2").unwrap().is_empty());
    assert!(
        store.session("alice", "s2").unwrap().is_none(),
        "the implicit session rolled back with it"
    );
    assert_eq!(entries(&store).len(), 3);
    store.verify_audit().unwrap();
}

pub(super) fn ending_a_session_discards_its_tools_with_entries(fx: &Fixture) {
    let store = fx.open();
    store.set_stats_flush(Duration::from_secs(3600));
    let id = store.put_artifact(b"ended").unwrap();
    add(&store, "s1", "a", &id).unwrap();
    add(&store, "s1", "b", &id).unwrap();
    add(&store, "keep", "a", &id).unwrap();
    for i in 0..5 {
        store
            .record_session_invocation("alice", "s1", "a", i != 0, 100 + i)
            .unwrap();
    }
    // Written behind: nothing yet in the store.
    assert_eq!(
        store.session_tools("alice", "s1").unwrap()[0]
            .counters
            .total,
        0
    );
    let c = store
        .session_tool_counters("alice", "s1", "a")
        .unwrap()
        .expect("a");
    assert_eq!((c.total, c.successes, c.latency_sum_us), (5, 4, 510));
    assert_eq!(c.recent_us.len(), 5);

    let ended = store.end_session("alice", "s1").unwrap().expect("ended");
    let names: Vec<&str> = ended.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(ended.entries.len(), 2);
    for e in &ended.entries {
        assert_eq!(e.kind, AuditKind::Deletion);
        assert_eq!(e.agent.as_deref(), Some("alice"));
        assert_eq!(e.payload["tier"], "session");
        assert_eq!(e.payload["session"], "s1");
        assert_eq!(e.payload["reason"], "session ended");
        assert!(e.payload.get("expired").is_none());
        assert_eq!(e.payload["artifact"], id.as_str());
    }
    assert!(store.session("alice", "s1").unwrap().is_none());
    assert!(store.session_tools("alice", "s1").unwrap().is_empty());
    assert!(store.end_session("alice", "s1").unwrap().is_none(), "once");
    assert_eq!(store.session_tools("alice", "keep").unwrap().len(), 1);
    // Calls of a discarded tool are dropped with it.
    store
        .record_session_invocation("alice", "s1", "a", true, 1)
        .unwrap();
    store.flush_stats().unwrap();
    assert_eq!(entries(&store).len(), 3 + 2);
    store.verify_audit().unwrap();
}

pub(super) fn expiry_is_reaped_once_when_hosts_race(fx: &Fixture) {
    const SESSIONS: usize = 12;
    let setup = fx.open();
    let id = setup.put_artifact(b"expiring").unwrap();
    for i in 0..SESSIONS {
        setup
            .add_session_tool(
                &session("alice", &format!("idle{i}"), 1),
                "t",
                &id,
                &json!({}),
                &decision("t"),
                10,
            )
            .unwrap();
    }
    // One that never expires, one in use.
    setup
        .add_session_tool(
            &session("alice", "forever", 0),
            "t",
            &id,
            &json!({}),
            &decision("t"),
            10,
        )
        .unwrap();
    setup
        .add_session_tool(
            &session("alice", "busy", 3_600_000),
            "t",
            &id,
            &json!({}),
            &decision("t"),
            10,
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let before = entries(&setup).len();
    // Three hosts reap at once.
    let barrier = Arc::new(Barrier::new(3));
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let host = fx.open();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                host.reap_expired_sessions(SESSIONS * 2).unwrap()
            })
        })
        .collect();
    let mut ended: Vec<String> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .map(|e| {
            assert_eq!(e.tools.len(), 1);
            assert_eq!(e.entries.len(), 1);
            assert_eq!(e.entries[0].payload["reason"], "session ended");
            assert_eq!(e.entries[0].payload["expired"], true);
            e.session
        })
        .collect();
    ended.sort();
    ended.dedup();
    assert_eq!(ended.len(), SESSIONS, "every expired session, once");
    let after = entries(&setup);
    assert_eq!(
        after.len(),
        before + SESSIONS,
        "one deletion entry per tool"
    );
    assert!(setup.session("alice", "forever").unwrap().is_some());
    assert!(setup.session("alice", "busy").unwrap().is_some());
    assert!(setup.reap_expired_sessions(100).unwrap().is_empty());
    setup.verify_audit().unwrap();
}

pub(super) fn session_uses_are_written_behind(fx: &Fixture) {
    let store = fx.open();
    let opened = store.open_session(&session("alice", "s1", 60_000)).unwrap();
    assert_eq!(opened.owner, "sha256:owner");
    // Opening again keeps what is stored (the caller checks the owner).
    let mut other = session("alice", "s1", 5);
    other.owner = "sha256:intruder".into();
    assert_eq!(store.open_session(&other).unwrap(), opened);
    let stored = |s: &Registry| s.session("alice", "s1").unwrap().unwrap().last_used_ms;
    let first = stored(&store);
    store.set_stats_flush(Duration::from_secs(3600));
    std::thread::sleep(Duration::from_millis(5));
    for _ in 0..100 {
        store.touch_session("alice", "s1").unwrap();
    }
    assert_eq!(stored(&store), first, "no write on the call path");
    store.flush_stats().unwrap();
    let touched = stored(&store);
    assert!(touched > first, "{touched} > {first}");
    // A zero interval writes at once.
    store.set_stats_flush(Duration::ZERO);
    std::thread::sleep(Duration::from_millis(5));
    store.touch_session("alice", "s1").unwrap();
    assert!(stored(&store) > touched);
    // A use never moves it back, nor makes a session.
    store.touch_session("alice", "unknown").unwrap();
    assert!(store.session("alice", "unknown").unwrap().is_none());
}

pub(super) fn promotion_takes_the_tool_out_of_its_session(fx: &Fixture) {
    let store = fx.open();
    let id = store.put_artifact(b"promoted").unwrap();
    add(&store, "s1", "p", &id).unwrap();
    for _ in 0..3 {
        store
            .record_session_invocation("alice", "s1", "p", true, 10)
            .unwrap();
    }
    let rec = store
        .promote_from_session(
            record("p", Some("alice"), Tier::Agent, &id),
            &json!({"panel": "ok"}),
            "s1",
        )
        .unwrap();
    assert_eq!(rec.tier, Tier::Agent);
    assert!(store.session_tools("alice", "s1").unwrap().is_empty());
    let stats = store.stats("p", "alice").unwrap();
    assert_eq!(stats.total_calls, 3, "its session calls came with it");
    // Gone from the session: a second promotion (another host's) fails
    // and registers nothing.
    let n = entries(&store).len();
    let err = store
        .promote_from_session(
            record("p2", Some("alice"), Tier::Agent, &id),
            &json!({}),
            "s1",
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
    assert_eq!(entries(&store).len(), n);
    assert!(store.get("p2", "alice").unwrap().is_none());
}
