//! Library hosts on one store: a tool forged, promoted and deleted on one
//! host as seen on the other, a compose tool run where its steps never
//! loaded, and 1,000 calls over two hosts adding up in the stats.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use temper::forge::{ForgeConfig, ForgeContext, InvokeError};
use temper::request::ForgeRequest;
use temper::store::{AuditKind, Tier};

use super::{ab, assert_consistent, config, host, names, rules, seed, shared_stores};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_promoted_and_deleted_on_one_host_as_seen_on_the_other() {
    for shared in shared_stores("forged_promoted_and_deleted_on_one_host_as_seen_on_the_other") {
        let label = shared.label;
        let a = host(&shared, rules(), config());
        let b = host(&shared, rules(), config());
        // The same agent and session id on both hosts.
        let alice = ForgeContext::new("alice", "s1");
        let bob = ForgeContext::new("bob", "s1");

        a.forge(&seed("add_numbers"), &alice).await.unwrap();
        // The session tier is in the store: B serves Alice's session, at
        // once; Bob's session of the same id is another session.
        assert!(
            names(&b.visible_tools(&alice).unwrap())
                .contains(&("add_numbers".to_string(), Tier::Session)),
            "{label}"
        );
        let out = b.invoke("add_numbers", &ab(1, 2), &alice).await.unwrap();
        assert_eq!(out.tier, Tier::Session, "{label}");
        let err = b.invoke("add_numbers", &ab(1, 2), &bob).await.unwrap_err();
        assert!(
            matches!(err, InvokeError::NotFound { .. }),
            "{label}: {err}"
        );

        // Promoted on A: listed and callable on B at once.
        let promoted = a.promote("add_numbers", &alice, None).await.unwrap();
        assert_eq!(promoted.tier, Tier::Agent);
        let listed = b.visible_tools(&alice).unwrap();
        let seen = listed.iter().find(|t| t.name == "add_numbers").unwrap();
        assert_eq!(
            (seen.tier, &seen.id),
            (Tier::Agent, &promoted.id),
            "{label}"
        );
        let out = b.invoke("add_numbers", &ab(1, 2), &alice).await.unwrap();
        assert_eq!((out.output, out.tier), (json!({"sum": 3}), Tier::Agent));
        assert_eq!(out.tool_id, promoted.id);
        a.invoke("add_numbers", &ab(2, 2), &alice).await.unwrap();
        // Another agent sees nothing of Alice's agent tier on either host.
        for h in [&a, &b] {
            let err = h.invoke("add_numbers", &ab(1, 1), &bob).await.unwrap_err();
            assert!(
                matches!(err, InvokeError::NotFound { .. }),
                "{label}: {err}"
            );
        }

        // Approved on A: shared on B, for Bob too (B has it loaded already).
        a.approve("add_numbers", "alice", "reviewer", Some("ok"))
            .unwrap();
        assert!(
            names(&b.visible_tools(&bob).unwrap())
                .contains(&("add_numbers".to_string(), Tier::Shared)),
            "{label}"
        );
        let out = b.invoke("add_numbers", &ab(3, 4), &bob).await.unwrap();
        assert_eq!((out.output, out.tier), (json!({"sum": 7}), Tier::Shared));

        // The stats add up over both hosts, read on either once each has
        // written its counted calls (every interval; here, by hand).
        for h in [&a, &b] {
            h.store().flush_stats().unwrap();
        }
        for (h, who) in [(&a, &alice), (&b, &bob)] {
            let s = h.tool_stats("add_numbers", who).unwrap();
            assert_eq!((s.total_calls, s.successes), (3, 3), "{label}");
        }

        // Deleted on A: B's next call fails, though B had it loaded.
        a.store().delete("add_numbers", "alice").unwrap();
        for who in [&alice, &bob] {
            let err = b.invoke("add_numbers", &ab(1, 2), who).await.unwrap_err();
            assert!(
                matches!(err, InvokeError::NotFound { .. }),
                "{label}: {err}"
            );
            assert!(
                !names(&b.visible_tools(who).unwrap())
                    .iter()
                    .any(|(n, _)| n == "add_numbers")
            );
        }
        // The name is free again for either host.
        b.forge(&seed("add_numbers"), &bob).await.unwrap();
        assert_eq!(assert_consistent(b.store(), &["alice", "bob"]), 0);
        a.store().verify_audit().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_compose_tool_forged_on_one_host_runs_on_the_other() {
    for shared in shared_stores("a_compose_tool_forged_on_one_host_runs_on_the_other") {
        let label = shared.label;
        let a = host(&shared, rules(), config());
        let b = host(&shared, rules(), config());
        let ctx = ForgeContext::new("alice", "s1");
        for step in ["convert_temperature", "add_numbers"] {
            a.forge(&seed(step), &ctx).await.unwrap();
        }
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/compose/fahrenheit_plus.json");
        let compose = ForgeRequest::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
        a.forge(&compose, &ctx).await.unwrap();
        a.promote("fahrenheit_plus", &ctx, None).await.unwrap();
        // B has never loaded anything: the adapter and both steps (pinned
        // by artifact, in the session tier by name) come from the store.
        let out = b
            .invoke(
                "fahrenheit_plus",
                &json!({"celsius": 100, "offset": 8}),
                &ctx,
            )
            .await
            .unwrap();
        assert_eq!(
            (out.output, out.tier),
            (json!({"sum": 220}), Tier::Agent),
            "{label}"
        );
        // The steps' names are in the session, which B serves too.
        let out = b.invoke("add_numbers", &ab(1, 2), &ctx).await.unwrap();
        assert_eq!(
            (out.output, out.tier),
            (json!({"sum": 3}), Tier::Session),
            "{label}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_calls_over_two_hosts_add_up() {
    for shared in shared_stores("a_thousand_calls_over_two_hosts_add_up") {
        let label = shared.label;
        // Each host writes its counted calls behind, every 100 ms.
        let flush = Duration::from_millis(100);
        let config = ForgeConfig {
            stats_flush_ms: flush.as_millis() as u64,
            ..config()
        };
        let a = host(&shared, rules(), config.clone());
        let b = host(&shared, rules(), config);
        let ctx = ForgeContext::new("alice", "s1");
        a.forge(&seed("add_numbers"), &ctx).await.unwrap();
        a.promote("add_numbers", &ctx, None).await.unwrap();

        // 1,000 calls: 4 tasks per host at once, every 10th with an input
        // its schema refuses (a counted failure).
        let mut tasks = tokio::task::JoinSet::new();
        for (h, forge) in [&a, &b].into_iter().enumerate() {
            for t in 0..4 {
                let forge = forge.clone();
                let ctx = ctx.clone();
                tasks.spawn(async move {
                    for i in 0..125 {
                        let n = (h * 4 + t) * 125 + i;
                        let input = if n % 10 == 0 {
                            json!({"a": "x", "b": 1})
                        } else {
                            ab(n as i64, 1)
                        };
                        let out = forge.invoke("add_numbers", &input, &ctx).await;
                        assert_eq!(out.is_ok(), n % 10 != 0, "call {n}: {out:?}");
                    }
                });
            }
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
        // A host reads its own calls at once and the other's once that
        // host has written them: after one interval (polled; the deadline
        // only bounds a failure).
        let deadline = std::time::Instant::now() + flush * 50;
        for h in [&a, &b] {
            let mut s = h.tool_stats("add_numbers", &ctx).unwrap();
            while s.total_calls < 1000 && std::time::Instant::now() < deadline {
                tokio::time::sleep(flush / 4).await;
                s = h.tool_stats("add_numbers", &ctx).unwrap();
            }
            assert_eq!((s.total_calls, s.successes), (1000, 900), "{label}");
        }
        // Every failure is in the trail: on its own (the first of a
        // window) or counted in a window's summary.
        for h in [&a, &b] {
            h.store().close_failure_windows().unwrap();
        }
        let failures: u64 = a
            .store()
            .audit_entries(0, 1_000_000)
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == AuditKind::InvocationFailure && e.subject == "add_numbers")
            .map(|e| e.payload["failures"].as_u64().unwrap_or(1))
            .sum();
        assert_eq!(failures, 100, "{label}");
        assert_consistent(b.store(), &["alice"]);
    }
}
