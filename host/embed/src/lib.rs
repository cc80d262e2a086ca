//! What the `temper` CLI and the language bindings (`temper-py`, the Node
//! package) share, so that each of them only translates:
//!
//! - **Opening a forge** from plain options ([`ForgeOptions`],
//!   [`RuntimeOptions`], [`JudgeChoice`]) exactly as `temper` opens one
//!   ([`Opened::open`], [`Opened::attach_hub`]): a tool forged through a
//!   binding has the same artifact id as `temper forge` of the same request.
//! - **Calling a tool by name** as `temper call` does ([`Opened::call`]): a
//!   forged tool the caller sees, else a hub tool of that name.
//! - **Classifying errors** ([`Failure`], [`ErrorKind`]): every typed error
//!   of `temper-forge` and `temper-runtime` maps to one kind (refused with
//!   its stage, timeout, memory, capability with its name, tool failed with
//!   the JS message and line, not found, invalid input with the schema and
//!   where, busy, host), by its variant, never by its text.
//!
//! ```no_run
//! # async fn demo() -> Result<(), temper_embed::Failure> {
//! use temper_embed::{ForgeOptions, JudgeChoice, Opened, RuntimeOptions};
//! let runtime = RuntimeOptions {
//!     policy: temper_embed::load_policy(None)?,
//!     ..Default::default()
//! }
//! .builder()
//! .build()?;
//! let options = ForgeOptions {
//!     store: Some("/tmp/store".into()),
//!     judge: Some(JudgeChoice::Rules),
//!     ..Default::default()
//! };
//! let opened = Opened::open(&options, runtime)?;
//! let request = std::fs::read_to_string("tests/fixtures/seeds/slugify.json").unwrap();
//! let forged = opened.forge_json(&request).await?;
//! let out = opened.call("slugify", &serde_json::json!({"text": "A b"})).await?;
//! # let _ = (forged, out);
//! # Ok(()) }
//! ```

mod classify;
mod open;

pub use classify::{ErrorKind, Failure, first_violation, forge_failure, run_error_kind};
pub use open::{
    ForgeOptions, JudgeChoice, OpenError, Opened, RuntimeOptions, SharedEmbedder, load_policy,
    trust_policy,
};

use serde_json::Value;
use temper_forge::{Forged, Invocation};

/// What [`Opened::call`] ran.
#[derive(Debug, Clone)]
pub enum Called {
    /// A forged tool (session, agent or shared tier).
    Forged(Invocation),
    /// A hub tool (the tools file's), with its output.
    Hub(Value),
}

impl Called {
    /// The tool's output.
    pub fn output(&self) -> &Value {
        match self {
            Called::Forged(inv) => &inv.output,
            Called::Hub(v) => v,
        }
    }

    /// The output, owned.
    pub fn into_output(self) -> Value {
        match self {
            Called::Forged(inv) => inv.output,
            Called::Hub(v) => v,
        }
    }
}

impl Opened {
    /// Forges the request (JSON in the seed's format) into the caller's
    /// session. A refusal is [`ErrorKind::Refused`] with its stage and
    /// [`Failure::result`] the seed-shaped result.
    pub async fn forge_json(&self, request: &str) -> Result<Forged, Failure> {
        let outcome = self.forge.forge_json(request, &self.ctx).await;
        if let Some(failure) = forge_failure(&outcome) {
            return Err(failure);
        }
        self.save()?;
        let forged = outcome.expect("not a failure");
        // The tool forged joins the session's working set.
        self.forge
            .remember(&self.ctx, std::slice::from_ref(&forged.tool.name))
            .await?;
        Ok(forged)
    }

