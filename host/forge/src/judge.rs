//! The forge's JUDGE stage: reviews a built and tested tool candidate and
//! returns a [`Verdict`] that decides whether the tool may be registered.
//!
//! The pipeline holds an `Arc<dyn Judge>`. Three judges exist:
//!
//! - [`NoJudge`], the default when nothing is configured: it rejects every
//!   candidate, so an unconfigured host fails closed.
//! - [`RulesJudge`], an offline, deterministic judge for air-gapped hosts,
//!   chosen explicitly: all tests pass (and there is at least one), the
//!   allowlist grants exactly the APIs the code uses, the source passes a
//!   static check, and a repeat run gives identical outputs.
//! - [`LlmJudge`], an LLM-as-judge speaking the OpenAI-compatible
//!   chat-completions API (hosted APIs, llama.cpp, Ollama, vLLM, ...). Every
//!   failure (HTTP error, timeout, refused connection, unparseable answer,
//!   out-of-range score) is a rejection whose reason says what went wrong.
//!
//! Promotion to the agent tier uses [`panel`]: two independent reviews (a
//! safety reviewer and a correctness reviewer, see [`ReviewFocus`]), approved
//! only when both approve.
//!
//! A judge never returns an error: whatever goes wrong becomes a rejecting
//! [`Verdict`] whose `reasons` explain it (fail closed). Errors that can
//! happen before any review, such as a bad [`LlmJudgeConfig`], are returned as
//! [`JudgeError`].

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod llm;
mod rules;
#[cfg(test)]
mod tests;

pub use llm::{
    CORRECTNESS_REVIEWER_FOCUS, DEFAULT_API_KEY_ENV, DEFAULT_TIMEOUT, LlmJudge, LlmJudgeConfig,
    ReviewError, ReviewFocus, SAFETY_REVIEWER_FOCUS, SYSTEM_PROMPT,
};
pub use rules::{RulesJudge, StaticCheck};

/// Reason given by [`NoJudge`] for every rejection.
pub const NO_JUDGE_REASON: &str = "no judge configured: forge requests are rejected (fail closed); \
     only the host's operator can enable forging by naming a judge (`--judge rules` or \
     `--judge llm` on the command line, `judge` in the Python and Node packages)";

/// The future returned by [`Judge::review`]: boxed so that `dyn Judge` works.
pub type ReviewFuture<'a> = Pin<Box<dyn Future<Output = Verdict> + Send + 'a>>;

/// A reviewer of tool candidates.
///
/// Implementations must fail closed: any doubt, error or missing information
/// yields a [`Verdict`] with `approved: false` and a reason.
///
/// The method returns a boxed future (rather than being an `async fn`) so the
/// trait stays dyn-compatible and the pipeline can hold an `Arc<dyn Judge>`.
/// An implementation typically reads:
///
/// ```text
/// fn review<'a>(&'a self, candidate: &'a ToolCandidate) -> ReviewFuture<'a> {
///     Box::pin(async move { /* ... */ })
/// }
/// ```
pub trait Judge: Send + Sync {
    /// Reviews `candidate` and returns the verdict. Never panics on bad input
    /// and never returns an error: failures are rejections.
    fn review<'a>(&'a self, candidate: &'a ToolCandidate) -> ReviewFuture<'a>;
}

/// What the judge sees: the tool's identity and schemas, its code (or
/// composition spec), its sandbox allowlist, and its test results.
///
/// Serialized in camelCase; this JSON is also the user message sent to an
/// [`LlmJudge`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCandidate {
    /// Machine-readable tool name.
    pub name: String,
    /// Natural-language description of what the tool does.
    pub description: String,
    /// JSON Schema of the tool's input.
    pub input_schema: Value,
    /// JSON Schema of the tool's output, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// JavaScript source, for sandbox-mode tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Composition spec, for compose-mode tools (chains of existing tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composition: Option<Value>,
    /// Capabilities the tool is granted (e.g. `fetch`, `crypto`, `fs.readFile`).
    #[serde(default)]
    pub allowlist: Vec<String>,
    /// Results of the test cases, run once.
    #[serde(default)]
    pub test_results: Vec<TestResultSummary>,
    /// Capabilities the code appears to use, filled by the caller (for
    /// example from a scan of the source). Compared against `allowlist`.
    #[serde(default)]
    pub used_apis: Vec<String>,
    /// Results of running the same test cases a second time, used to check
    /// determinism. `None` when no repeat run was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_run: Option<Vec<TestResultSummary>>,
    /// The candidate is an imported artifact that carries QuickJS bytecode
    /// but no source: only its tests, its declared capabilities and the
    /// sandbox speak for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bytecode_only: bool,
}

/// Outcome of one test case, as shown to the judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestResultSummary {
    /// Position of the test case in the candidate's test list (0-based).
    pub index: usize,
    /// Whether the test passed (ran and matched its expected output, if any).
    pub passed: bool,
    /// The input the tool was called with.
    pub input: Value,
    /// The tool's output, when it produced one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Why the test failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// A judge's decision on one candidate.
