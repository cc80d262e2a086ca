//! The results and notifications the protocol layer produces, as serde
//! types: a field renamed or dropped by the next revision is a compile
//! error here rather than an interop bug found by a client.
//!
//! Tool definitions and tool results keep their JSON (they carry the
//! engine's schemas and outputs verbatim); what surrounds them is typed.

use serde::Serialize;
use serde_json::Value;

use super::{ALL_PROTOCOL_VERSIONS, meta};

/// A program's name and version (`Implementation`).
#[derive(Debug, Clone, Serialize)]
pub struct Implementation {
    /// `temper`.
    pub name: &'static str,
    /// The crate's version.
    pub version: &'static str,
}

/// This server's [`Implementation`].
pub const SERVER_INFO: Implementation = Implementation {
    name: "temper",
    version: env!("CARGO_PKG_VERSION"),
};

/// The guidance for models that `initialize` and `server/discover` carry.
pub const INSTRUCTIONS: &str = "Call forge_tool to create a tool when none of the listed tools fits; \
    once forged it is listed and callable for the rest of this session.";

/// `capabilities.tools`, `.resources`, `.prompts`: a list whose changes
/// clients hear of (forges and promotions, the hub upstreams' own
/// `list_changed`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListCapability {
    /// The list changes, and clients hear of it.
    pub list_changed: bool,
}

/// What this server offers: tools, whose list changes; resources and
/// prompts only when its tool hub's upstreams serve some (the tools file
/// selects them), with completions of their arguments. A capability it
/// does not serve is left out, so a client does not ask for empty lists.
#[derive(Debug, Clone, Serialize)]
pub struct ServerCapabilities {
    /// Tools.
    pub tools: ListCapability,
    /// Resources (`resources/list`, `resources/templates/list`,
    /// `resources/read`), when served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ListCapability>,
    /// Prompts (`prompts/list`, `prompts/get`), when served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompts: Option<ListCapability>,
    /// Completions of the hub upstreams' prompt and resource-template
    /// arguments (`completion/complete`), when either is served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completions: Option<Empty>,
}

/// A capability without options (`{}`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Empty {}

/// Tools only: a server with no hub resources or prompts.
pub const CAPABILITIES: ServerCapabilities = ServerCapabilities::served(false, false);

impl ServerCapabilities {
    /// Tools, and resources and prompts when they are `served`.
    pub const fn served(resources: bool, prompts: bool) -> Self {
        const LIST: ListCapability = ListCapability { list_changed: true };
        Self {
            tools: LIST,
            resources: if resources { Some(LIST) } else { None },
            prompts: if prompts { Some(LIST) } else { None },
            completions: if resources || prompts {
                Some(Empty {})
            } else {
                None
            },
        }
    }
}

/// The legacy `initialize` result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The revision the session speaks.
    pub protocol_version: &'static str,
    /// [`CAPABILITIES`].
    pub capabilities: ServerCapabilities,
    /// [`SERVER_INFO`].
    pub server_info: Implementation,
    /// [`INSTRUCTIONS`].
    pub instructions: &'static str,
}

/// A modern result's kind (`resultType`); this server's are all complete.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultType {
    /// The final result.
    Complete,
}

/// Who may cache a cacheable result (`cacheScope`).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// The same for every caller.
    Public,
    /// Depends on the caller (its token, agent and session).
    Private,
}

/// The `_meta` of a modern result: who answered.
#[derive(Debug, Clone, Serialize)]
pub struct ResultMeta {
    /// [`SERVER_INFO`].
    #[serde(rename = "io.modelcontextprotocol/serverInfo")]
    pub server_info: Implementation,
}

/// The `server/discover` result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// Complete.
    pub result_type: ResultType,
    /// [`ALL_PROTOCOL_VERSIONS`].
    pub supported_versions: &'static [&'static str],
    /// [`CAPABILITIES`].
    pub capabilities: ServerCapabilities,
    /// [`INSTRUCTIONS`].
    pub instructions: &'static str,
    /// How long the answer stays fresh.
    pub ttl_ms: u64,
    /// Public: the same for every caller.
    pub cache_scope: CacheScope,
    /// [`ResultMeta`].
    #[serde(rename = "_meta")]
    pub meta: ResultMeta,
}

/// How long a `server/discover` answer stays fresh: ten minutes (it
/// changes only with the server's version).
pub const DISCOVER_TTL_MS: u64 = 10 * 60 * 1000;

/// The `server/discover` result of a server with `capabilities`.
pub fn discover(capabilities: ServerCapabilities) -> DiscoverResult {
    DiscoverResult {
        result_type: ResultType::Complete,
        supported_versions: ALL_PROTOCOL_VERSIONS,
        capabilities,
        instructions: INSTRUCTIONS,
        ttl_ms: DISCOVER_TTL_MS,
        cache_scope: CacheScope::Public,
        meta: ResultMeta {
            server_info: SERVER_INFO,
        },
    }
}