    /// Calls `name` as `temper call` does: the forged tool of that name the
    /// caller sees, else the hub tool of that name. An input its
    /// `inputSchema` refuses is [`ErrorKind::InvalidInput`] with the JSON
    /// pointer of the first offending value.
    ///
    /// A hub tool the context's grant does not allow
    /// ([`ForgeOptions::allow_tools`]) is not found, as one that does not
    /// exist; what a forged tool reaches is checked by the forge at any
    /// depth.
    pub async fn call(&self, name: &str, input: &Value) -> Result<Called, Failure> {
        match self.forge.invoke(name, input, &self.ctx).await {
            Ok(inv) => Ok(Called::Forged(inv)),
            Err(e @ temper_forge::InvokeError::NotFound { .. })
                if !self.ctx.grant().allows_hub(name) =>
            {
                Err(e.into())
            }
            Err(temper_forge::InvokeError::NotFound { .. }) if self.forge.is_hub_tool(name) => {
                match self.forge.call_native(name, input, &self.ctx).await {
                    Some(Ok(v)) => Ok(Called::Hub(v)),
                    Some(Err(message)) => Err(Failure {
                        kind: ErrorKind::ToolFailed {
                            message: message.clone(),
                            line: None,
                            column: None,
                        },
                        message,
                        logs: Vec::new(),
                        result: None,
                    }),
                    None => Err(Failure {
                        kind: ErrorKind::NotFound { name: name.into() },
                        message: format!("no hub tool {name:?}"),
                        logs: Vec::new(),
                        result: None,
                    }),
                }
            }
            Err(e @ temper_forge::InvokeError::Input { .. }) => {
                let at = self
                    .forge
                    .visible_tools(&self.ctx)
                    .ok()
                    .and_then(|tools| tools.into_iter().find(|t| t.name == name))
                    .and_then(|t| first_violation(&t.input_schema, input));
                Err(Failure::from(e).with_input_location(at))
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl Opened {
    /// The meta-tools an agent framework offers beside the forged tools,
    /// as the MCP server defines them (`name`, `description`,
    /// `inputSchema`): `forge_tool` (naming the capabilities the host
    /// policy allows) and `run_code` (declaring the tools the caller may
    /// call now).
    pub async fn meta_tools(&self) -> Result<Vec<Value>, Failure> {
        use temper_mcp::handler::run_code::{CodeTool, run_code_definition};
        let mut callable: Vec<CodeTool> = self
            .forge
            .visible_tools_async(&self.ctx)
            .await?
            .into_iter()
            .map(|t| CodeTool {
                name: t.name,
                description: t.description,
                input_schema: t.input_schema,
                output_schema: t.output_schema,
            })
            .collect();
        callable.extend(self.hub_tools().into_iter().map(|t| CodeTool {
            name: t.name,
            description: t.description,
            input_schema: t.input_schema,
            output_schema: t.output_schema,
        }));
        Ok(vec![
            temper_mcp::tools::forge_tool_definition(self.forge.runtime().policy()),
            run_code_definition(&callable, self.forge.runtime().policy()),
            temper_mcp::handler::discovery::search_tools_definition(0),
        ])
    }

    /// `search_tools` for this caller (every tier, every hub tool): the
    /// tools matching `query`, best first, at most `limit` (1..=50); those
    /// found join the session's working set.
    pub async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<temper_forge::FoundTool>, Failure> {
        let hub = self.forge.hub_tools();
        let scope = temper_forge::SearchScope {
            tiers: temper_store::SearchTiers::ALL,
            hub: &hub,
        };
        let request = temper_forge::SearchRequest {
            query: query.to_owned(),
            limit: limit.clamp(1, temper_store::MAX_SEARCH_LIMIT),
            tier: None,
            capability: None,
        };
        let found = self.forge.search_tools(&self.ctx, &request, scope).await?;
        let names: Vec<String> = found.iter().map(|t| t.name.clone()).collect();
        self.forge.remember(&self.ctx, &names).await?;
        Ok(found)
    }

    /// The session's working set: the names of the tools found, reused or
    /// forged in it, most recent first (what an agent framework offers
    /// beside `search_tools`, instead of every tool).
    pub async fn working_set(&self) -> Result<Vec<String>, Failure> {
        Ok(self.forge.working_set(&self.ctx).await?)
    }
}

impl Opened {
    /// The hub tools the caller may call: those the host policy allows and
    /// the context's grant does not narrow away, by name.
    pub fn hub_tools(&self) -> Vec<temper_forge::NativeToolSpec> {
        let mut tools = self.forge.hub_tools();
        tools.retain(|t| self.ctx.grant().allows_hub(&t.name));
        tools
    }
}

#[cfg(test)]
mod tests;
