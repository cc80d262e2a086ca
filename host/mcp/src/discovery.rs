//! Discovery on the MCP server: `search_tools` and the budgeted
//! `tools/list`.
//!
//! `tools/list` holds the built-in tools and, within the forge's
//! `listBudgetTokens` (tokens counted as characters / 4 of the definitions'
//! JSON), the caller's **working set**: the tools found, loaded or forged
//! in its session (most recent first), then its session's other tools and
//! the tools forged into its session that were promoted, then its agent's
//! and the shared tools it calls most, then the rest by name while room is
//! left. The listing shows the chosen tools in a fixed order (forged by
//! name, then hub by name), so the same working set gives the same bytes.
//! Every tool the caller may see stays callable, listed or not.
//!
//! `search_tools {query, limit?, tier?, capability?}` ranks the tools the
//! caller may see ([`temper_forge::Forge::search_tools`]); those found join
//! the working set and, when that changes it, the caller hears
//! `notifications/tools/list_changed` so a client that calls listed tools
//! only can call them on its next turn.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{Handler, LIST_CHANGED, Notifier};
use crate::jsonrpc::{self, RpcError};
use crate::tools;
use temper_forge::discovery::search::{
    DEFAULT_SEARCH_LIMIT, FoundTier, SearchRequest, SearchScope,
};
use temper_forge::{NativeToolSpec, ToolInfo};
use temper_store::{MAX_SEARCH_LIMIT, SearchTiers};

/// The built-in tool that searches the caller's tools.
pub const SEARCH_TOOL: &str = "search_tools";

/// How many of the agent's most used tools are considered for the list.
const MOST_USED: usize = 64;

/// The tokens of a definition, counted as characters / 4 of its JSON.
pub fn tokens_of(definition: &Value) -> usize {
    definition.to_string().chars().count().div_ceil(4)
}

/// The `search_tools` definition, saying how many tools the caller may
/// call beyond those listed (`more`).
pub fn search_tools_definition(more: usize) -> Value {
    let beyond = match more {
        0 => "Every tool you can call is listed now.".to_string(),
        1 => "1 more tool you can call is not listed.".to_string(),
        n => format!("{n} more tools you can call are not listed."),
    };
    json!({
        "name": SEARCH_TOOL,
        "title": "Search Tools",
        "description": format!(
            "Find tools you can call by the words of what they do (names, descriptions, \
            parameters), before forging one. {beyond} Returns \
            ranked tools (name, description, TypeScript signature, tier, score); the tools found \
            are added to your tool list (tools/list_changed) and can be called at once with \
            tools/call or from run_code. Search with the words of the task (e.g. \"parse csv \
            rows\"), not the same query twice."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": { "type": "string", "description": "What the tool should do, in words" },
                "limit": {
                    "type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT,
                    "description": format!("Most results (default {DEFAULT_SEARCH_LIMIT})"),
                },
                "tier": {
                    "type": "string", "enum": ["session", "agent", "shared", "hub"],
                    "description": "Only tools of this tier",
                },
                "capability": {
                    "type": "string",
                    "description": "Only forged tools granted this capability (e.g. fetch, a host)",
                },
            },
            "required": ["query"],
        },
    })
}

/// What `tools/list` shows beyond the built-ins (see the module docs).
pub(super) struct Listing {
    /// The forged tools listed, by name.
    pub forged: Vec<ToolInfo>,
    /// The hub tools listed, by name.
    pub hub: Vec<NativeToolSpec>,
    /// Their definitions, in listing order.
    pub definitions: Vec<Value>,
    /// How many tools the caller may call that are not listed.
    pub more: usize,
}

impl Handler {
    /// What this caller may search: the tiers its access allows and the
    /// hub tools its grants leave it.
    pub(super) fn search_tiers(&self) -> SearchTiers {
        SearchTiers {
            session: self.access().session,
            agent: self.access().agent,
            shared: self.access().shared,
        }
    }

