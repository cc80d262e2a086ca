//! [`Forge::search_tools`]: the tools a caller may use that match a query,
//! ranked, compact (name, a description of at most
//! [`MAX_FOUND_DESCRIPTION`] characters, a one-line TypeScript signature,
//! tier, score).
//!
//! Forged tools are ranked by the store's index over the caller's session,
//! its agent's tier and the shared tier ([`temper_store::Registry::search_tools`]);
//! hub tools by an in-memory index with the same tokenizer and weights
//! ([`temper_store::MemoryIndex`], rebuilt when the hub's tools change),
//! over the hub tools the caller may see only. The rankings (and a semantic
//! one, when an embedder is configured) are fused by reciprocal rank
//! fusion. A search never reveals a tool outside the caller's scope: the
//! store query is bounded by agent, session and tiers, hub hits by the
//! caller's visible hub tools.

use std::sync::Arc;

use serde::Serialize;
use temper_store::{
    MAX_SEARCH_LIMIT, MemoryIndex, SearchDoc, SearchQuery, SearchTiers, StoreError, Tier,
};

use super::typescript::signature;
use super::{fuse_rrf, semantic_ranking};
use crate::native::NativeToolSpec;
use crate::{Forge, ForgeContext, ToolInfo, lock};

/// Most characters of a found tool's description.
pub const MAX_FOUND_DESCRIPTION: usize = 200;

/// Default number of results.
pub const DEFAULT_SEARCH_LIMIT: usize = 5;

/// Where a found tool lives: a forged tool's tier or the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundTier {
    /// The caller's session.
    Session,
    /// The caller's agent tier.
    Agent,
    /// The shared tier.
    Shared,
    /// The tool hub (an upstream MCP server's tool, or a built-in).
    Hub,
}

impl FoundTier {
    /// `session`, `agent`, `shared` or `hub`.
    pub fn parse(s: &str) -> Option<FoundTier> {
        match s {
            "session" => Some(FoundTier::Session),
            "agent" => Some(FoundTier::Agent),
            "shared" => Some(FoundTier::Shared),
            "hub" => Some(FoundTier::Hub),
            _ => None,
        }
    }

    fn of(tier: Tier) -> FoundTier {
        match tier {
            Tier::Session => FoundTier::Session,
            Tier::Agent => FoundTier::Agent,
            Tier::Shared => FoundTier::Shared,
        }
    }
}

/// One tool found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FoundTool {
    /// Its name (what `tools/call` takes).
    pub name: String,
    /// Its description, at most [`MAX_FOUND_DESCRIPTION`] characters.
    pub description: String,
    /// Its TypeScript signature, one line.
    pub signature: String,
    /// Where it lives.
    pub tier: FoundTier,
    /// Its relevance, higher is better: the reciprocal-rank-fusion score
    /// of its ranks (comparable within one answer).
    pub score: f64,
}

/// A search's answer: the tools found and, when the semantic ranking could
/// not be used (the embedder failed), a warning saying the results are
/// lexical only. A failing embedder is never an error.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Searched {
    /// The tools found, best first.
    pub tools: Vec<FoundTool>,
    /// What the caller should know about how they were ranked (empty when
    /// every configured ranking was used).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Most visible forged tools the semantic ranking scores beyond the
/// lexical candidates: a caller who sees more gets the semantic ranking
/// of the lexical candidates only (so a search embeds no more than this
/// many texts, each once per model while the embedder's cache holds it).
pub const SEMANTIC_SCAN_MAX: usize = 1_000;

/// What to look for.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// Words of what the tool should do.
    pub query: String,
    /// Most results (1..=[`MAX_SEARCH_LIMIT`]).
    pub limit: usize,
    /// Only this tier.
    pub tier: Option<FoundTier>,
    /// Only forged tools whose granted capabilities mention this (e.g.
    /// `fetch`, a host name).
    pub capability: Option<String>,
}

/// What the caller may see: the forged tiers its access allows and the hub
/// tools its grants leave it, as the transport knows them; the search
/// narrows both further by the context's [`crate::CallerGrant`].
#[derive(Debug, Clone, Copy)]
pub struct SearchScope<'a> {
    /// The forged tiers.
    pub tiers: SearchTiers,
    /// The hub tools it may see and call.
    pub hub: &'a [NativeToolSpec],
}

/// The in-memory index of the hub's tools, and the hub generation it was
/// built at (one at a time: bounded).
pub(crate) type HubIndex = std::sync::Mutex<Option<(u64, Arc<MemoryIndex>)>>;

/// The text a tool is embedded from: its name as words and its
/// description (`parse_csv_rows` and "Parses CSV…" give
/// `parse csv rows: Parses CSV…`), as the retrieval bench embeds it.
fn embedding_text(name: &str, description: &str) -> String {
    let words = temper_store::name_words(name);
    match description.trim() {
        "" => words,
        d => format!("{words}: {d}"),
    }
}

