//! Cached name resolution across hosts: own changes invalidate at once,
//! another host's at the next registry read, and a deletion elsewhere stops
//! calls within the poll interval.

use std::time::Duration;

use serde_json::{Value, json};
use temper::forge::{ForgeContext, InvokeError};
use temper::store::Tier;

use super::{Server, ab, adder, config, host, rules, seed_json, shared_stores};

/// The forge caches resolved names while a registry watch keeps them
/// current (here one that read the trail once and will not again for an
/// hour). This host's own changes invalidate them at once: a promotion
/// that shadows a shared tool, a deletion. Another host's deletion is not
/// seen until the watch reads the trail (the window exists, which shows the
/// cache is used), and is seen by the first call after that read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn own_changes_invalidate_cached_names_at_once_and_others_at_the_next_read() {
    for shared in shared_stores("own_changes_invalidate_cached_names") {
        let label = shared.label;
        let a = host(&shared, rules(), config());
        let b = host(&shared, rules(), config());
        // B's own watch, polling every hour: its first read (at once)
        // gives B its lease for an hour.
        b.start_watch(Duration::from_secs(3600)).unwrap();
        let lease = std::time::Instant::now() + Duration::from_secs(30);
        while !b.store().leased() {
            assert!(std::time::Instant::now() < lease, "{label}: no lease");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }

        // "calc" (+0) forged by alice on A and promoted; bob forges his
        // own "calc" (+100) on B, in his session s1.
        let alice = ForgeContext::new("alice", "a1");
        a.forge(&adder("calc", 0), &alice).await.unwrap();
        a.promote("calc", &alice, None).await.unwrap();
        let bob = ForgeContext::new("bob", "s1");
        b.forge(&adder("calc", 100), &bob).await.unwrap();
        // Alice's is approved (shared); bob, in another session s2, calls
        // the shared one: B resolves and caches (bob, calc).
        a.approve("calc", "alice", "ops", None).unwrap();
        let bob2 = ForgeContext::new("bob", "s2");
        let sum = |o: temper::forge::Invocation| (o.output["sum"].as_i64().unwrap(), o.tier);
        for _ in 0..3 {
            let out = b.invoke("calc", &ab(2, 3), &bob2).await.unwrap();
            assert_eq!(sum(out), (5, Tier::Shared), "{label}");
        }
        // bob promotes his on B: his agent-tier tool shadows the shared one
        // from the next call on.
        b.promote("calc", &bob, None).await.unwrap();
        let out = b.invoke("calc", &ab(2, 3), &bob2).await.unwrap();
        assert_eq!(sum(out), (105, Tier::Agent), "{label}");
        // B deletes bob's: the shared one again, at once.
        b.store().delete("calc", "bob").unwrap();
        let out = b.invoke("calc", &ab(2, 3), &bob2).await.unwrap();
        assert_eq!(sum(out), (5, Tier::Shared), "{label}");

        // A deletes the shared one. B has not read the trail since: its
        // cached resolution still stands (the window) ...
        a.store().delete("calc", "alice").unwrap();
        let out = b.invoke("calc", &ab(2, 3), &bob2).await.unwrap();
        assert_eq!(
            sum(out),
            (5, Tier::Shared),
            "{label}: served from the cache"
        );
        // ... until the next read (forced here): then the first call is
        // refused.
        let changes = b.refresh().await.unwrap();
        assert!(changes.shared, "{label}: {changes:?}");
        let refused = b.invoke("calc", &ab(2, 3), &bob2).await;
        assert!(
            matches!(refused, Err(InvokeError::NotFound { .. })),
            "{label}: {refused:?}"
        );
    }
}

/// Two `temper mcp` hosts on one store, and a third process deleting an
/// agent-tier tool both had called (so resolved and cached): host B, which
/// polls every POLL_MS, refuses every call that starts later than POLL_MS
/// after the deletion committed (the stated bound; each accepted call was
/// sent no later than that), and keeps refusing; host C, run with
/// `--registry-poll-ms 0`, caches nothing and refuses the first call after
/// the deletion.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deletion_on_another_host_stops_calls_within_the_poll_interval() {
    const POLL_MS: u64 = 400;
    for shared in shared_stores("a_deletion_on_another_host_stops_calls") {
        let label = shared.label;
        let config = shared.scratch().join("forge.json");
        std::fs::write(
            &config,
            r#"{"promotionThreshold": {"uses": 1, "confidence": 0.0}}"#,
        )
        .unwrap();
        let config = config.to_str().unwrap();
        let poll = POLL_MS.to_string();
        let sa = Server::start(&shared, &["--forge-config", config]);
        let sb = Server::start(
            &shared,
            &["--forge-config", config, "--registry-poll-ms", &poll],
        );
        let sc = Server::start(
            &shared,
            &["--forge-config", config, "--registry-poll-ms", "0"],
        );
        let (mut on_a, mut on_b, mut on_c) =
            (sa.session().await, sb.session().await, sc.session().await);
        let r = on_a.call("forge_tool", seed_json("slugify")).await;
        assert!(!r.0, "{label}: {r:?}");
        assert!(!on_a.call("slugify", json!({"text": "A B"})).await.0);
        let r = on_a.call("promote_tool", json!({"name": "slugify"})).await;
        assert!(!r.0, "{label}: {r:?}");
        // B and C call it for longer than B's poll interval: resolved,
        // cached on B, and B's lease renewed.
        let warm = std::time::Instant::now();
        while warm.elapsed() < Duration::from_millis(2 * POLL_MS) {
            for m in [&mut on_b, &mut on_c] {
                assert_eq!(
                    m.call("slugify", json!({"text": "Warm Up"})).await,
                    (false, json!({"slug": "warm-up"})),
                    "{label}"
                );
            }
        }

        shared.open().delete("slugify", "default").unwrap();
        let deleted = std::time::Instant::now();
        let refused = |answer: &Value| answer["error"]["code"] == -32602;
        let call = json!({"name": "slugify", "arguments": {"text": "x"}});

        // C: no cache, so at once.
        let answer = on_c.rpc_answer("tools/call", call.clone()).await;
        assert!(
            refused(&answer),
            "{label}: C served a deleted tool: {answer}"
        );

        // B: every call sent later than POLL_MS after the deletion is
        // refused; poll until the first refusal (30 s only bounds a
        // failure), then a few more.
        let bound = Duration::from_millis(POLL_MS);
        let mut last_served = None;
        let mut first_refused = None;
        let mut after = 0;
        while after < 10 {
            let sent = std::time::Instant::now();
            assert!(
                sent - deleted < Duration::from_secs(30),
                "{label}: B still serves the deleted tool"
            );
            let answer = on_b.rpc_answer("tools/call", call.clone()).await;
            if refused(&answer) {
                first_refused.get_or_insert(sent - deleted);
                after += 1;
            } else {
                assert!(answer.get("result").is_some(), "{label}: {answer}");
                assert!(
                    first_refused.is_none(),
                    "{label}: served again after a refusal"
                );
                last_served = Some(sent - deleted);
                assert!(
                    sent - deleted <= bound,
                    "{label}: served a call sent {:?} after the deletion (bound {bound:?})",
                    sent - deleted
                );
            }
        }
        eprintln!(
            "{label}: poll {POLL_MS} ms: last call served {last_served:?}, first refused {:?} after the deletion",
            first_refused.unwrap()
        );
    }
}
