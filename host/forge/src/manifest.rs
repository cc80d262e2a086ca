//! What the registry keeps about a forged tool besides its artifact: the
//! [`ToolManifest`] (stored as a registry record's `manifest`), and the
//! [`ToolInfo`] view handed to callers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::judge::{TestResultSummary, Verdict};
use temper_runtime::artifact::ArtifactManifest;
use temper_store::Tier;

/// What the registry keeps about a forged tool: its artifact's own
/// manifest (name, schemas, capabilities, tests, source blake3; raw source
/// only when persisted) plus the forge's verdict and the test results the
/// judge saw. Stored flat: the artifact manifest's fields at the top level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolManifest {
    /// The manifest embedded in the artifact.
    #[serde(flatten)]
    pub artifact: ArtifactManifest,
    /// The forge judge's verdict.
    pub verdict: Verdict,
    /// The test results the judge saw (first run).
    #[serde(default)]
    pub test_results: Vec<TestResultSummary>,
    /// The repeat run's results (determinism check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_run: Option<Vec<TestResultSummary>>,
}

/// A registered tool as callers see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    /// The name agents call it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Where it lives.
    pub tier: Tier,
    /// blake3 of its artifact, hex.
    pub id: String,
    /// The agent that forged it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The session it was forged in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// JSON Schema of the input.
    pub input_schema: Value,
    /// JSON Schema of the output.
    pub output_schema: Value,
    /// Capabilities it asked for.
    pub allowlist: Vec<String>,
    /// blake3 of its source, hex.
    pub source_blake3: String,
    /// The forge verdict's confidence.
    pub confidence: f64,
    /// How the tool is implemented.
    pub mode: temper_runtime::artifact::Mode,
    /// A compose tool's steps, each pinned by its tool's artifact blake3
    /// (none for a host-native step).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<temper_runtime::artifact::StepRef>,
    /// The tools a sandbox tool calls (code mode), each pinned by its
    /// artifact blake3 (none for a hub or host-native tool).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<temper_runtime::artifact::CallRef>,
}

impl ToolInfo {
    /// The view of `manifest` registered in `tier` under `artifact`.
    pub fn new(
        manifest: &ToolManifest,
        tier: Tier,
        artifact: &str,
        agent_id: Option<String>,
        session_id: Option<String>,
    ) -> Self {
        let m = &manifest.artifact;
        Self {
            name: m.name.clone(),
            description: m.description.clone(),
            tier,
            id: artifact.to_string(),
            agent_id,
            session_id,
            input_schema: m.input_schema.clone(),
            output_schema: m.output_schema.clone(),
            allowlist: m.capabilities.clone(),
            source_blake3: m.source_blake3.clone(),
            confidence: manifest.verdict.confidence,
            mode: m.mode,
            steps: m.steps.clone(),
            calls: m.calls.clone(),
        }
    }
}
