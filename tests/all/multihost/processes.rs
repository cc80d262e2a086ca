//! Two `temper mcp --http` processes on one store: forge on one, call on
//! the other, 1,000 calls over both.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Server, seed_json, shared_stores, temper_cli};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_temper_mcp_processes_share_one_store() {
    for shared in shared_stores("two_temper_mcp_processes_share_one_store") {
        let label = shared.label;
        let config = shared.scratch().join("forge.json");
        std::fs::write(
            &config,
            r#"{"promotionThreshold": {"uses": 1, "confidence": 0.0}}"#,
        )
        .unwrap();
        // Each process writes its counted calls every 100 ms.
        let extra = [
            "--forge-config",
            config.to_str().unwrap(),
            "--registry-poll-ms",
            "50",
            "--stats-flush-ms",
            "100",
        ];
        let (sa, sb) = (
            Server::start(&shared, &extra),
            Server::start(&shared, &extra),
        );
        let mut on_a = sa.session().await;
        let mut on_b = sb.session().await;
        let mut b_stream = on_b.open_stream().await;
        let list_changed =
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}});
        // (The servers poll every 50 ms; 30 s only bounds a failure.)
        let heard = Duration::from_secs(30);

        // Forged on A: in A's session only.
        let r = on_a.call("forge_tool", seed_json("slugify")).await;
        assert!(!r.0, "{label}: {r:?}");
        assert!(!on_b.tool_names().await.contains(&"slugify".to_string()));
        assert_eq!(
            on_a.call("slugify", json!({"text": "A B"})).await,
            (false, json!({"slug": "a-b"}))
        );
        // Promoted on A: B's session hears of it on its GET stream, and
        // lists and calls it.
        let r = on_a.call("promote_tool", json!({"name": "slugify"})).await;
        assert!(!r.0, "{label}: {r:?}");
        let note = tokio::time::timeout(heard, b_stream.recv()).await;
        assert_eq!(note, Ok(Some(list_changed.clone())), "{label}");
        assert!(on_b.tool_names().await.contains(&"slugify".to_string()));
        assert_eq!(
            on_b.call("slugify", json!({"text": "On B"})).await,
            (false, json!({"slug": "on-b"}))
        );

        // 1,000 calls over both processes at once (4 sessions each).
        let mut tasks = tokio::task::JoinSet::new();
        for (h, server) in [&sa, &sb].into_iter().enumerate() {
            for t in 0..4 {
                let mut m = server.session().await;
                tasks.spawn(async move {
                    for i in 0..125 {
                        let text = format!("H{h} t{t} c{i}");
                        let (err, out) = m.call("slugify", json!({"text": text})).await;
                        assert!(!err, "{out}");
                        assert_eq!(out["slug"], format!("h{h}-t{t}-c{i}"));
                    }
                });
            }
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
        // 1 call before the promotion (carried), 1 on B, then 1,000: each
        // process reads the other's calls once written (an interval; the
        // deadline only bounds a failure).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        for m in [&mut on_a, &mut on_b] {
            let stats = loop {
                let (err, stats) = m.call("tool_stats", json!({"name": "slugify"})).await;
                assert!(!err, "{stats}");
                let stats: Value = match stats {
                    Value::String(s) => serde_json::from_str(&s).unwrap(),
                    v => v,
                };
                if stats["total_calls"] == 1002 || std::time::Instant::now() > deadline {
                    break stats;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            };
            assert_eq!(stats["total_calls"], 1002, "{label}: {stats}");
            assert_eq!(stats["successes"], 1002, "{label}: {stats}");
        }

        // Deleted by a third host: B hears of it, and it is gone from B.
        shared.open().delete("slugify", "default").unwrap();
        let note = tokio::time::timeout(heard, b_stream.recv()).await;
        assert_eq!(note, Ok(Some(list_changed.clone())), "{label}");
        // An unknown tool is a protocol error (-32602), not a tool result.
        let answer = on_b
            .rpc_answer(
                "tools/call",
                json!({"name": "slugify", "arguments": {"text": "x"}}),
            )
            .await;
        assert_eq!(answer["error"]["code"], -32602, "{label}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("unknown tool"), "{label}: {answer}");
        assert!(!on_b.tool_names().await.contains(&"slugify".to_string()));

        let (ok, doc, stderr) = temper_cli(&shared, &["audit", "verify"]);
        assert!(ok && doc["ok"] == true, "{label}: {doc} {stderr}");
    }
}
