//! What the forge hands back: a forge's outcome ([`Forged`], and the
//! seed's [`ForgeResult`] shape), an [`Invocation`], an [`Exported`]
//! artifact.

use serde::Serialize;
use serde_json::Value;

use super::error::{ForgeError, Stage};
use super::judge::Verdict;
use super::manifest::ToolInfo;
use crate::testcase::CaseResult;
use temper_runtime::host_state::LogLine;
use temper_store::Tier;

/// A successful forge: the registered tool, the verdict and the test results.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forged {
    /// The tool, in the session tier.
    pub tool: ToolInfo,
    /// The judge's verdict.
    pub verdict: Verdict,
    /// The test results (first run).
    pub test_results: Vec<CaseResult>,
}

/// The seed's `ForgeResult` shape: `success`, `tool`, `verdict`, `errors`,
/// plus the refusing `stage` and the test results when there are some.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForgeResult {
    /// Whether the tool was registered.
    pub success: bool,
    /// The tool, when registered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolInfo>,
    /// The judge's verdict, when the judge ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Why it was refused (empty on success).
    pub errors: Vec<String>,
    /// The stage that refused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// Test results, when the tests ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub test_results: Vec<CaseResult>,
    /// Whether `tool` is an existing tool with the request's content, given
    /// back instead of a new one (nothing registered).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
    /// What to do next, when there is something to say (a reuse).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Visible tools like the one requested (at most 3), to call instead
    /// of forging another.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub similar_tools: Vec<crate::discovery::reuse::SimilarTool>,
}

impl ForgeResult {
    /// The answer to a request whose content an existing tool has.
    pub fn reused(
        tool: ToolInfo,
        similar_tools: Vec<crate::discovery::reuse::SimilarTool>,
    ) -> Self {
        let message = format!(
            "{} ({} tier) already has this content: call it; nothing new was registered",
            tool.name, tool.tier
        );
        ForgeResult {
            success: true,
            tool: Some(tool),
            verdict: None,
            errors: Vec::new(),
            stage: None,
            test_results: Vec::new(),
            reused: true,
            message: Some(message),
            similar_tools,
        }
    }
}

impl From<&Result<Forged, ForgeError>> for ForgeResult {
    fn from(outcome: &Result<Forged, ForgeError>) -> Self {
        match outcome {
            Ok(f) => ForgeResult {
                success: true,
                tool: Some(f.tool.clone()),
                verdict: Some(f.verdict.clone()),
                errors: Vec::new(),
                stage: None,
                test_results: f.test_results.clone(),
                reused: false,
                message: None,
                similar_tools: Vec::new(),
            },
            Err(e) => {
                let (verdict, results) = match e {
                    ForgeError::Judge { verdict, results } => {
                        (Some(verdict.clone()), results.clone())
                    }
                    ForgeError::Test { results, .. } => (None, results.clone()),
                    _ => (None, Vec::new()),
                };
                ForgeResult {
                    success: false,
                    tool: None,
                    verdict,
                    errors: vec![e.to_string()],
                    stage: Some(e.stage()),
                    test_results: results,
                    reused: false,
                    message: None,
                    similar_tools: Vec::new(),
                }
            }
        }
    }
}

/// A successful invocation.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Invocation {
    /// The tool's output (matched its `outputSchema`).
    pub output: Value,
    /// Console lines it printed.
    pub logs: Vec<LogLine>,
    /// Wall-clock time of the call, ms.
    pub latency_ms: f64,
    /// The tier it was found in.
    pub tier: Tier,
    /// Its artifact's blake3.
    pub tool_id: String,
}

/// An exported artifact and its provenance.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The `.wasm` bytes.
    pub bytes: Vec<u8>,
    /// Their blake3 (the tool's id as a file).
    pub id: String,
    /// The tool as registered.
    pub tool: ToolInfo,
    /// Its audit entries (forge decision, registration, promotions,
    /// approvals...), for a sidecar file: who and when stay out of the
    /// artifact's bytes.
    pub provenance: Vec<Value>,
}
