//! Reuse at forge time: a forge request whose content equals a visible
//! tool's answers with that tool ([`Forge::forge_or_reuse_json`]), and
//! every forge result lists the visible tools most like the request
//! ([`SimilarTool`]), so the agent can call one instead of forging.
//!
//! A sandbox request's **content id** is the blake3 of the canonical JSON
//! of what its tool's manifest records of it: name, description, input
//! and output schemas, the sorted capabilities and the blake3 of the
//! source ([`request_content_id`]); a registered tool's is computed from
//! its manifest the same way ([`tool_content_id`]). A compose request is
//! never reused (its content id needs the build).
//!
//! **Similarity** (`similarTools`' `score`, 0 to 1) is the share of the
//! request's terms (name words and description, lowercased, stop words
//! dropped, a plural `s` cut) that a tool's name and description contain;
//! tools at or above [`SIMILAR_THRESHOLD`] are listed, at most
//! [`MAX_SIMILAR`].

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::json;
use temper_runtime::canonical_json::canonical_json;
use temper_runtime::request::{ForgeRequest, Implementation};
use temper_store::{SearchTiers, name_words};

use super::search::{FoundTool, SearchRequest, SearchScope};
use crate::error::{ForgeError, Stage};
use crate::outcome::ForgeResult;
use crate::{Forge, ForgeContext, ToolInfo};

/// Most tools in `similarTools`.
pub const MAX_SIMILAR: usize = 3;
/// Least similarity listed in `similarTools`.
pub const SIMILAR_THRESHOLD: f64 = 0.5;

/// A visible tool like the one requested.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimilarTool {
    /// Its name.
    pub name: String,
    /// Its description (at most 200 characters).
    pub description: String,
    /// The share of the request's terms it has (0 to 1).
    pub score: f64,
}

/// Words too common to tell tools apart.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "into", "is", "it",
    "its", "of", "on", "or", "the", "to", "with", "returns", "return", "given", "tool",
];

/// The terms of `text` for similarity (see the module docs).
fn terms(text: &str) -> BTreeSet<String> {
    name_words(text)
        .split(' ')
        .filter(|w| !w.is_empty() && !STOP_WORDS.contains(w))
        .map(|w| match w.strip_suffix('s') {
            Some(stem) if stem.len() > 2 && !stem.ends_with('s') => stem.to_owned(),
            _ => w.to_owned(),
        })
        .collect()
}

/// The share of `request`'s terms found in `tool`'s (0 to 1).
pub fn similarity(request: &str, tool: &str) -> f64 {
    let want = terms(request);
    if want.is_empty() {
        return 0.0;
    }
    let have = terms(tool);
    want.intersection(&have).count() as f64 / want.len() as f64
}

/// The content id of a sandbox request (see the module docs); `None` for
/// a compose request.
pub fn request_content_id(request: &ForgeRequest) -> Option<String> {
    let Implementation::Sandbox { code, allowlist } = &request.implementation else {
        return None;
    };
    let mut caps = allowlist.clone();
    caps.sort();
    caps.dedup();
    Some(content_id(
        &request.name,
        &request.description,
        &request.input_schema,
        &request.output_schema,
        &caps,
        &temper_runtime::id::blake3_hex(code.as_bytes()),
    ))
}

/// The content id of a registered sandbox tool; `None` for a compose one.
pub fn tool_content_id(tool: &ToolInfo) -> Option<String> {
    if tool.mode != temper_runtime::artifact::Mode::Sandbox {
        return None;
    }
    Some(content_id(
        &tool.name,
        &tool.description,
        &tool.input_schema,
        &tool.output_schema,
        &tool.allowlist,
        &tool.source_blake3,
    ))
}

fn content_id(
    name: &str,
    description: &str,
    input: &serde_json::Value,
    output: &serde_json::Value,
    caps: &[String],
    source_blake3: &str,
) -> String {
    let doc = json!({
        "name": name,
        "description": description,
        "inputSchema": input,
        "outputSchema": output,
        "capabilities": caps,
        "sourceBlake3": source_blake3,
    });
    temper_runtime::id::blake3_hex(canonical_json(&doc).as_bytes())
}

impl Forge {
    /// The visible tool `request` would make again (same content id), if
    /// any: the tool of its name `ctx` sees.
    pub async fn reusable(
        &self,
        request: &ForgeRequest,
        ctx: &ForgeContext,
    ) -> Result<Option<ToolInfo>, temper_store::StoreError> {
        let Some(id) = request_content_id(request) else {
            return Ok(None);
        };
        let found = self
            .infos_of(ctx, std::slice::from_ref(&request.name))
            .await?;
        Ok(found.into_iter().find(|t| {
            ctx.grant().allows_tier(t.tier) && tool_content_id(t).as_deref() == Some(id.as_str())
        }))
    }

