//! [`RulesJudge`]: the offline, deterministic judge.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Judge, ReviewFuture, Scores, TestResultSummary, ToolCandidate, Verdict};

/// A static check of JavaScript source: `Ok(())` when no blocked API is used,
/// otherwise `Err` with a description of every blocked use.
///
/// Kept as a plain function pointer so this module does not depend on the
/// host's checker; wire it with a non-capturing closure, e.g.
/// `|src| temper_runtime::static_check::check(src).map_err(|e| e.to_string())`.
pub type StaticCheck = fn(&str) -> Result<(), String>;

/// Confidence of an approval backed by at least [`RulesJudge::WELL_TESTED`] tests.
const CONFIDENCE_WELL_TESTED: f64 = 0.9;
/// Confidence of an approval backed by fewer tests.
const CONFIDENCE_FEW_TESTS: f64 = 0.85;
/// Confidence of an approval of a bytecode-only artifact: below the
/// promotion threshold, so it cannot be promoted without its source.
const CONFIDENCE_BYTECODE_ONLY: f64 = 0.5;
/// Longest JSON rendering of an output quoted in a reason.
const MAX_QUOTED: usize = 200;

/// An offline judge for air-gapped hosts, chosen explicitly (it is never the
/// default). It approves only when every rule holds; each failed rule adds
/// its own reason:
///
/// 1. There is at least one test result, and every test passed.
/// 2. The candidate has a source or a composition spec; a source passes the
///    configured [`StaticCheck`] (no blocked API). An imported artifact
///    marked `bytecodeOnly` may have neither: it is approved (if the other
///    rules hold) with confidence 0.5, below the promotion threshold.
/// 3. The allowlist is exactly what the code uses: every allowlisted
///    capability appears in `usedApis` (nothing granted "just in case"), and
///    every capability in `usedApis` is allowlisted (the code does not
///    exceed its declared surface).
/// 4. `repeatRun` is present and, index by index, gives the same `passed`
///    flag and a JSON-equal output (object key order does not matter; `1`
///    and `1.0` differ) for every test, with no extra or missing entries.
///
/// Scores: `safety` is 1 when rules 2 and 3 hold, else 0; `correctness` is
/// the fraction of tests that passed; `determinism` is the fraction of tests
/// whose repeat output matched (0 without a repeat run). `confidence` is 0.9
/// for an approval with at least 3 tests, 0.85 for an approval with fewer
/// (both above the promotion threshold of 0.8), and 0 for a rejection.
#[derive(Debug, Clone, Copy)]
pub struct RulesJudge {
    static_check: StaticCheck,
}

impl RulesJudge {
    /// Number of tests from which an approval gets the higher confidence.
    pub const WELL_TESTED: usize = 3;
    /// The name recorded in [`Verdict::judge`].
    pub const NAME: &'static str = "rules";

    /// A rules judge using `static_check` for rule 2.
    pub fn new(static_check: StaticCheck) -> Self {
        Self { static_check }
    }

    /// The rules judge with the host's own static check
    /// ([`temper_runtime::static_check::check`]) for rule 2: what the CLI's
    /// `--judge rules` uses.
    pub fn standard() -> Self {
        Self::new(|src| temper_runtime::static_check::check(src).map_err(|e| e.to_string()))
    }

