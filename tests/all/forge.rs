//! The forge pipeline end to end: the seed examples through validate →
//! build → test → judge → register; refusals naming their stage; the LLM
//! judge against a real endpoint on 127.0.0.1; promotion and approval
//! rules; reuse validation; many tasks on one store; and a child process
//! killed at random points while it forges.
//!
//! This module keeps the shared helpers; the tests are in its submodules.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use temper::Runtime;
use temper::capabilities::fetch::TransportOptions;
use temper::forge::judge::{Judge, ReviewFuture, RulesJudge, Scores, ToolCandidate, Verdict};
use temper::forge::{Forge, ForgeContext, ForgeError, Stage};
use temper::policy::HostPolicy;
use temper::request::{ForgeRequest, Implementation};
use temper::store::{AuditKind, Registry};

mod cli;
mod concurrency;
mod judge;
mod pipeline;
mod promotion;

fn runtime_with(policy: HostPolicy, transport: TransportOptions) -> Runtime {
    support::runtime_builder()
        .policy(policy)
        .transport(transport)
        .build()
        .expect("runtime")
}

fn runtime() -> Runtime {
    runtime_with(HostPolicy::deny_all(), TransportOptions::default())
}

fn rules() -> Arc<dyn Judge> {
    Arc::new(RulesJudge::standard())
}

fn store(dir: &Path) -> Arc<Registry> {
    Arc::new(Registry::open(dir).expect("store"))
}

fn seed(name: &str) -> ForgeRequest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/seeds")
        .join(format!("{name}.json"));
    ForgeRequest::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn renamed(mut r: ForgeRequest, name: &str) -> ForgeRequest {
    r.name = name.into();
    r
}

/// The add_numbers seed renamed, with other code and allowlist.
fn with_code(name: &str, code: &str, allowlist: &[&str]) -> ForgeRequest {
    let mut r = renamed(seed("add_numbers"), name);
    r.implementation = Implementation::Sandbox {
        code: code.into(),
        allowlist: allowlist.iter().map(|s| s.to_string()).collect(),
    };
    r
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-1", "session-1")
}

fn audit(store: &Registry) -> Vec<temper::store::AuditEntry> {
    store.audit_entries(0, 100_000).unwrap()
}

/// A judge with a fixed answer, to script panels.
struct Fixed {
    approved: bool,
    confidence: f64,
    reason: &'static str,
}

impl Judge for Fixed {
    fn review<'a>(&'a self, _c: &'a ToolCandidate) -> ReviewFuture<'a> {
        let scores = Scores {
            safety: 1.0,
            correctness: 1.0,
            determinism: 1.0,
            confidence: self.confidence,
        };
        let v = Verdict::new(self.approved, scores, vec![self.reason.into()], "fixed");
        Box::pin(async move { v })
    }
}

fn fixed(approved: bool, confidence: f64, reason: &'static str) -> Arc<dyn Judge> {
    Arc::new(Fixed {
        approved,
        confidence,
        reason,
    })
}

/// Forges `request` and returns the refusal, checking its stage and that a
/// refusing forge_decision entry naming that stage was audited.
async fn refused(forge: &Forge, request: &ForgeRequest, stage: Stage) -> ForgeError {
    let err = forge
        .forge(request, &ctx())
        .await
        .err()
        .unwrap_or_else(|| panic!("{} was registered", request.name));
    assert_eq!(err.stage(), stage, "{err}");
    let last = audit(forge.store()).pop().unwrap();
    assert_eq!(last.kind, AuditKind::ForgeDecision);
    assert_eq!(last.payload["approved"], false);
    assert_eq!(last.payload["stage"], stage.as_str());
    assert_eq!(last.subject, request.name);
    err
}
