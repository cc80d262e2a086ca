//! The registry watch's tests: paging, failed polls, local changes, whom
//! changes concern, and which epochs another process's entries move (and
//! that this process's own entries move none).

use serde_json::json;

use super::*;
use std::collections::BTreeSet;
use std::sync::Arc;
use temper_store::{AuditEntry, AuditKind, Registry};

fn entry(kind: AuditKind, agent: Option<&str>, payload: Value) -> AuditEntry {
    AuditEntry {
        seq: 1,
        kind,
        subject: "t".into(),
        agent: agent.map(str::to_string),
        payload,
        ts_ms: 0,
        prev_hash: String::new(),
        hash: String::new(),
    }
}

fn of(entries: &[AuditEntry]) -> Changes {
    let mut c = Changes::default();
    for e in entries {
        c.add(e);
    }
    c
}

/// Appends `n` entries that change no list, then an agent-tier
/// registration for `agent`.
fn append(store: &Registry, n: usize, agent: &str) {
    for i in 0..n {
        store
            .append_audit(
                AuditKind::InvocationFailure,
                &format!("t{i}"),
                Some(agent),
                &json!({}),
            )
            .unwrap();
    }
    store
        .append_audit(
            AuditKind::Registration,
            "t",
            Some(agent),
            &json!({"tier": "agent"}),
        )
        .unwrap();
}

#[tokio::test]
async fn a_poll_reads_every_page_and_a_failed_one_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Registry::open(dir.path()).unwrap());
    append(&store, 2, "before");
    let watch = RegistryWatch::start(store.clone()).await.unwrap();
    assert!(watch.poll().await.unwrap().is_empty(), "starts at the head");

    // Three pages of noise, then the change: found across the pages.
    append(&store, 3 * PAGE, "alice");
    let changes = watch.poll().await.unwrap();
    assert_eq!(changes.agents, BTreeSet::from(["alice".to_string()]));
    assert!(watch.poll().await.unwrap().is_empty(), "read once");

    // The trail cannot be read: the poll fails, the cursor stays, and
    // the change is found once the trail is back.
    append(&store, PAGE + 1, "bob");
    let sql = rusqlite::Connection::open(dir.path().join("temper.db")).unwrap();
    sql.execute_batch("ALTER TABLE audit RENAME TO audit_away")
        .unwrap();
    assert!(watch.poll().await.is_err());
    sql.execute_batch("ALTER TABLE audit_away RENAME TO audit")
        .unwrap();
    let changes = watch.poll().await.unwrap();
    assert_eq!(changes.agents, BTreeSet::from(["bob".to_string()]));

    // A local change holds the cursor: a poll waits for it, and the
    // change is read by the holder only.
    let change = watch.local_change().await;
    append(&store, 0, "carol");
    let polled = tokio::spawn({
        let watch = watch.clone();
        async move { watch.poll().await.unwrap() }
    });
    tokio::task::yield_now().await;
    assert!(!polled.is_finished());
    let mine = change.finish().await.unwrap();
    assert_eq!(mine.agents, BTreeSet::from(["carol".to_string()]));
    assert!(polled.await.unwrap().is_empty());
}

#[test]
fn agent_tier_changes_concern_their_agent_only() {
    let c = of(&[
        entry(
            AuditKind::Registration,
            Some("alice"),
            json!({"tier": "agent"}),
        ),
        entry(
            AuditKind::Deletion,
            Some("root"),
            json!({"tier": "agent", "owner": "bob"}),
        ),
    ]);
    assert_eq!(
        c.agents,
        BTreeSet::from(["alice".to_string(), "bob".to_string()])
    );
    assert!(!c.shared);
    assert!(c.reaches_tiers("alice", true, true));
    assert!(c.reaches_tiers("bob", true, true));
    assert!(!c.reaches_tiers("carol", true, true));
    // A session that may not use the agent tier lists nothing new.
    assert!(!c.reaches_tiers("alice", false, true));
}

#[test]
fn shared_tier_changes_concern_everyone_with_shared_access() {
    for e in [
        entry(
            AuditKind::Promotion,
            Some("a"),
            json!({"from": "agent", "to": "shared"}),
        ),
        entry(AuditKind::Registration, None, json!({"tier": "shared"})),
        entry(AuditKind::Deletion, Some("a"), json!({"tier": "shared"})),
    ] {
        let c = of(std::slice::from_ref(&e));
        assert!(c.shared, "{e:?}");
        assert!(c.reaches_tiers("anyone", true, true));
        assert!(!c.reaches_tiers("anyone", true, false));
    }
}

#[test]
fn session_tiers_decisions_and_failures_change_no_list() {
    let c = of(&[
        entry(
            AuditKind::Registration,
            Some("a"),
            json!({"tier": "session"}),
        ),
        entry(AuditKind::Deletion, Some("a"), json!({"tier": "session"})),
        // Session -> agent: the registration that follows is what counts.
        entry(
            AuditKind::Promotion,
            Some("a"),
            json!({"from": "session", "to": "agent"}),
        ),
        entry(
            AuditKind::ForgeDecision,
            Some("a"),
            json!({"tier": "agent"}),
        ),
        entry(AuditKind::InvocationFailure, Some("a"), json!({})),
        entry(AuditKind::Approval, Some("a"), json!({})),
    ]);
    assert!(c.is_empty(), "{c:?}");
}

#[test]
fn another_process_entries_move_their_epochs_and_own_entries_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Registry::open(dir.path()).unwrap());
    let watch = RegistryWatch::start_blocking(store.clone()).unwrap();
    // Another process's registration (an entry this registry did not
    // mark as its own): the name's epoch and the agent's listing move.
    let (name, listing) = (store.name_epoch("t"), store.listing_epoch("alice"));
    let session = store.session_epoch("alice", "s1");
    store
        .append_audit(
            AuditKind::Registration,
            "t",
            Some("alice"),
            &json!({"tier": "agent"}),
        )
        .unwrap();
    store
        .append_audit(
            AuditKind::ForgeDecision,
            "u",
            Some("alice"),
            &json!({"tier": "session", "session": "s1"}),
        )
        .unwrap();
    let changes = watch.poll_blocking().unwrap();
    assert_eq!(changes.agents, BTreeSet::from(["alice".to_string()]));
    assert!(store.name_epoch("t") > name);
    assert!(store.listing_epoch("alice") > listing);
    assert!(store.session_epoch("alice", "s1") > session);

    // This registry's own session-tool registration: its epoch moved once
    // when it was made; reading it back moves nothing, but it is reported
    // like any change.
    let artifact = store.put_artifact(b"not a component, only bytes").unwrap();
    let record = temper_store::SessionRecord::new("alice", "s2", "", 0);
    let before = store.session_epoch("alice", "s2");
    store
        .add_session_tool(
            &record,
            "v",
            &artifact,
            &json!({}),
            &json!({"tier": "session", "session": "s2"}),
            10,
        )
        .unwrap();
    assert_eq!(store.session_epoch("alice", "s2"), before + 1);
    watch.poll_blocking().unwrap();
    assert_eq!(
        store.session_epoch("alice", "s2"),
        before + 1,
        "an own entry read back moves no epoch"
    );
}