/// Caching hints of a modern list result.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheHints {
    /// Freshness, ms.
    pub ttl_ms: u64,
    /// Who may cache it.
    pub cache_scope: CacheScope,
}

/// `tools/list`'s hints: the list depends on the caller's token, agent and
/// session (private), and a forge in the session changes it at once
/// (immediately stale: `subscriptions/listen` says when to re-list).
pub const TOOLS_LIST_CACHE: CacheHints = CacheHints {
    ttl_ms: 0,
    cache_scope: CacheScope::Private,
};

/// The hub's resources and prompts results' hints (`resources/list`,
/// `resources/templates/list`, `prompts/list`, `resources/read`: the
/// 2026-07-28 schema requires them there): what a caller may see depends on
/// its token (private), and an upstream's `list_changed` or its resource's
/// content may change at any time (immediately stale).
pub const HUB_FEATURE_CACHE: CacheHints = CacheHints {
    ttl_ms: 0,
    cache_scope: CacheScope::Private,
};

/// Whether a modern result of `method` carries caching hints besides
/// `tools/list`'s: the hub's resources and prompts lists and reads.
pub fn hub_feature_cacheable(method: &str) -> bool {
    matches!(
        method,
        "resources/list" | "resources/templates/list" | "prompts/list" | "resources/read"
    )
}

/// Sets `hints` (`ttlMs`, `cacheScope`) on a result object, in place of any
/// the upstream's answer had.
pub fn set_cache_hints(result: &mut Value, hints: CacheHints) {
    if let Some(obj) = result.as_object_mut() {
        obj.insert("ttlMs".into(), Value::from(hints.ttl_ms));
        obj.insert("cacheScope".into(), to_value(&hints.cache_scope));
    }
}

/// The `tools/list` result: every tool, no pagination; the caching hints
/// in the modern revision only.
#[derive(Debug, Clone, Serialize)]
pub struct ListToolsResult {
    /// The tool definitions, in a deterministic order.
    pub tools: Vec<Value>,
    /// [`TOOLS_LIST_CACHE`] for modern requests.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheHints>,
}

/// `error.data` of an `UnsupportedProtocolVersionError`.
#[derive(Debug, Clone, Serialize)]
pub struct UnsupportedVersionData<'a> {
    /// [`ALL_PROTOCOL_VERSIONS`].
    pub supported: &'static [&'static str],
    /// What the client asked for.
    pub requested: &'a str,
}

/// [`UnsupportedVersionData`] for `requested`, as JSON.
pub fn unsupported_version_data(requested: &str) -> Value {
    to_value(&UnsupportedVersionData {
        supported: ALL_PROTOCOL_VERSIONS,
        requested,
    })
}

/// Turns a result into a modern one: `resultType: "complete"` and
/// `_meta[serverInfo]` (kept next to any `_meta` keys it has).
pub fn complete(result: &mut Value) {
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    obj.insert("resultType".into(), to_value(&ResultType::Complete));
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(meta::SERVER_INFO.into(), to_value(&SERVER_INFO));
    }
}

/// The notification types a `subscriptions/listen` asks for, or that the
/// server honors (`SubscriptionFilter`): the tools, resources and prompts
/// lists' changes (the last two are the hub upstreams').
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionFilter {
    /// `notifications/tools/list_changed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_list_changed: Option<bool>,
    /// `notifications/resources/list_changed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources_list_changed: Option<bool>,
    /// `notifications/prompts/list_changed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompts_list_changed: Option<bool>,
}

impl SubscriptionFilter {
    /// What this server honors of a request's `params.notifications`: the
    /// tools, resources and prompts `list_changed` asked for (resource
    /// subscriptions are not honored).
    pub fn honored(params: Option<&Value>) -> Self {
        let asked = |key: &str| {
            (params
                .and_then(|p| p.get("notifications"))
                .and_then(|n| n.get(key))
                .and_then(Value::as_bool)
                == Some(true))
            .then_some(true)
        };
        Self {
            tools_list_changed: asked("toolsListChanged"),
            resources_list_changed: asked("resourcesListChanged"),
            prompts_list_changed: asked("promptsListChanged"),
        }
    }

    /// Whether tools `list_changed` is honored.
    pub fn tools(&self) -> bool {
        self.tools_list_changed == Some(true)
    }

    /// Whether the `list_changed` notification `method` is honored.
    pub fn wants(&self, method: &str) -> bool {
        let flag = match method {
            "notifications/tools/list_changed" => self.tools_list_changed,
            "notifications/resources/list_changed" => self.resources_list_changed,
            "notifications/prompts/list_changed" => self.prompts_list_changed,
            _ => None,
        };
        flag == Some(true)
    }
}

/// The `_meta` of a message on a subscription's stream.
#[derive(Debug, Clone, Serialize)]
pub struct SubscriptionMeta<'a> {
    /// The `subscriptions/listen` request's id.
    #[serde(rename = "io.modelcontextprotocol/subscriptionId")]
    pub subscription_id: &'a Value,
}