    /// Up to [`MAX_SIMILAR`] tools in `scope` most like a tool `name`
    /// described by `description`, at or above [`SIMILAR_THRESHOLD`],
    /// leaving out `except` (the tool just forged). A failing search
    /// lists none.
    pub async fn similar_tools(
        &self,
        ctx: &ForgeContext,
        name: &str,
        description: &str,
        except: Option<&str>,
        scope: SearchScope<'_>,
    ) -> Vec<SimilarTool> {
        let query = format!("{} {description}", name_words(name));
        let request = SearchRequest {
            query: query.clone(),
            limit: 10,
            tier: None,
            capability: None,
        };
        let found: Vec<FoundTool> = match self.search_tools(ctx, &request, scope).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!("similar tools of {name}: {e}");
                return Vec::new();
            }
        };
        let mut similar: Vec<SimilarTool> = found
            .into_iter()
            .filter(|t| Some(t.name.as_str()) != except)
            .map(|t| {
                let score = similarity(&query, &format!("{} {}", t.name, t.description));
                SimilarTool {
                    name: t.name,
                    description: t.description,
                    score: (score * 100.0).round() / 100.0,
                }
            })
            .filter(|t| t.score >= SIMILAR_THRESHOLD)
            .collect();
        similar.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.name.cmp(&b.name))
        });
        similar.truncate(MAX_SIMILAR);
        similar
    }

    /// A forge of the JSON request `json` that reuses first: when a tool
    /// `ctx` sees has its content id, the answer is that tool (`reused`,
    /// nothing registered, nothing audited); otherwise
    /// [`Forge::forge_json_with_progress`]. Either way the result lists
    /// [`SimilarTool`]s from `scope`. Returns the result and the forge's
    /// outcome (`None` when a tool was reused).
    pub async fn forge_or_reuse_json(
        &self,
        json: &str,
        ctx: &ForgeContext,
        progress: &(dyn Fn(Stage) + Send + Sync),
        scope: SearchScope<'_>,
    ) -> (ForgeResult, Option<Result<crate::Forged, ForgeError>>) {
        let parsed = ForgeRequest::from_json(json).ok();
        if let Some(request) = &parsed
            && let Ok(Some(tool)) = self.reusable(request, ctx).await
        {
            let similar = self
                .similar_tools(
                    ctx,
                    &request.name,
                    &request.description,
                    Some(&tool.name),
                    scope,
                )
                .await;
            return (ForgeResult::reused(tool, similar), None);
        }
        let outcome = self.forge_json_with_progress(json, ctx, progress).await;
        let mut result = ForgeResult::from(&outcome);
        if let Some(request) = &parsed {
            let except = outcome.as_ref().ok().map(|f| f.tool.name.as_str());
            result.similar_tools = self
                .similar_tools(ctx, &request.name, &request.description, except, scope)
                .await;
        }
        (result, Some(outcome))
    }
}

/// The scope of a caller who sees every forged tier and no hub tool.
pub fn forged_only() -> SearchScope<'static> {
    SearchScope {
        tiers: SearchTiers::ALL,
        hub: &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similarity_is_the_share_of_request_terms() {
        let s = similarity(
            "parse_csv_rows Splits CSV text into rows",
            "csv_rows Splits CSV text into rows of fields",
        );
        assert!(s >= 0.8, "{s}");
        assert_eq!(similarity("slugify a title", "sha256 of bytes"), 0.0);
        assert_eq!(similarity("the a of", "anything"), 0.0);
    }

    #[test]
    fn content_ids_match_request_and_tool() {
        let request: ForgeRequest = serde_json::from_value(json!({
            "name": "double", "description": "Doubles n.",
            "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
            "implementation": {"mode": "sandbox", "code": "function execute(i){return i}",
                               "allowlist": ["fetch", "fetch"]},
        }))
        .unwrap();
        let id = request_content_id(&request).unwrap();
        let mut other = request.clone();
        other.description = "Doubles n!".into();
        assert_ne!(request_content_id(&other).unwrap(), id);
        let tool = ToolInfo {
            name: "double".into(),
            description: "Doubles n.".into(),
            tier: temper_store::Tier::Session,
            id: "ab".into(),
            agent_id: None,
            session_id: None,
            input_schema: json!({"type": "object"}),
            output_schema: json!({"type": "object"}),
            allowlist: vec!["fetch".into()],
            source_blake3: temper_runtime::id::blake3_hex(b"function execute(i){return i}"),
            confidence: 1.0,
            mode: temper_runtime::artifact::Mode::Sandbox,
            steps: Vec::new(),
            calls: Vec::new(),
        };
        assert_eq!(tool_content_id(&tool).unwrap(), id);
    }
}