    /// The working-set listing within the budget, given the forged tools
    /// the caller sees (`visible`) and its hub tools (`hub`, unshadowed).
    pub(super) async fn listing(
        &self,
        visible: Vec<ToolInfo>,
        hub: Vec<NativeToolSpec>,
    ) -> Result<Listing, RpcError> {
        let budget = self.forge.config().list_budget_tokens;
        let internal = |e: temper_store::StoreError| {
            RpcError::internal(format!("cannot read the working set: {e}"))
        };
        let working = self.forge.working_set(&self.ctx).await.map_err(internal)?;
        let used = if self.access().agent || self.access().shared {
            self.forge
                .most_used(&self.ctx, MOST_USED)
                .await
                .map_err(internal)?
        } else {
            Vec::new()
        };
        // The order tools are considered in.
        let mut order: Vec<&str> = Vec::new();
        order.extend(working.iter().map(String::as_str));
        let mut by_name: Vec<&ToolInfo> = visible.iter().collect();
        by_name.sort_by(|a, b| a.name.cmp(&b.name));
        order.extend(
            by_name
                .iter()
                .filter(|t| t.tier == temper_store::Tier::Session)
                .map(|t| t.name.as_str()),
        );
        order.extend(
            by_name
                .iter()
                .filter(|t| t.session_id.as_deref() == Some(self.ctx.session_id.as_str()))
                .map(|t| t.name.as_str()),
        );
        order.extend(used.iter().map(String::as_str));
        order.extend(by_name.iter().map(|t| t.name.as_str()));
        let mut hub_sorted: Vec<&NativeToolSpec> = hub.iter().collect();
        hub_sorted.sort_by(|a, b| a.name.cmp(&b.name));
        order.extend(hub_sorted.iter().map(|h| h.name.as_str()));

        let hub_listed = self.forge.hub_definitions();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut spent = 0usize;
        let mut forged = Vec::new();
        let mut hubs = Vec::new();
        for name in order {
            if budget.saturating_sub(spent) < MIN_DEFINITION_TOKENS {
                break;
            }
            if !seen.insert(name) {
                continue;
            }
            let (definition, pick) = if let Some(t) = visible.iter().find(|t| t.name == name) {
                (tools::registered_tool_definition(t), Pick::Forged(t))
            } else if let Some(h) = hub.iter().find(|h| h.name == name) {
                (
                    tools::hub_tool_definition(h, hub_listed.get(&h.name)),
                    Pick::Hub(h),
                )
            } else {
                continue; // a name of the working set the caller cannot see now
            };
            let cost = tokens_of(&definition);
            if spent + cost > budget {
                continue;
            }
            spent += cost;
            match pick {
                Pick::Forged(t) => forged.push((t.clone(), definition)),
                Pick::Hub(h) => hubs.push((h.clone(), definition)),
            }
        }
        forged.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        hubs.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let more = (visible.len() + hub.len()).saturating_sub(forged.len() + hubs.len());
        let mut definitions = Vec::with_capacity(forged.len() + hubs.len());
        let (forged, hub): (Vec<ToolInfo>, Vec<NativeToolSpec>) = (
            forged
                .into_iter()
                .map(|(t, d)| {
                    definitions.push(d);
                    t
                })
                .collect(),
            hubs.into_iter()
                .map(|(h, d)| {
                    definitions.push(d);
                    h
                })
                .collect(),
        );
        Ok(Listing {
            forged,
            hub,
            definitions,
            more,
        })
    }

    /// `search_tools {query, limit?, tier?, capability?}`.
    pub(super) async fn search_tool(&self, arguments: &Value, notes: &dyn Notifier) -> Value {
        let request = match parse_search(arguments) {
            Ok(r) => r,
            Err(message) => return tools::tool_error("search", &message),
        };
        let hub = self.hub_visible();
        let scope = SearchScope {
            tiers: self.search_tiers(),
            hub: &hub,
        };
        let found = match self
            .forge
            .search_tools_warned(&self.ctx, &request, scope)
            .await
        {
            Ok(found) => found,
            Err(e) => return tools::tool_error("search", &format!("search_tools: {e}")),
        };
        let names: Vec<String> = found.tools.iter().map(|t| t.name.clone()).collect();
        match self.forge.remember(&self.ctx, &names).await {
            Ok(true) => notes.session_note(jsonrpc::notification(LIST_CHANGED, json!({}))),
            Ok(false) => {}
            // The search still answers; the list just does not grow.
            Err(e) => tracing::warn!("search_tools: cannot update the working set: {e}"),
        }
        // `{tools}`, and `warnings` when the semantic ranking failed.
        let value = json!(found);
        tools::tool_result(&value, false)
    }
}

/// Fewer tokens than any tool definition takes: the listing stops there.
const MIN_DEFINITION_TOKENS: usize = 16;

enum Pick<'a> {
    Forged(&'a ToolInfo),
    Hub(&'a NativeToolSpec),
}

/// A `search_tools` request from its arguments, or what is wrong with them.
fn parse_search(arguments: &Value) -> Result<SearchRequest, String> {
    let query = arguments.get("query").and_then(Value::as_str).ok_or(
        "search_tools: arguments.query must be a string (the words of what the tool should do)",
    )?;
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => DEFAULT_SEARCH_LIMIT,
        Some(v) => match v.as_u64() {
            Some(n @ 1..) if n as usize <= MAX_SEARCH_LIMIT => n as usize,
            _ => {
                return Err(format!(
                    "search_tools: arguments.limit must be an integer from 1 to {MAX_SEARCH_LIMIT}"
                ));
            }
        },
    };
    let tier =
        match arguments.get("tier") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_str().and_then(FoundTier::parse).ok_or(
                "search_tools: arguments.tier must be one of session, agent, shared, hub",
            )?),
        };
    let capability = match arguments.get("capability") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(_) => return Err("search_tools: arguments.capability must be a string".into()),
    };
    Ok(SearchRequest {
        query: query.to_owned(),
        limit,
        tier,
        capability,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_arguments_are_checked() {
        let r = parse_search(&json!({"query": "csv"})).unwrap();
        assert_eq!(
            (r.limit, r.tier, r.capability),
            (DEFAULT_SEARCH_LIMIT, None, None)
        );
        let r = parse_search(
            &json!({"query": "csv", "limit": 50, "tier": "hub", "capability": "fetch"}),
        )
        .unwrap();
        assert_eq!((r.limit, r.tier), (50, Some(FoundTier::Hub)));
        for bad in [
            json!({}),
            json!({"query": 3}),
            json!({"query": "x", "limit": 0}),
            json!({"query": "x", "limit": 51}),
            json!({"query": "x", "limit": "5"}),
            json!({"query": "x", "tier": "secret"}),
            json!({"query": "x", "capability": 1}),
        ] {
            assert!(parse_search(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_definition_says_how_many_more() {
        let d = search_tools_definition(996);
        assert!(
            d["description"]
                .as_str()
                .unwrap()
                .contains("996 more tools")
        );
        assert!(tokens_of(&d) < 400, "{}", tokens_of(&d));
    }
}
