//! The tool hub's upstream resources and prompts, served by the gateway:
//! `resources/list`, `resources/templates/list`, `resources/read`,
//! `prompts/list`, `prompts/get`. An item is served when the tools file
//! selects it (`resources = [...]`, `prompts = [...]` of its upstream) and
//! the host policy's `[resources] allow` or `[prompts] allow` lists its
//! exposed URI, URI template or name (deny by default), narrowed by the
//! caller's token (`resources`, `prompts`). Names and URIs carry the
//! upstream's prefix and route back to it; everything else of the
//! upstream's answers passes through as it came. One page: no cursor.

use serde_json::{Map, Value};
use temper_hub::Feature;

use super::Handler;
use crate::jsonrpc::RpcError;

/// MCP's error code for a resource that does not exist.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

impl Handler {
    /// Answers a resources or prompts method; `None` for any other method.
    pub(super) async fn hub_feature(
        &self,
        method: &str,
        params: Option<&Value>,
    ) -> Option<Result<Value, RpcError>> {
        let answer = match method {
            "resources/list" => self.list_feature(Feature::Resources).await,
            "resources/templates/list" => self.list_feature(Feature::ResourceTemplates).await,
            "prompts/list" => self.list_feature(Feature::Prompts).await,
            "resources/read" => self.read_resource(params).await,
            "prompts/get" => self.get_prompt(params).await,
            "completion/complete" => self.complete(params).await,
            _ => return None,
        };
        Some(answer)
    }

    /// Whether this caller may use the item `name` of `feature`: the host
    /// policy allows it and the caller's narrowing (if any) does too.
    fn feature_allowed(&self, feature: Feature, name: &str) -> bool {
        let policy = self.forge.runtime().policy();
        let (allow, narrowed) = match feature {
            Feature::Resources | Feature::ResourceTemplates => {
                (&policy.resources, &self.resources_allow)
            }
            Feature::Prompts => (&policy.prompts, &self.prompts_allow),
        };
        allow.allows(name) && narrowed.as_ref().is_none_or(|n| n.allows(name))
    }

    async fn list_feature(&self, feature: Feature) -> Result<Value, RpcError> {
        let items = match self.forge.hub() {
            Some(hub) => hub.list_feature(feature).await,
            None => Vec::new(),
        };
        let key = match feature {
            Feature::Resources => "uri",
            Feature::ResourceTemplates => "uriTemplate",
            Feature::Prompts => "name",
        };
        let items: Vec<Value> = items
            .into_iter()
            .filter(|item| {
                item.get(key)
                    .and_then(Value::as_str)
                    .is_some_and(|name| self.feature_allowed(feature, name))
            })
            .map(Value::Object)
            .collect();
        let member = match feature {
            Feature::Resources => "resources",
            Feature::ResourceTemplates => "resourceTemplates",
            Feature::Prompts => "prompts",
        };
        let mut result = Map::new();
        result.insert(member.into(), Value::Array(items));
        Ok(Value::Object(result))
    }

    async fn read_resource(&self, params: Option<&Value>) -> Result<Value, RpcError> {
        let uri = params
            .and_then(|p| p.get("uri"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                RpcError::invalid_params("resources/read: params.uri must be a string")
            })?;
        let not_found = || RpcError {
            code: RESOURCE_NOT_FOUND,
            message: format!("resource not found: {uri:?}"),
            data: None,
        };
        if !self.feature_allowed(Feature::Resources, uri) {
            return Err(not_found());
        }
        let hub = self.forge.hub().ok_or_else(not_found)?;
        match hub.read_resource(uri).await {
            Ok(result) => Ok(Value::Object(result)),
            Err(temper_hub::HubError::NoSuch { .. }) => Err(not_found()),
            Err(e) => Err(RpcError::internal(e.to_string())),
        }
    }

    /// `completion/complete` of an argument of an upstream's prompt
    /// (`ref/prompt`) or resource template (`ref/resource`), both by their
    /// exposed names, which the caller may use: the upstream's answer.
    async fn complete(&self, params: Option<&Value>) -> Result<Value, RpcError> {
        const METHOD: &str = "completion/complete";
        let params = params.and_then(Value::as_object).ok_or_else(|| {
            RpcError::invalid_params(format!("{METHOD}: params must be an object"))
        })?;
        let reference = params.get("ref").and_then(Value::as_object);
        let (feature, key) = match reference
            .and_then(|r| r.get("type"))
            .and_then(Value::as_str)
        {
            Some("ref/prompt") => (Feature::Prompts, "name"),
            Some("ref/resource") => (Feature::ResourceTemplates, "uri"),
            _ => {
                return Err(RpcError::invalid_params(format!(
                    "{METHOD}: params.ref.type must be \"ref/prompt\" or \"ref/resource\""
                )));
            }
        };
        let name = reference
            .and_then(|r| r.get(key))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                RpcError::invalid_params(format!("{METHOD}: params.ref.{key} must be a string"))
            })?;
        if !params.get("argument").is_some_and(Value::is_object) {
            return Err(RpcError::invalid_params(format!(
                "{METHOD}: params.argument must be an object"
            )));
        }
        let unknown = || RpcError::invalid_params(format!("{METHOD}: unknown reference {name:?}"));
        if !self.feature_allowed(feature, name) {
            return Err(unknown());
        }
        let hub = self.forge.hub().ok_or_else(unknown)?;
        match hub.complete(feature, name, params).await {
            Ok(result) => Ok(Value::Object(result)),
            Err(temper_hub::HubError::NoSuch { .. }) => Err(unknown()),
            Err(e) => Err(RpcError::internal(e.to_string())),
        }
    }

    async fn get_prompt(&self, params: Option<&Value>) -> Result<Value, RpcError> {
        let name = params
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("prompts/get: params.name must be a string"))?;
        let arguments = params
            .and_then(|p| p.get("arguments"))
            .filter(|a| !a.is_null());
        if arguments.is_some_and(|a| !a.is_object()) {
            return Err(RpcError::invalid_params(
                "prompts/get: params.arguments must be an object",
            ));
        }
        let unknown = || RpcError::invalid_params(format!("unknown prompt {name:?}"));
        if !self.feature_allowed(Feature::Prompts, name) {
            return Err(unknown());
        }
        let hub = self.forge.hub().ok_or_else(unknown)?;
        match hub.get_prompt(name, arguments).await {
            Ok(result) => Ok(Value::Object(result)),
            Err(temper_hub::HubError::NoSuch { .. }) => Err(unknown()),
            Err(e) => Err(RpcError::internal(e.to_string())),
        }
    }
}