/// `text` cut to at most `max` characters (an ellipsis marks a cut).
pub fn clip(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(max.saturating_sub(1)) {
        Some((at, _)) if one_line.chars().count() > max => format!("{}…", &one_line[..at]),
        _ => one_line,
    }
}

impl Forge {
    /// The tools matching `request` among those `scope` lets `ctx` see,
    /// best first (see the module docs). An empty query finds nothing.
    /// [`Forge::search_tools_warned`] also says when the semantic ranking
    /// could not be used; here that is only logged.
    pub async fn search_tools(
        &self,
        ctx: &ForgeContext,
        request: &SearchRequest,
        scope: SearchScope<'_>,
    ) -> Result<Vec<FoundTool>, StoreError> {
        Ok(self.search_tools_warned(ctx, request, scope).await?.tools)
    }

    /// [`Forge::search_tools`], with the warnings of a semantic ranking
    /// that failed (the results are then the lexical ranking alone).
    pub async fn search_tools_warned(
        &self,
        ctx: &ForgeContext,
        request: &SearchRequest,
        scope: SearchScope<'_>,
    ) -> Result<Searched, StoreError> {
        let limit = request.limit.clamp(1, MAX_SEARCH_LIMIT);
        // A capability filter drops hits after ranking: rank more.
        let fetch = if request.capability.is_some() {
            MAX_SEARCH_LIMIT
        } else {
            limit
        };
        // The caller's grant narrows the scope it was given (and the
        // reverse): a search reaches no further than a call.
        let granted = ctx.grant().tiers();
        let allowed = SearchTiers {
            session: scope.tiers.session && granted.session,
            agent: scope.tiers.agent && granted.agent,
            shared: scope.tiers.shared && granted.shared,
        };
        let hub_visible: Vec<NativeToolSpec> = scope
            .hub
            .iter()
            .filter(|h| ctx.grant().allows_hub(&h.name))
            .cloned()
            .collect();
        let scope = SearchScope {
            tiers: allowed,
            hub: &hub_visible,
        };
        let tiers = match request.tier {
            None => scope.tiers,
            Some(FoundTier::Hub) => SearchTiers {
                session: false,
                agent: false,
                shared: false,
            },
            Some(FoundTier::Session) => scope.tiers.only(Tier::Session),
            Some(FoundTier::Agent) => scope.tiers.only(Tier::Agent),
            Some(FoundTier::Shared) => scope.tiers.only(Tier::Shared),
        };
        let (text, agent, session) = (
            request.query.clone(),
            ctx.agent_id.clone(),
            ctx.session_id.clone(),
        );
        let forged = self
            .with_store("search_tools", move |s| {
                s.search_tools(&SearchQuery {
                    text: &text,
                    agent: &agent,
                    session: &session,
                    tiers,
                    limit: fetch,
                })
            })
            .await?;
        let forged_names: Vec<String> = forged.iter().map(|h| h.name.clone()).collect();
        let mut infos = self.infos_of(ctx, &forged_names).await?;
        if let Some(cap) = &request.capability {
            let cap = cap.to_lowercase();
            infos.retain(|t| t.allowlist.iter().any(|a| a.to_lowercase().contains(&cap)));
        }
        let hub_hits = if request.capability.is_none()
            && matches!(request.tier, None | Some(FoundTier::Hub))
            && !scope.hub.is_empty()
        {
            self.hub_hits(ctx, &request.query, fetch, scope.hub).await?
        } else {
            Vec::new()
        };

        let lexical: Vec<String> = infos.iter().map(|t| t.name.clone()).collect();
        let hub_ranking: Vec<String> = hub_hits.iter().map(|h| h.name.clone()).collect();
        let mut rankings: Vec<&[String]> = vec![lexical.as_slice(), hub_ranking.as_slice()];
        let mut warnings = Vec::new();
        let semantic = if self.embedder().is_some() {
            // The semantic ranking may find what shares no word with the
            // query: it scores the visible tools too (at most
            // SEMANTIC_SCAN_MAX of them), within the same tiers and filter.
            let extra = self
                .semantic_candidates(ctx, tiers, request, &infos)
                .await?;
            infos.extend(extra);
            match self.semantic(&request.query, &infos, &hub_hits) {
                Ok(ranked) => Some(ranked),
                Err(warning) => {
                    warnings.push(warning);
                    None
                }
            }
        } else {
            None
        };
        if let Some(s) = &semantic {
            rankings.push(s);
        }
        let fused = fuse_rrf(&rankings);
        let tools = fused
            .into_iter()
            .filter_map(|(name, score)| {
                let score = (score * 1e6).round() / 1e6;
                if let Some(t) = infos.iter().find(|t| t.name == name) {
                    Some(found_forged(t, score))
                } else {
                    hub_hits
                        .iter()
                        .find(|h| h.name == name)
                        .map(|h| found_hub(h, score))
                }
            })
            .take(limit)
            .collect();
        Ok(Searched { tools, warnings })
    }

