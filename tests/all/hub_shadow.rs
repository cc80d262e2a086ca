//! `Forge::forged_tier`: which forged tool, if any, a caller's `name`
//! resolves to (session, then agent, then shared tier). The gateway asks it
//! before calling a hub tool directly: a forged tool of the same name takes
//! precedence. Answers from caches must agree with the registry.

use std::sync::Arc;

use serde_json::json;
use temper::forge::judge::RulesJudge;
use temper::forge::{Forge, ForgeConfig, ForgeContext, PromotionThreshold};
use temper::policy::HostPolicy;
use temper::request::ForgeRequest;
use temper::store::{Registry, Tier};
use temper::{Limits, Runtime};

use crate::support;

const ECHO: &str = "function execute(i) {\n  return { n: i.n };\n}";

fn runtime() -> Runtime {
    support::runtime_builder()
        .policy(HostPolicy::deny_all())
        .limits(Limits::default())
        .build()
        .expect("runtime")
}

fn sandbox(name: &str) -> ForgeRequest {
    let doc = json!({
        "name": name,
        "description": format!("sandbox tool {name} for the tests"),
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "sandbox", "code": ECHO, "allowlist": []},
        "testCases": [{"input": {"n": 1}}],
    });
    ForgeRequest::from_json(&doc.to_string()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_tier_follows_the_resolution_order() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        promotion_threshold: PromotionThreshold {
            uses: 0,
            confidence: 0.0,
        },
        ..ForgeConfig::default()
    };
    let forge = Forge::builder(runtime(), Arc::new(Registry::open(dir.path()).unwrap()))
        .judge(Arc::new(RulesJudge::standard()))
        .config(config)
        .build();
    let s1 = ForgeContext::new("agent-a", "s1");
    let s2 = ForgeContext::new("agent-a", "s2");
    let other = ForgeContext::new("agent-b", "s3");

    // Nothing forged: twice (the second answer may come from a cache).
    for _ in 0..2 {
        assert_eq!(forge.forged_tier("web_search", &s1).await.unwrap(), None);
    }
    forge.forge(&sandbox("web_search"), &s1).await.unwrap();
    assert_eq!(
        forge.forged_tier("web_search", &s1).await.unwrap(),
        Some(Tier::Session)
    );
    assert_eq!(forge.forged_tier("web_search", &s2).await.unwrap(), None);

    let promoted = forge.promote("web_search", &s1, None).await.unwrap();
    assert_eq!(promoted.tier, Tier::Agent);
    // The same agent's other session now sees it in its agent tier; a
    // negative answer given before the promotion does not hide it.
    assert_eq!(
        forge.forged_tier("web_search", &s2).await.unwrap(),
        Some(Tier::Agent)
    );
    assert_eq!(forge.forged_tier("web_search", &other).await.unwrap(), None);
}