#[derive(Serialize)]
struct AcknowledgedParams<'a> {
    #[serde(rename = "_meta")]
    meta: SubscriptionMeta<'a>,
    notifications: &'a SubscriptionFilter,
}

#[derive(Serialize)]
struct StampedParams<'a> {
    #[serde(rename = "_meta")]
    meta: SubscriptionMeta<'a>,
}

#[derive(Serialize)]
struct Notification<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: P,
}

/// `notifications/subscriptions/acknowledged` for subscription `id`,
/// honoring `filter`: the first message of its stream.
pub fn acknowledged(id: &Value, filter: &SubscriptionFilter) -> Value {
    to_value(&Notification {
        jsonrpc: "2.0",
        method: "notifications/subscriptions/acknowledged",
        params: AcknowledgedParams {
            meta: SubscriptionMeta {
                subscription_id: id,
            },
            notifications: filter,
        },
    })
}

/// `method` (e.g. `notifications/tools/list_changed`) as a notification of
/// subscription `id`.
pub fn subscription_note(method: &str, id: &Value) -> Value {
    to_value(&Notification {
        jsonrpc: "2.0",
        method,
        params: StampedParams {
            meta: SubscriptionMeta {
                subscription_id: id,
            },
        },
    })
}

/// Serializes one of the types above (they hold strings, numbers and JSON
/// values only, so this cannot fail).
fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("protocol types serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn discover_has_the_specs_shape() {
        let d = to_value(&discover(CAPABILITIES));
        assert_eq!(d["resultType"], "complete");
        assert_eq!(d["supportedVersions"][0], "2026-07-28");
        assert_eq!(d["capabilities"], json!({"tools": {"listChanged": true}}));
        assert_eq!(d["cacheScope"], "public");
        assert!(d["ttlMs"].as_u64().is_some());
        assert_eq!(d["_meta"][meta::SERVER_INFO]["name"], "temper");
        assert!(d["instructions"].as_str().is_some());
    }

    #[test]
    fn only_served_capabilities_are_advertised() {
        let caps = |r, p| to_value(&ServerCapabilities::served(r, p));
        assert_eq!(caps(false, false), json!({"tools": {"listChanged": true}}));
        assert_eq!(
            caps(true, false),
            json!({"tools": {"listChanged": true}, "resources": {"listChanged": true}, "completions": {}})
        );
        assert_eq!(
            caps(false, true),
            json!({"tools": {"listChanged": true}, "prompts": {"listChanged": true}, "completions": {}})
        );
    }

    #[test]
    fn hub_feature_results_get_cache_hints() {
        for method in [
            "resources/list",
            "resources/templates/list",
            "prompts/list",
            "resources/read",
        ] {
            assert!(hub_feature_cacheable(method), "{method}");
        }
        for method in ["prompts/get", "tools/call", "completion/complete"] {
            assert!(!hub_feature_cacheable(method), "{method}");
        }
        let mut read = json!({"contents": [], "ttlMs": 60000, "cacheScope": "public"});
        set_cache_hints(&mut read, HUB_FEATURE_CACHE);
        assert_eq!(
            read,
            json!({"contents": [], "ttlMs": 0, "cacheScope": "private"})
        );
    }

    #[test]
    fn list_hints_only_when_asked() {
        let legacy = to_value(&ListToolsResult {
            tools: vec![],
            cache: None,
        });
        assert_eq!(legacy, json!({"tools": []}));
        let modern = to_value(&ListToolsResult {
            tools: vec![],
            cache: Some(TOOLS_LIST_CACHE),
        });
        assert_eq!(
            modern,
            json!({"tools": [], "ttlMs": 0, "cacheScope": "private"})
        );
    }

    #[test]
    fn completes_results_and_keeps_their_meta() {
        let mut r = json!({"content": [], "_meta": {"traceparent": "x"}});
        complete(&mut r);
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["_meta"]["traceparent"], "x");
        assert_eq!(r["_meta"][meta::SERVER_INFO]["name"], "temper");
    }

    #[test]
    fn subscription_messages() {
        let id = json!("listen-1");
        let f = SubscriptionFilter::honored(Some(&json!({"notifications": {
            "toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": ["file:///x"]
        }})));
        assert!(f.tools());
        assert!(f.wants("notifications/prompts/list_changed"));
        assert!(!f.wants("notifications/resources/list_changed"));
        // Resource subscriptions are not honored: left out of the answer.
        let ack = acknowledged(&id, &f);
        assert_eq!(
            ack,
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"_meta": {meta::SUBSCRIPTION_ID: "listen-1"}, "notifications": {"toolsListChanged": true, "promptsListChanged": true}}})
        );
        let none = SubscriptionFilter::honored(Some(&json!({"notifications": {}})));
        assert!(!none.tools());
        assert_eq!(
            acknowledged(&id, &none)["params"]["notifications"],
            json!({})
        );
        let n = subscription_note("notifications/tools/list_changed", &json!(7));
        assert_eq!(n["params"]["_meta"][meta::SUBSCRIPTION_ID], 7);
        assert_eq!(n["method"], "notifications/tools/list_changed");
    }
}
