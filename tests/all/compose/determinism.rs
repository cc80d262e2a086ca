//! The same compose request gives the same tool id.

use serde_json::json;

use super::{TRIPLE, artifact_bytes, compose, ctx, echo, forge_on, forged, runtime, sandbox};

// ---- 9. determinism ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_compose_request_gives_the_same_tool_id() {
    let steps = json!([
        {"name": "t", "tool": "triple", "inputMapping": {"n": "$input.n"}},
        {"name": "e", "tool": "echo", "inputMapping": {"n": "$prev.n", "note": "from ${input.n}"}},
    ]);
    let request = compose("tripled", steps, &[json!({"n": 2})]);
    let mut ids = Vec::new();
    let mut artifacts = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let forge = forge_on(runtime(), dir.path());
        echo(&forge);
        let triple = forged(
            &forge,
            &sandbox("triple", TRIPLE, &[], &[json!({"n": 1})]),
            &ctx(),
        )
        .await;
        let f = forged(&forge, &request, &ctx()).await;
        assert_eq!(
            f.tool.steps[0].blake3.as_deref(),
            Some(triple.tool.id.as_str())
        );
        let out = forge
            .invoke("tripled", &json!({"n": 5}), &ctx())
            .await
            .unwrap();
        assert_eq!(out.output, json!({"n": 15, "note": "from 5"}));
        artifacts.push(artifact_bytes(&forge, &f.tool.id));
        ids.push((triple.tool.id, f.tool.id));
    }
    assert_eq!(ids[0], ids[1]);
    assert_eq!(artifacts[0], artifacts[1]);
    assert_eq!(
        blake3::hash(&artifacts[0]).to_hex().as_str(),
        ids[0].1.as_str()
    );

    // Another mapping, another tool.
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    echo(&forge);
    forged(
        &forge,
        &sandbox("triple", TRIPLE, &[], &[json!({"n": 1})]),
        &ctx(),
    )
    .await;
    let steps = json!([
        {"name": "t", "tool": "triple", "inputMapping": {"n": "$input.n"}},
        {"name": "e", "tool": "echo", "inputMapping": {"n": "$prev.n", "note": "from $input.n"}},
    ]);
    let f = forged(
        &forge,
        &compose("tripled", steps, &[json!({"n": 2})]),
        &ctx(),
    )
    .await;
    assert_ne!(f.tool.id, ids[0].1);
}