///
/// Scores are in `0..=1`: [`Verdict::new`] clamps them (NaN becomes 0), and
/// [`LlmJudge`] rejects answers whose scores are outside the range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// Whether the tool may be registered.
    pub approved: bool,
    /// How safe the code is (no escape, no capability beyond its need).
    pub safety: f64,
    /// How well the tests show the tool does what it describes.
    pub correctness: f64,
    /// How reproducible the outputs are for equal inputs.
    pub determinism: f64,
    /// The judge's confidence in its own verdict; promotion needs > 0.8.
    pub confidence: f64,
    /// Why the verdict is what it is: every failed rule or problem, and for
    /// approvals a short justification.
    pub reasons: Vec<String>,
    /// Which judge decided, e.g. `none`, `rules`, `llm:qwen2.5-coder`.
    pub judge: String,
}

/// The four scores of a [`Verdict`], grouped for [`Verdict::new`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Scores {
    /// See [`Verdict::safety`].
    pub safety: f64,
    /// See [`Verdict::correctness`].
    pub correctness: f64,
    /// See [`Verdict::determinism`].
    pub determinism: f64,
    /// See [`Verdict::confidence`].
    pub confidence: f64,
}

/// Clamps a score into `0..=1`; NaN becomes 0.
pub fn clamp_score(score: f64) -> f64 {
    if score.is_nan() {
        0.0
    } else {
        score.clamp(0.0, 1.0)
    }
}

impl Verdict {
    /// Builds a verdict, clamping every score into `0..=1` (NaN becomes 0).
    pub fn new(
        approved: bool,
        scores: Scores,
        reasons: Vec<String>,
        judge: impl Into<String>,
    ) -> Self {
        Self {
            approved,
            safety: clamp_score(scores.safety),
            correctness: clamp_score(scores.correctness),
            determinism: clamp_score(scores.determinism),
            confidence: clamp_score(scores.confidence),
            reasons,
            judge: judge.into(),
        }
    }

    /// A rejection with all scores 0 and the given reasons.
    pub fn reject(judge: impl Into<String>, reasons: Vec<String>) -> Self {
        Self::new(false, Scores::default(), reasons, judge)
    }
}

/// Errors returned before any review happens (configuration). Problems during
/// a review are never errors: they become rejecting verdicts.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// The configured base URL is not an `http://` or `https://` URL.
    #[error("judge: invalid base URL `{0}`: expected http:// or https://")]
    InvalidBaseUrl(String),
    /// The model name is empty.
    #[error("judge: no model configured")]
    NoModel,
    /// The timeout is zero.
    #[error("judge: timeout must be greater than zero")]
    ZeroTimeout,
    /// The HTTP client could not be built (e.g. TLS setup failed).
    #[error("judge: cannot build HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// The default judge when none is configured: rejects every candidate with
/// [`NO_JUDGE_REASON`], so forge requests fail closed.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJudge;

impl Judge for NoJudge {
    fn review<'a>(&'a self, _candidate: &'a ToolCandidate) -> ReviewFuture<'a> {
        Box::pin(async { Verdict::reject("none", vec![NO_JUDGE_REASON.to_string()]) })
    }
}

/// The outcome of a two-reviewer promotion [`panel`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PanelVerdict {
    /// True only when both reviewers approved.
    pub approved: bool,
    /// The safety reviewer's verdict.
    pub safety: Verdict,
    /// The correctness reviewer's verdict.
    pub correctness: Verdict,
}

impl PanelVerdict {
    /// The lower of the two reviewers' confidences (what promotion compares
    /// against its threshold).
    pub fn confidence(&self) -> f64 {
        self.safety.confidence.min(self.correctness.confidence)
    }

    /// Both reviewers' reasons, each prefixed with its reviewer
    /// (`safety: ...`, `correctness: ...`).
    pub fn reasons(&self) -> Vec<String> {
        let safety = self.safety.reasons.iter().map(|r| format!("safety: {r}"));
        let correctness = self
            .correctness
            .reasons
            .iter()
            .map(|r| format!("correctness: {r}"));
        safety.chain(correctness).collect()
    }
}

/// Promotion panel: two independent reviews of `candidate`, run concurrently,
/// approved only when both approve. Both verdicts are returned.
///
/// Pass two differently focused judges, e.g.
/// `LlmJudge::new(cfg.clone())?.with_focus(ReviewFocus::Safety)` and
/// `LlmJudge::new(cfg)?.with_focus(ReviewFocus::Correctness)`, or the same
/// offline judge twice (`panel(&rules, &rules, c)`), which is then simply
/// that judge's verdict required twice.
pub async fn panel(
    safety_reviewer: &dyn Judge,
    correctness_reviewer: &dyn Judge,
    candidate: &ToolCandidate,
) -> PanelVerdict {
    let (safety, correctness) = tokio::join!(
        safety_reviewer.review(candidate),
        correctness_reviewer.review(candidate)
    );
    PanelVerdict {
        approved: safety.approved && correctness.approved,
        safety,
        correctness,
    }
}
