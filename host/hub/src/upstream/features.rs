//! An upstream's resources and prompts, as a gateway serves them: listed
//! from the upstream on demand (every page), the ones the tools file
//! selects (`resources = [...]`, `prompts = [...]`), with the upstream's
//! `prefix` put before each resource's `uri`, template's `uriTemplate`,
//! and each one's `name`; read and got by those exposed names, routed back
//! to the upstream with the prefix taken off. Everything else of the
//! upstream's answers passes through as it came.
//!
//! A stdio upstream's requests go on the direct path (`direct.rs`), whose
//! answers are the upstream's own JSON; a Streamable HTTP upstream's go
//! through rmcp's client, whose answers are the upstream's as rmcp models
//! them (written back as JSON: members rmcp does not model are lost).

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{MAX_PAGES, Upstream, UpstreamError, direct, end_reason};
use crate::config::ToolSelection;

/// A list of an upstream's that changed (its
/// `notifications/{tools,resources,prompts}/list_changed`), announced to
/// Temper's callers as the same notification. Tools are announced once
/// they are listed again; resources and prompts only for an upstream the
/// tools file selects any of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListChange {
    /// Its tools.
    Tools,
    /// Its resources (or resource templates).
    Resources,
    /// Its prompts.
    Prompts,
}

impl ListChange {
    /// The notification a caller hears.
    pub fn method(self) -> &'static str {
        match self {
            Self::Tools => "notifications/tools/list_changed",
            Self::Resources => "notifications/resources/list_changed",
            Self::Prompts => "notifications/prompts/list_changed",
        }
    }
}

/// What an upstream offers besides tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// `resources/list` and `resources/read`.
    Resources,
    /// `resources/templates/list`.
    ResourceTemplates,
    /// `prompts/list` and `prompts/get`.
    Prompts,
}

impl Feature {
    /// The listing method.
    fn list_method(self) -> &'static str {
        match self {
            Self::Resources => "resources/list",
            Self::ResourceTemplates => "resources/templates/list",
            Self::Prompts => "prompts/list",
        }
    }

    /// The member of the listing's result that holds the items.
    fn items_key(self) -> &'static str {
        match self {
            Self::Resources => "resources",
            Self::ResourceTemplates => "resourceTemplates",
            Self::Prompts => "prompts",
        }
    }

    /// The member of an item that is selected by and carries the prefix
    /// (besides `name`).
    fn key(self) -> &'static str {
        match self {
            Self::Resources => "uri",
            Self::ResourceTemplates => "uriTemplate",
            Self::Prompts => "name",
        }
    }
}

impl Upstream {
    /// Whether the tools file selects any of this feature.
    pub fn offers(&self, feature: Feature) -> bool {
        let cfg = self.config();
        let selection = match feature {
            Feature::Resources | Feature::ResourceTemplates => &cfg.resources,
            Feature::Prompts => &cfg.prompts,
        };
        !matches!(selection, ToolSelection::None)
    }

    /// Sends `method` with `params` and waits for its result, as the
    /// upstream wrote it, within `timeout_ms`.
    async fn request_raw(
        &self,
        method: &str,
        params: &Map<String, Value>,
    ) -> Result<Box<RawValue>, UpstreamError> {
        let shared = &self.shared;
        let fail = |message: String| UpstreamError::Request {
            upstream: shared.config.name.clone(),
            method: method.to_string(),
            message: shared.redact(message),
        };
        let conn = crate::lock(&shared.conn).clone();
        let Some(conn) = conn else {
            return Err(UpstreamError::Unavailable {
                upstream: shared.config.name.clone(),
                reason: crate::lock(&shared.down).clone(),
            });
        };
        let timeout = shared.config.timeout;
        let Some(direct) = conn.direct.as_ref().filter(|d| d.enabled()) else {
            return match tokio::time::timeout(timeout, request_rmcp(&conn, method, params)).await {
                Ok(result) => result.map_err(fail),
                Err(_) => Err(fail(format!("no answer within {} ms", timeout.as_millis()))),
            };
        };
        match direct.request(method, params, None, timeout).await {
            Ok(direct::Reply::Result(raw)) => Ok(raw),
            Ok(direct::Reply::Error(message)) => Err(fail(message)),
            Err(direct::NoReply::Timeout) => {
                Err(fail(format!("no answer within {} ms", timeout.as_millis())))
            }
            Err(direct::NoReply::Gone(e)) => {
                let reason =
                    end_reason(&conn, e.unwrap_or_else(|| "connection closed".into())).await;
                Err(fail(reason))
            }
        }
    }
}