    /// The verdict, computed synchronously (the rules do no I/O).
    pub fn review_now(&self, candidate: &ToolCandidate) -> Verdict {
        let mut reasons = Vec::new();
        let total = candidate.test_results.len();

        // Rule 1: tests exist and pass.
        let passed = candidate.test_results.iter().filter(|t| t.passed).count();
        if total == 0 {
            reasons.push("no test cases: at least one is required".to_string());
        }
        for t in candidate.test_results.iter().filter(|t| !t.passed) {
            match &t.failure {
                Some(f) => reasons.push(format!("test #{} failed: {f}", t.index)),
                None => reasons.push(format!("test #{} failed", t.index)),
            }
        }

        // Rules 2 and 3: safety.
        let safety_before = reasons.len();
        match (&candidate.source, &candidate.composition) {
            (None, None) if candidate.bytecode_only => {}
            (None, None) => {
                reasons.push("candidate has neither source code nor a composition".to_string())
            }
            (Some(source), _) => {
                if let Err(found) = (self.static_check)(source) {
                    reasons.push(format!("blocked API in source: {found}"));
                }
            }
            (None, Some(_)) => {}
        }
        let allowed: BTreeSet<&str> = candidate.allowlist.iter().map(String::as_str).collect();
        let used: BTreeSet<&str> = candidate.used_apis.iter().map(String::as_str).collect();
        for api in allowed.difference(&used) {
            reasons.push(format!(
                "allowlist grants `{api}` but the code does not appear to use it"
            ));
        }
        for api in used.difference(&allowed) {
            reasons.push(format!(
                "code appears to use `{api}`, which the allowlist does not grant"
            ));
        }
        let safe = reasons.len() == safety_before;

        // Rule 4: determinism.
        let deterministic = match &candidate.repeat_run {
            None => {
                reasons.push("no repeat run: determinism is unverified".to_string());
                0
            }
            Some(repeat) => compare_runs(&candidate.test_results, repeat, &mut reasons),
        };

        let approved = reasons.is_empty();
        let fraction = |n: usize| {
            if total == 0 {
                0.0
            } else {
                n as f64 / total as f64
            }
        };
        let unreviewed = candidate.source.is_none() && candidate.composition.is_none();
        let confidence = match (approved, total >= Self::WELL_TESTED) {
            (false, _) => 0.0,
            _ if unreviewed => CONFIDENCE_BYTECODE_ONLY,
            (true, true) => CONFIDENCE_WELL_TESTED,
            (true, false) => CONFIDENCE_FEW_TESTS,
        };
        if approved {
            reasons = vec![
                format!("all {total} tests passed"),
                "allowlist matches the APIs the code uses".to_string(),
                if unreviewed {
                    "no source (bytecode-only artifact): static check not possible; capabilities as declared, bounded by the host policy".to_string()
                } else {
                    "no blocked API in the source".to_string()
                },
                "repeat run gave identical outputs".to_string(),
            ];
        }
        let scores = Scores {
            safety: if safe { 1.0 } else { 0.0 },
            correctness: fraction(passed),
            determinism: fraction(deterministic),
            confidence,
        };
        Verdict::new(approved, scores, reasons, Self::NAME)
    }
}

impl Judge for RulesJudge {
    fn review<'a>(&'a self, candidate: &'a ToolCandidate) -> ReviewFuture<'a> {
        Box::pin(async move { self.review_now(candidate) })
    }
}

/// Compares the first run with the repeat run index by index, adding a reason
/// per difference; returns how many tests matched.
fn compare_runs(
    first: &[TestResultSummary],
    repeat: &[TestResultSummary],
    reasons: &mut Vec<String>,
) -> usize {
    let mut matched = 0;
    for t in first {
        let Some(r) = repeat.iter().find(|r| r.index == t.index) else {
            reasons.push(format!("repeat run has no result for test #{}", t.index));
            continue;
        };
        if r.output == t.output && r.passed == t.passed {
            matched += 1;
        } else {
            reasons.push(format!(
                "test #{} is not deterministic: first run gave {}, repeat run gave {}",
                t.index,
                describe(t),
                describe(r)
            ));
        }
    }
    for r in repeat {
        if !first.iter().any(|t| t.index == r.index) {
            reasons.push(format!(
                "repeat run has a result for unknown test #{}",
                r.index
            ));
        }
    }
    matched
}

/// Short description of one run's result for a reason: its output (JSON,
/// truncated) or that it failed without one.
fn describe(t: &TestResultSummary) -> String {
    let status = if t.passed { "" } else { " (failed)" };
    match &t.output {
        Some(v) => format!("{}{status}", quote(v)),
        None => format!("no output{status}"),
    }
}

/// Compact JSON of `v`, cut to [`MAX_QUOTED`] characters.
fn quote(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= MAX_QUOTED {
        s
    } else {
        let cut: String = s.chars().take(MAX_QUOTED).collect();
        format!("{cut}...")
    }
}
