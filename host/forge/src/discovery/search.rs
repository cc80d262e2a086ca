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
    pub async fn search_tools(
        &self,
        ctx: &ForgeContext,
        request: &SearchRequest,
        scope: SearchScope<'_>,
    ) -> Result<Vec<FoundTool>, StoreError> {
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
        let semantic = self.semantic(&request.query, &infos, &hub_hits);
        if let Some(s) = &semantic {
            rankings.push(s);
        }
        let fused = fuse_rrf(&rankings);
        Ok(fused
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
            .collect())
    }

    /// The semantic ranking of the lexical candidates, when an embedder is
    /// configured (a failing embedder leaves the lexical ranking alone).
    fn semantic(
        &self,
        query: &str,
        infos: &[ToolInfo],
        hub: &[NativeToolSpec],
    ) -> Option<Vec<String>> {
        let embedder = self.embedder()?;
        let docs: Vec<(String, String)> = infos
            .iter()
            .map(|t| (t.name.clone(), format!("{}: {}", t.name, t.description)))
            .chain(
                hub.iter()
                    .map(|h| (h.name.clone(), format!("{}: {}", h.name, h.description))),
            )
            .collect();
        match semantic_ranking(embedder.as_ref(), query, &docs) {
            Ok(ranked) => Some(ranked),
            Err(e) => {
                tracing::warn!("search_tools: semantic ranking skipped: {e}");
                None
            }
        }
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