/// Sends the resources or prompts request `method` with `params` through
/// rmcp's client (a Streamable HTTP upstream): its result written as JSON,
/// or what failed.
async fn request_rmcp(
    conn: &super::Conn,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Box<RawValue>, String> {
    use rmcp::model::{
        CompleteRequestParams, GetPromptRequestParams, PaginatedRequestParams,
        ReadResourceRequestParams,
    };
    fn read<T: serde::de::DeserializeOwned>(params: &Map<String, Value>) -> Result<T, String> {
        serde_json::from_value(Value::Object(params.clone()))
            .map_err(|e| format!("Temper cannot send these params: {e}"))
    }
    fn written<T: serde::Serialize, E: std::fmt::Display>(
        result: Result<T, E>,
    ) -> Result<Box<RawValue>, String> {
        let result = result.map_err(|e| e.to_string())?;
        serde_json::to_string(&result)
            .ok()
            .and_then(|text| RawValue::from_string(text).ok())
            .ok_or_else(|| "its result could not be written as JSON".to_string())
    }
    let page = || -> Result<Option<PaginatedRequestParams>, String> {
        if params.is_empty() {
            Ok(None)
        } else {
            read(params).map(Some)
        }
    };
    let peer = conn.service.peer();
    match method {
        "resources/list" => written(peer.list_resources(page()?).await),
        "resources/templates/list" => written(peer.list_resource_templates(page()?).await),
        "prompts/list" => written(peer.list_prompts(page()?).await),
        "resources/read" => written(
            peer.read_resource(read::<ReadResourceRequestParams>(params)?)
                .await,
        ),
        "prompts/get" => written(
            peer.get_prompt(read::<GetPromptRequestParams>(params)?)
                .await,
        ),
        "completion/complete" => {
            written(peer.complete(read::<CompleteRequestParams>(params)?).await)
        }
        other => Err(format!("{other} is not a resources or prompts method")),
    }
}

impl Upstream {
    /// The upstream's items of `feature` the tools file selects, every page,
    /// each with the exposed names (the prefix before its `name` and its
    /// `uri` or `uriTemplate`).
    pub async fn list_feature(
        &self,
        feature: Feature,
    ) -> Result<Vec<Map<String, Value>>, UpstreamError> {
        if !self.offers(feature) {
            return Ok(Vec::new());
        }
        let method = feature.list_method();
        let mut items = Vec::new();
        let mut params = Map::new();
        for _ in 0..MAX_PAGES {
            let raw = self.request_raw(method, &params).await?;
            let mut page: Map<String, Value> =
                serde_json::from_str(raw.get()).map_err(|e| UpstreamError::Request {
                    upstream: self.name().to_string(),
                    method: method.to_string(),
                    message: format!("sent a result Temper does not read: {e}"),
                })?;
            if let Some(Value::Array(listed)) = page.remove(feature.items_key()) {
                for item in listed {
                    let Value::Object(mut item) = item else {
                        continue;
                    };
                    let Some(key) = item.get(feature.key()).and_then(Value::as_str) else {
                        continue;
                    };
                    if !self.selects(feature, key) {
                        continue;
                    }
                    self.prefix_member(&mut item, feature.key());
                    if feature != Feature::Prompts {
                        self.prefix_member(&mut item, "name");
                    }
                    items.push(item);
                }
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(cursor) => {
                    params.insert("cursor".into(), Value::String(cursor.to_string()));
                }
                None => return Ok(items),
            }
        }
        Err(UpstreamError::Request {
            upstream: self.name().to_string(),
            method: method.to_string(),
            message: format!("listed more than {MAX_PAGES} pages"),
        })
    }

    /// Puts the prefix before the string member `key` of `item`.
    fn prefix_member(&self, item: &mut Map<String, Value>, key: &str) {
        let prefix = &self.config().prefix;
        if prefix.is_empty() {
            return;
        }
        if let Some(Value::String(s)) = item.get_mut(key) {
            *s = format!("{prefix}{s}");
        }
    }

    /// Whether the tools file selects the upstream's item `key` (a URI, a
    /// URI template or a prompt name) of `feature`. A resource URI is
    /// selected when it is listed, or a listed template produces it.
    fn selects(&self, feature: Feature, key: &str) -> bool {
        let cfg = self.config();
        match feature {
            Feature::Prompts => cfg.prompts.selects(key),
            Feature::ResourceTemplates => cfg.resources.selects(key),
            Feature::Resources => match &cfg.resources {
                ToolSelection::None => false,
                ToolSelection::All => true,
                ToolSelection::Only(list) => {
                    list.iter().any(|s| s == key || template_matches(s, key))
                }
            },
        }
    }

    /// The upstream's own name for the exposed `name` of a selected item
    /// of `feature` (the prefix taken off); `None` when this upstream does
    /// not expose it.
    pub fn remote_item(&self, feature: Feature, name: &str) -> Option<String> {
        if !self.offers(feature) {
            return None;
        }
        let remote = name.strip_prefix(self.config().prefix.as_str())?;
        self.selects(feature, remote).then(|| remote.to_string())
    }

    /// Reads the resource whose exposed URI is `uri`: the upstream's
    /// result, each content's `uri` with the exposed prefix.
    pub async fn read_resource(&self, uri: &str) -> Result<Map<String, Value>, UpstreamError> {
        let Some(remote) = self.remote_item(Feature::Resources, uri) else {
            return Err(UpstreamError::Request {
                upstream: self.name().to_string(),
                method: "resources/read".into(),
                message: format!("does not expose resource {uri:?}"),
            });
        };
        let mut params = Map::new();
        params.insert("uri".into(), Value::String(remote));
        let raw = self.request_raw("resources/read", &params).await?;
        let mut result: Map<String, Value> =
            serde_json::from_str(raw.get()).map_err(|e| UpstreamError::Request {
                upstream: self.name().to_string(),
                method: "resources/read".into(),
                message: format!("sent a result Temper does not read: {e}"),
            })?;
        if let Some(Value::Array(contents)) = result.get_mut("contents") {
            for content in contents.iter_mut() {
                if let Value::Object(content) = content {
                    self.prefix_member(content, "uri");
                }
            }
        }
        Ok(result)
    }

    /// Gets the prompt whose exposed name is `name` with `arguments`: the
    /// upstream's result as it came.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<&Value>,
    ) -> Result<Map<String, Value>, UpstreamError> {
        let Some(remote) = self.remote_item(Feature::Prompts, name) else {
            return Err(UpstreamError::Request {
                upstream: self.name().to_string(),
                method: "prompts/get".into(),
                message: format!("does not expose prompt {name:?}"),
            });
        };
        let mut params = Map::new();
        params.insert("name".into(), Value::String(remote));
        if let Some(arguments) = arguments {
            params.insert("arguments".into(), arguments.clone());
        }
        let raw = self.request_raw("prompts/get", &params).await?;
        serde_json::from_str(raw.get()).map_err(|e| UpstreamError::Request {
            upstream: self.name().to_string(),
            method: "prompts/get".into(),
            message: format!("sent a result Temper does not read: {e}"),
        })
    }
}