    /// The visible forged tools in `tiers` (and matching the request's
    /// capability filter) that are not among `lexical`, when the caller
    /// sees at most [`SEMANTIC_SCAN_MAX`] tools; none otherwise.
    async fn semantic_candidates(
        &self,
        ctx: &ForgeContext,
        tiers: SearchTiers,
        request: &SearchRequest,
        lexical: &[ToolInfo],
    ) -> Result<Vec<ToolInfo>, StoreError> {
        let mut visible = self.visible_tools_async(ctx).await?;
        if visible.len() > SEMANTIC_SCAN_MAX {
            return Ok(Vec::new());
        }
        let cap = request.capability.as_ref().map(|c| c.to_lowercase());
        visible.retain(|t| {
            let in_tier = match t.tier {
                Tier::Session => tiers.session,
                Tier::Agent => tiers.agent,
                Tier::Shared => tiers.shared,
            };
            in_tier
                && ctx.grant().allows_tier(t.tier)
                && !lexical.iter().any(|l| l.name == t.name)
                && cap
                    .as_ref()
                    .is_none_or(|c| t.allowlist.iter().any(|a| a.to_lowercase().contains(c)))
        });
        Ok(visible)
    }

    /// The semantic ranking of the candidates, when an embedder is
    /// configured; a failing embedder gives the warning the answer carries
    /// (and is logged), and the lexical ranking stands alone.
    fn semantic(
        &self,
        query: &str,
        infos: &[ToolInfo],
        hub: &[NativeToolSpec],
    ) -> Result<Vec<String>, String> {
        let Some(embedder) = self.embedder() else {
            return Ok(Vec::new());
        };
        let docs: Vec<(String, String)> = infos
            .iter()
            .map(|t| (t.name.clone(), embedding_text(&t.name, &t.description)))
            .chain(
                hub.iter()
                    .map(|h| (h.name.clone(), embedding_text(&h.name, &h.description))),
            )
            .collect();
        semantic_ranking(embedder.as_ref(), query, &docs).map_err(|e| {
            tracing::warn!(
                model = embedder.model_id(),
                "search_tools: semantic ranking skipped: {e}"
            );
            format!(
                "semantic ranking unavailable ({e}); these results are lexical only: \
                 search with words a tool's name or description would use"
            )
        })
    }

    /// The hub tools in `visible` matching `query`, best first, at most
    /// `limit`; a hub tool a forged tool of `ctx` shadows is left out.
    async fn hub_hits(
        &self,
        ctx: &ForgeContext,
        query: &str,
        limit: usize,
        visible: &[NativeToolSpec],
    ) -> Result<Vec<NativeToolSpec>, StoreError> {
        let index = self.hub_index()?;
        // Every match: the caller's narrowing is applied after ranking.
        let ranked = index.search(query, index.len().max(1))?;
        let mut out = Vec::new();
        for (name, _) in ranked {
            if out.len() == limit {
                break;
            }
            let Some(spec) = visible.iter().find(|h| h.name == name) else {
                continue;
            };
            if self.forged_tier(&name, ctx).await?.is_some() {
                continue;
            }
            out.push(spec.clone());
        }
        Ok(out)
    }

    /// The index of every registered hub tool, rebuilt when the hub's
    /// tools change.
    fn hub_index(&self) -> Result<Arc<MemoryIndex>, StoreError> {
        let tools = self.hub_tools();
        let generation = self.hub_generation();
        let mut held = lock(&self.inner.hub_index);
        if let Some((g, index)) = held.as_ref()
            && *g == generation
            && index.len() == tools.len()
        {
            return Ok(index.clone());
        }
        let docs: Vec<(String, SearchDoc)> = tools
            .iter()
            .map(|t| {
                let mut doc =
                    SearchDoc::of(&t.name, &serde_json::json!({"description": t.description}));
                doc.params = temper_store::params_text(&t.input_schema);
                (t.name.clone(), doc)
            })
            .collect();
        let index = Arc::new(MemoryIndex::new(&docs)?);
        *held = Some((generation, index.clone()));
        Ok(index)
    }
}

fn found_forged(t: &ToolInfo, score: f64) -> FoundTool {
    FoundTool {
        name: t.name.clone(),
        description: clip(&t.description, MAX_FOUND_DESCRIPTION),
        signature: signature(&t.name, &t.input_schema, &t.output_schema),
        tier: FoundTier::of(t.tier),
        score,
    }
}

fn found_hub(h: &NativeToolSpec, score: f64) -> FoundTool {
    FoundTool {
        name: h.name.clone(),
        description: clip(&h.description, MAX_FOUND_DESCRIPTION),
        signature: signature(&h.name, &h.input_schema, &h.output_schema),
        tier: FoundTier::Hub,
        score,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_bounds_characters() {
        assert_eq!(clip("short  text", 200), "short text");
        let long = "é".repeat(300);
        let c = clip(&long, MAX_FOUND_DESCRIPTION);
        assert_eq!(c.chars().count(), MAX_FOUND_DESCRIPTION);
        assert!(c.ends_with('…'));
    }
}
