//! Two hosts racing on one store: registering one name at once, or the
//! agent's last free slot; exactly one wins, the other gets the typed
//! refusal, and no half state is left.

use crate::support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use temper::forge::judge::{Judge, ReviewFuture, RulesJudge, ToolCandidate};
use temper::forge::{Forge, ForgeConfig, ForgeContext, ForgeError, PromoteError, ValidateError};
use temper::policy::HostPolicy;
use temper::store::{
    ArtifactForm, ArtifactId, AuditEntry, AuditError, AuditKind, AuditReport, BackendKind,
    CallBatch, NewTool, Registry, RegistryBackend, StoreError, Tier, ToolRecord, ToolScope,
    ToolStats,
};

use super::{
    Shared, ab, adder, artifacts_of, assert_consistent, config, host, names, rules, shared_stores,
    trail,
};

/// A registry connection whose next registration first lets `hook` run:
/// another host's registration landing exactly between this host's last
/// check (name free, room under the limit) and its own insert, the window
/// a barrier cannot reach. Everything else goes straight to the store.
struct Interposed {
    inner: Arc<Registry>,
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for Interposed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interposed")
    }
}

impl RegistryBackend for Interposed {
    fn open_session(
        &self,
        session: &temper::store::SessionRecord,
    ) -> Result<temper::store::SessionRecord, StoreError> {
        self.inner.backend().open_session(session)
    }
    fn session(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Option<temper::store::SessionRecord>, StoreError> {
        self.inner.backend().session(agent, session)
    }
    fn session_tools(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Vec<temper::store::SessionToolRecord>, StoreError> {
        self.inner.backend().session_tools(agent, session)
    }
    fn add_session_tool(&self, new: temper::store::NewSessionTool<'_>) -> Result<i64, StoreError> {
        self.inner.backend().add_session_tool(new)
    }
    fn end_session(
        &self,
        agent: &str,
        session: &str,
        end: temper::store::SessionEnd,
    ) -> Result<Option<temper::store::EndedSession>, StoreError> {
        self.inner.backend().end_session(agent, session, end)
    }
    fn delete_session_tool(
        &self,
        agent: &str,
        session: &str,
        name: &str,
        payload: &serde_json::Value,
    ) -> Result<Option<(temper::store::SessionToolRecord, temper::store::AuditEntry)>, StoreError>
    {
        self.inner
            .backend()
            .delete_session_tool(agent, session, name, payload)
    }
    fn expired_sessions(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.inner.backend().expired_sessions(now_ms, limit)
    }
    fn touch_sessions(&self, touches: &[temper::store::SessionTouch]) -> Result<(), StoreError> {
        self.inner.backend().touch_sessions(touches)
    }
    fn lease_quota(&self, lease: &temper::store::QuotaLease) -> Result<u32, StoreError> {
        self.inner.backend().lease_quota(lease)
    }
    fn search(
        &self,
        query: &temper::store::SearchQuery<'_>,
        terms: &[String],
        fetch: usize,
    ) -> Result<Vec<temper::store::SearchHit>, StoreError> {
        self.inner.backend().search(query, terms, fetch)
    }
    fn working_set(&self, agent: &str, session: &str) -> Result<Vec<String>, StoreError> {
        self.inner.backend().working_set(agent, session)
    }
    fn add_to_working_set(
        &self,
        session: &temper::store::SessionRecord,
        names: &[String],
        cap: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.inner.backend().add_to_working_set(session, names, cap)
    }
    fn most_used(&self, agent: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        self.inner.backend().most_used(agent, limit)
    }
    fn kind(&self) -> BackendKind {
        self.inner.backend().kind()
    }
    fn location(&self) -> String {
        self.inner.backend().location()
    }
    fn put_blob(
        &self,
        id: &ArtifactId,
        form: ArtifactForm,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        self.inner.backend().put_blob(id, form, bytes)
    }
    fn get_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.backend().get_blob(id, form)
    }
    fn has_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<bool, StoreError> {
        self.inner.backend().has_blob(id, form)
    }
    fn artifact_ids(&self) -> Result<Vec<ArtifactId>, StoreError> {
        self.inner.backend().artifact_ids()
    }
    fn register(&self, new: NewTool<'_>) -> Result<i64, StoreError> {
        let hook = self.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        self.inner.backend().register(new)
    }
    fn tools(&self, scope: ToolScope<'_>) -> Result<Vec<ToolRecord>, StoreError> {
        self.inner.backend().tools(scope)
    }
    fn agent_tool_count(&self, agent: &str) -> Result<usize, StoreError> {
        self.inner.backend().agent_tool_count(agent)
    }
    fn get(&self, name: &str, agent: &str) -> Result<Option<ToolRecord>, StoreError> {
        self.inner.backend().get(name, agent)
    }
    fn delete(&self, name: &str, agent: &str) -> Result<ToolRecord, StoreError> {
        self.inner.backend().delete(name, agent)
    }
    fn promote(
        &self,
        name: &str,
        agent: &str,
        approval: Option<&Value>,
    ) -> Result<ToolRecord, StoreError> {
        self.inner.backend().promote(name, agent, approval)
    }
    fn record_calls(&self, batch: &[CallBatch]) -> Result<usize, StoreError> {
        self.inner.backend().record_calls(batch)
    }
    fn stats(&self, name: &str, agent: &str) -> Result<ToolStats, StoreError> {
        self.inner.backend().stats(name, agent)
    }
    fn append_audit(
        &self,
        kind: AuditKind,
        subject: &str,
        agent: Option<&str>,
        payload: &Value,
    ) -> Result<AuditEntry, StoreError> {
        self.inner
            .backend()
            .append_audit(kind, subject, agent, payload)
    }
    fn audit_head_seq(&self) -> Result<i64, StoreError> {
        self.inner.backend().audit_head_seq()
    }
    fn audit_entries(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.inner.backend().audit_entries(after_seq, limit)
    }
    fn verify_audit(&self) -> Result<AuditReport, AuditError> {
        self.inner.backend().verify_audit()
    }
}

/// A host whose next registration is preceded by `other` importing
/// `bytes` for `other_ctx` into the agent tier (run to completion, on its
/// own connection).
fn host_raced_by(
    shared: &Shared,
    config: ForgeConfig,
    other: Forge,
    bytes: Vec<u8>,
    other_ctx: ForgeContext,
) -> Forge {
    let hook = move || {
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async {
                other
                    .import(bytes, &other_ctx, Tier::Agent)
                    .await
                    .expect("the other host registers first");
            })
        })
    };
    let interposed = Interposed {
        inner: shared.open(),
        hook: Mutex::new(Some(Box::new(hook))),
    };
    let runtime = support::runtime_builder()
        .policy(HostPolicy::deny_all())
        .build()
        .expect("runtime");
    Forge::builder(
        runtime,
        Arc::new(Registry::with_backend(Arc::new(interposed))),
    )
    .judge(rules())
    .panel(rules(), rules())
    .config(config)
    .build()
}