impl Upstream {
    /// Asks the upstream to complete an argument (`completion/complete`)
    /// of the prompt (`feature` = prompts) or resource template (resource
    /// templates) whose exposed name is `name`: `params` as the caller sent
    /// them, the reference's name or URI template with the prefix taken
    /// off; the upstream's result as it came.
    pub async fn complete(
        &self,
        feature: Feature,
        name: &str,
        params: &Map<String, Value>,
    ) -> Result<Map<String, Value>, UpstreamError> {
        const METHOD: &str = "completion/complete";
        let fail = |message: String| UpstreamError::Request {
            upstream: self.name().to_string(),
            method: METHOD.into(),
            message,
        };
        let Some(remote) = self.remote_item(feature, name) else {
            return Err(fail(format!("does not expose {name:?}")));
        };
        let key = if feature == Feature::Prompts {
            "name"
        } else {
            "uri"
        };
        let mut params = params.clone();
        params.remove("_meta");
        if let Some(Value::Object(reference)) = params.get_mut("ref") {
            reference.insert(key.into(), Value::String(remote));
        }
        let raw = self.request_raw(METHOD, &params).await?;
        serde_json::from_str(raw.get())
            .map_err(|e| fail(format!("sent a result Temper does not read: {e}")))
    }
}

/// Whether the URI template `template` (RFC 6570 level 1 and `{+var}`:
/// `{var}` stands for a non-empty run of characters without `/`, `{+var}`
/// for any non-empty run) produces `uri`. A template without a variable
/// matches nothing (a plain URI is compared as itself). Templates of more
/// than 8 variables, and URIs over 4096 bytes, match nothing (the search
/// backtracks).
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut tokens = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        if open > 0 {
            tokens.push(Token::Literal(&rest[..open]));
        }
        tokens.push(Token::Var(rest[open + 1..open + close].starts_with('+')));
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        tokens.push(Token::Literal(rest));
    }
    let vars = tokens.iter().filter(|t| matches!(t, Token::Var(_))).count();
    vars > 0 && vars <= 8 && uri.len() <= 4096 && matches_tokens(&tokens, uri)
}

enum Token<'a> {
    Literal(&'a str),
    /// A variable; `true` when reserved (`{+var}`: may hold `/`).
    Var(bool),
}

fn matches_tokens(tokens: &[Token<'_>], uri: &str) -> bool {
    match tokens.split_first() {
        None => uri.is_empty(),
        Some((Token::Literal(l), rest)) => uri
            .strip_prefix(l)
            .is_some_and(|after| matches_tokens(rest, after)),
        Some((Token::Var(reserved), rest)) => {
            let ends = uri
                .char_indices()
                .map(|(i, _)| i)
                .skip(1)
                .chain(std::iter::once(uri.len()));
            for i in ends.filter(|&i| i > 0) {
                if !reserved && uri[..i].contains('/') {
                    return false;
                }
                if matches_tokens(rest, &uri[i..]) {
                    return true;
                }
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::template_matches;

    #[test]
    fn templates_match_the_uris_they_produce() {
        let t = "demo://resource/dynamic/text/{resourceId}";
        assert!(template_matches(t, "demo://resource/dynamic/text/7"));
        assert!(!template_matches(t, "demo://resource/dynamic/text/"));
        assert!(!template_matches(t, "demo://resource/dynamic/text/7/8"));
        assert!(!template_matches(t, "demo://resource/dynamic/blob/7"));
        assert!(template_matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(template_matches("x://{a}/y/{b}.json", "x://1/y/2.json"));
        assert!(!template_matches("x://{a}/y/{b}.json", "x://1/z/2.json"));
        assert!(!template_matches("x://{a}/y/{b}.json", "x://1/y/2.txt"));
        // No variable: not a template.
        assert!(!template_matches("x://a", "x://a"));
    }
}