/// How many rejected imports the trail records with a reason containing
/// `needle`.
fn refused_imports(store: &Registry, needle: &str) -> usize {
    store
        .audit_entries(0, 1_000_000)
        .unwrap()
        .iter()
        .filter(|e| {
            e.kind == AuditKind::ForgeDecision
                && e.subject == "(import)"
                && e.payload["approved"] == false
                && e.payload["reasons"][0]
                    .as_str()
                    .is_some_and(|r| r.contains(needle))
        })
        .count()
}

/// Approves once every holder of the barrier has reached the judge: the
/// hosts that share it have all passed VALIDATE and TEST (and their
/// pre-registration checks) before any of them registers.
struct BarrierJudge(Arc<tokio::sync::Barrier>);

impl Judge for BarrierJudge {
    fn review<'a>(&'a self, c: &'a ToolCandidate) -> ReviewFuture<'a> {
        Box::pin(async move {
            self.0.wait().await;
            RulesJudge::standard().review(c).await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hosts_registering_one_name_at_once_one_wins() {
    for shared in shared_stores("two_hosts_registering_one_name_at_once_one_wins") {
        let label = shared.label;
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let judge = || Arc::new(BarrierJudge(barrier.clone())) as Arc<dyn Judge>;
        let a = host(&shared, judge(), config());
        let b = host(&shared, judge(), config());

        // One artifact imported on both hosts at once, into the agent tier
        // of one agent, then into the shared tier by two agents: both pass
        // the name check, both are tested and judged, one registers first.
        for (tier, name, agents) in [
            (Tier::Agent, "raced_agent", ["alice", "alice"]),
            (Tier::Shared, "raced_shared", ["alice", "bob"]),
        ] {
            let bytes = artifacts_of(&[adder(name, 0)]).await.remove(0);
            let (ca, cb) = (
                ForgeContext::new(agents[0], "on-a"),
                ForgeContext::new(agents[1], "on-b"),
            );
            let (ra, rb) = tokio::join!(
                a.import(bytes.clone(), &ca, tier),
                b.import(bytes.clone(), &cb, tier)
            );
            let (won, lost) = match (ra, rb) {
                (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
                (ra, rb) => panic!("{label} {tier}: exactly one must win: {ra:?} / {rb:?}"),
            };
            assert_eq!(won.tool.tier, tier);
            assert!(
                matches!(&lost, ForgeError::Validate(ValidateError::NameTaken { name: n, tier: t }) if n == name && *t == tier),
                "{label} {tier}: the loser gets the typed conflict: {lost:?}"
            );
            // One row; callable from both hosts.
            let store = a.store();
            let rows: Vec<_> = match tier {
                Tier::Shared => store.shared_tools().unwrap(),
                _ => store.tools_for_agent("alice").unwrap(),
            };
            assert_eq!(rows.iter().filter(|r| r.name == name).count(), 1, "{label}");
            for (h, c) in [(&a, &ca), (&b, &cb)] {
                let out = h.invoke(name, &ab(2, 3), c).await.unwrap();
                assert_eq!(out.output, json!({"sum": 5}));
            }
            // The trail: one registration, the loser's refusal.
            let entries = store.audit_entries(0, 1_000_000).unwrap();
            let count = |kind: AuditKind, approved: Option<bool>| {
                entries
                    .iter()
                    .filter(|e| {
                        e.kind == kind
                            && e.subject == name
                            && approved.is_none_or(|ok| e.payload["approved"] == ok)
                    })
                    .count()
            };
            assert_eq!(count(AuditKind::Registration, None), 1, "{label}");
            assert_eq!(count(AuditKind::ForgeDecision, Some(true)), 1, "{label}");
            assert_eq!(
                refused_imports(store, &format!("{name:?} already exists")),
                1,
                "{label}"
            );
        }

        // Promotion from two hosts' session tiers at once: no name check
        // before the store's, so the store decides every time.
        let (ca, cb) = (
            ForgeContext::new("carol", "on-a"),
            ForgeContext::new("carol", "on-b"),
        );
        let (pa, pb) = (
            host(&shared, rules(), config()),
            host(&shared, rules(), config()),
        );
        pa.forge(&adder("raced_promotion", 1), &ca).await.unwrap();
        pb.forge(&adder("raced_promotion", 2), &cb).await.unwrap();
        let (ra, rb) = tokio::join!(
            pa.promote("raced_promotion", &ca, None),
            pb.promote("raced_promotion", &cb, None)
        );
        let (won, lost, loser, lctx) = match (ra, rb) {
            (Ok(w), Err(l)) => (w, l, &pb, &cb),
            (Err(l), Ok(w)) => (w, l, &pa, &ca),
            (ra, rb) => panic!("{label}: exactly one promotion must win: {ra:?} / {rb:?}"),
        };
        assert!(
            matches!(&lost, PromoteError::NameTaken { tier: Tier::Agent, name, .. } if name == "raced_promotion"),
            "{label}: {lost:?}"
        );
        // The loser's tool is still in its session tier, where it shadows
        // the winner's for that session.
        assert_eq!(
            names(&loser.session_tools(lctx).unwrap()),
            [("raced_promotion".to_string(), Tier::Session)]
        );
        assert_eq!(pa.store().tools_for_agent("carol").unwrap().len(), 1);
        assert_eq!(
            pa.store()
                .get("raced_promotion", "carol")
                .unwrap()
                .unwrap()
                .artifact
                .as_str(),
            won.id
        );

        // The exact window: B's registration lands after A's last check,
        // before A's insert. The store refuses A's row; A reports the name
        // taken, and nothing of A's attempt stays but its refusal.
        let mut files = artifacts_of(&[adder("raced_exact", 1), adder("raced_exact", 2)]).await;
        let (theirs, mine) = (files.remove(0), files.remove(0));
        let other = host(&shared, rules(), config());
        let ours = host_raced_by(
            &shared,
            config(),
            other.clone(),
            theirs,
            ForgeContext::new("erin", "on-b"),
        );
        let lost = ours
            .import(mine, &ForgeContext::new("erin", "on-a"), Tier::Agent)
            .await
            .unwrap_err();
        assert!(
            matches!(&lost, ForgeError::Validate(ValidateError::NameTaken { tier: Tier::Agent, name }) if name == "raced_exact"),
            "{label}: {lost:?}"
        );
        let rows = ours.store().tools_for_agent("erin").unwrap();
        assert_eq!(rows.len(), 1, "{label}");
        let out = ours
            .invoke("raced_exact", &ab(2, 3), &ForgeContext::new("erin", "x"))
            .await
            .unwrap();
        assert_eq!(
            out.output,
            json!({"sum": 6}),
            "{label}: B's tool, seen on A"
        );
        assert_eq!(
            trail(ours.store(), "raced_exact"),
            [AuditKind::ForgeDecision, AuditKind::Registration],
            "{label}: B's decision and registration only"
        );
        assert_eq!(
            refused_imports(ours.store(), "\"raced_exact\" already exists"),
            1
        );
        assert_consistent(a.store(), &["alice", "bob", "carol", "erin"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_agent_tool_limit_holds_when_two_hosts_register_at_once() {
    for shared in shared_stores("the_agent_tool_limit_holds_when_two_hosts_register_at_once") {
        let label = shared.label;
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let limited = ForgeConfig {
            max_agent_tools: 1,
            ..config()
        };
        let a = host(
            &shared,
            Arc::new(BarrierJudge(barrier.clone())),
            limited.clone(),
        );
        let b = host(&shared, Arc::new(BarrierJudge(barrier.clone())), limited);
        let ctx = ForgeContext::new("dave", "s");
        // One slot: both hosts see it free, both test, judge and register
        // two different tools.
        let mut files = artifacts_of(&[adder("slot_x", 1), adder("slot_y", 2)]).await;
        let (y, x) = (files.pop().unwrap(), files.pop().unwrap());
        let (rx, ry) = tokio::join!(
            a.import(x, &ctx, Tier::Agent),
            b.import(y, &ctx, Tier::Agent)
        );
        let (won, lost) = match (rx, ry) {
            (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
            (rx, ry) => panic!("{label}: exactly one must fit: {rx:?} / {ry:?}"),
        };
        assert!(
            matches!(
                &lost,
                ForgeError::Validate(ValidateError::AgentFull { limit: 1, agent }) if agent == "dave"
            ),
            "{label}: the loser gets the typed limit refusal: {lost:?}"
        );
        let rows = a.store().tools_for_agent("dave").unwrap();
        assert_eq!(rows.len(), 1, "{label}");
        assert_eq!(rows[0].name, won.tool.name);
        let sum = if won.tool.name == "slot_x" { 6 } else { 7 };
        for h in [&a, &b] {
            let out = h.invoke(&won.tool.name, &ab(2, 3), &ctx).await.unwrap();
            assert_eq!(out.output, json!({"sum": sum}));
        }
        assert_eq!(refused_imports(a.store(), "maxAgentTools"), 1, "{label}");

        // The exact window: B's registration takes the last slot after A's
        // last check, before A's insert. A's row goes in, A counts again,
        // finds itself over the limit as the later registration, and
        // withdraws it: A reports the agent full, B's tool stays.
        let mut files = artifacts_of(&[adder("slot_b", 1), adder("slot_a", 2)]).await;
        let (theirs, mine) = (files.remove(0), files.remove(0));
        let limited = ForgeConfig {
            max_agent_tools: 1,
            ..config()
        };
        let other = host(&shared, rules(), limited.clone());
        let ours = host_raced_by(
            &shared,
            limited,
            other,
            theirs,
            ForgeContext::new("frank", "on-b"),
        );
        let lost = ours
            .import(mine, &ForgeContext::new("frank", "on-a"), Tier::Agent)
            .await
            .unwrap_err();
        assert!(
            matches!(
                &lost,
                ForgeError::Validate(ValidateError::AgentFull { limit: 1, .. })
            ),
            "{label}: {lost:?}"
        );
        let rows = ours.store().tools_for_agent("frank").unwrap();
        assert_eq!(
            rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["slot_b"],
            "{label}"
        );
        assert_eq!(
            trail(ours.store(), "slot_a"),
            [
                AuditKind::ForgeDecision,
                AuditKind::Registration,
                AuditKind::Deletion
            ],
            "{label}: the withdrawn registration and its deletion"
        );
        assert_eq!(refused_imports(ours.store(), "maxAgentTools"), 2, "{label}");

        // The same window for a promotion from the session tier: the
        // promotion is withdrawn and the tool stays in its session.
        let theirs = artifacts_of(&[adder("promo_b", 1)]).await.remove(0);
        let limited = ForgeConfig {
            max_agent_tools: 1,
            ..config()
        };
        let other = host(&shared, rules(), limited.clone());
        let ours = host_raced_by(
            &shared,
            limited,
            other,
            theirs,
            ForgeContext::new("gina", "on-b"),
        );
        let mine = ForgeContext::new("gina", "on-a");
        ours.forge(&adder("promo_a", 2), &mine).await.unwrap();
        let lost = ours.promote("promo_a", &mine, None).await.unwrap_err();
        assert!(
            matches!(&lost, PromoteError::AgentFull { limit: 1, .. }),
            "{label}: {lost:?}"
        );
        assert_eq!(
            names(&ours.session_tools(&mine).unwrap()),
            [("promo_a".to_string(), Tier::Session)],
            "{label}: still in its session"
        );
        let rows = ours.store().tools_for_agent("gina").unwrap();
        assert_eq!(
            rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["promo_b"],
            "{label}"
        );
        assert_eq!(
            trail(ours.store(), "promo_a"),
            [
                AuditKind::ForgeDecision,
                AuditKind::Promotion,
                AuditKind::Registration,
                AuditKind::Deletion,
                // Back in its session (restored).
                AuditKind::ForgeDecision
            ],
            "{label}"
        );
        assert_consistent(ours.store(), &["dave", "frank", "gina"]);
        assert_consistent(b.store(), &["dave"]);
    }
}
