//! Host-native tools: Rust async functions the embedding application
//! registers with [`super::Forge::register_native`], usable as compose
//! steps by every agent of that host.
//!
//! A native tool has a name, a description and JSON Schemas like a forged
//! one. Its input is checked against `inputSchema` before the function
//! runs and its output against `outputSchema` after; the call is bounded by
//! the runtime's timeout. It runs in the host process, with whatever the
//! application gives it: registering one is the application's decision, not
//! an agent's. A compose tool's manifest records a native step by name (no
//! blake3); a host that runs the tool must have a native tool of that name.
//!
//! ```no_run
//! # async fn demo(forge: temper_forge::Forge) -> Result<(), Box<dyn std::error::Error>> {
//! use serde_json::json;
//! use temper_forge::NativeToolSpec;
//! forge.register_native(
//!     NativeToolSpec {
//!         name: "web_search".into(),
//!         description: "Searches the web.".into(),
//!         input_schema: json!({"type": "object", "required": ["q"]}),
//!         output_schema: json!({"type": "object", "required": ["output"]}),
//!     },
//!     |input| async move { Ok(json!({"output": format!("results for {}", input["q"])})) },
//! )?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use temper_hub::{CallOutput, Relay};

use super::error::ValidateError;
use super::schema::ToolSchemas;
use super::{Forge, lock, validate};

/// What a native tool's function returns.
pub type NativeFuture = Pin<Box<dyn Future<Output = Result<Value, String>> + Send>>;

/// A registered native function.
pub type NativeFn = Arc<dyn Fn(Value) -> NativeFuture + Send + Sync>;

/// What a hub tool's gateway call returns: its output, with the
/// upstream's own text of it when that can be passed on.
pub(crate) type OutputFuture = Pin<Box<dyn Future<Output = Result<CallOutput, String>> + Send>>;

/// A function [`NativeTool`]'s checks are put around: its output is `T`.
type CheckedFn<T> =
    dyn Fn(Value) -> Pin<Box<dyn Future<Output = Result<T, String>> + Send>> + Send + Sync;

/// A hub tool's call for a gateway ([`NativeTool::invoke_output`]), with
/// where what the upstream sends for the call goes ([`Relay`]).
pub(crate) type OutputFn = Arc<dyn Fn(Value, Option<Relay>) -> OutputFuture + Send + Sync>;

/// The description of a native tool.
#[derive(Debug, Clone)]
pub struct NativeToolSpec {
    /// snake_case name (the same rules as forged tools).
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Value,
    /// JSON Schema of the output.
    pub output_schema: Value,
}

/// A registered native tool.
pub struct NativeTool {
    /// Its description.
    pub spec: NativeToolSpec,
    pub(crate) schemas: ToolSchemas,
    pub(crate) call: NativeFn,
    /// Where a hub tool comes from (`upstream "search"`, `built-in`);
    /// `None` for a tool the embedder registered.
    pub(crate) hub_source: Option<String>,
    /// A hub tool's own limit (its `timeout_ms`), which bounds its calls
    /// instead of the runtime's timeout: an LLM or an upstream may need
    /// longer than a sandboxed call. `None`: the runtime's.
    pub(crate) own_timeout: Option<std::time::Duration>,
    /// The function checks its output against the same output schema
    /// itself (an upstream's hub tool): not checked a second time.
    pub(crate) checks_output: bool,
    /// The function checks its input against the tool's input schema
    /// itself, before it sends anything (an upstream's hub tool, against
    /// the schema the upstream listed last): not checked here first.
    pub(crate) checks_input: bool,
    /// A hub tool's call that keeps the upstream's result as it came (a
    /// gateway's call); `None`: `call`'s output is written anew.
    pub(crate) call_output: Option<OutputFn>,
    /// A forge's tests may call it live (see [`super::test_calls`]): the
    /// embedder's tools, built-ins, read-only upstream tools and those of
    /// an upstream that allows live tests.
    pub(crate) live_in_tests: bool,
}

impl NativeTool {
    /// The limit of one call: the tool's own (a hub tool's, with a second
    /// of grace so that its own, more precise error wins) or `default`.
    pub(crate) fn call_timeout(&self, default: std::time::Duration) -> std::time::Duration {
        match self.own_timeout {
            Some(own) => own + std::time::Duration::from_secs(1),
            None => default,
        }
    }

    /// Calls the function with the schema checks around it and the timeout
    /// ([`Self::call_timeout`] of `timeout`); errors name the tool. The
    /// input and the output as JSON text (compose steps and code mode).
    pub(crate) async fn invoke(
        &self,
        input: &str,
        timeout: std::time::Duration,
    ) -> Result<String, String> {
        let name = &self.spec.name;
        let input: Value =
            serde_json::from_str(input).map_err(|e| format!("{name}: input is not JSON: {e}"))?;
        self.invoke_value(input, timeout)
            .await
            .map(|output| output.to_string())
    }

    /// [`Self::invoke`] on values: nothing is written as JSON text and read
    /// back (a gateway call passes the upstream's output through).
    pub(crate) async fn invoke_value(
        &self,
        input: Value,
        timeout: std::time::Duration,
    ) -> Result<Value, String> {
        if let Some(source) = &self.hub_source
            && let Some(answer) =
                super::test_calls::serve(&self.spec.name, source, self.live_in_tests, &input)
        {
            return answer;
        }
        self.checked(input, timeout, &*self.call, |v| v).await
    }

    /// [`Self::invoke_value`] for a gateway: with the upstream's result as
    /// it came when a hub tool has one ([`CallOutput::result`]), an
    /// `isError` one included; what the upstream sends for the call goes to `relay`.
    /// The checks are the same (the output's only when it is not an
    /// `isError` result, which the hub tool checks itself).
    pub(crate) async fn invoke_output(
        &self,
        input: Value,
        timeout: std::time::Duration,
        relay: Option<Relay>,
    ) -> Result<CallOutput, String> {
        match &self.call_output {
            Some(call) => {
                let call = call.clone();
                let call = move |input: Value| call(input, relay.clone());
                self.checked(input, timeout, &call, |o| &o.value).await
            }
            None => self
                .invoke_value(input, timeout)
                .await
                .map(CallOutput::value),
        }
    }

    /// Calls `call` with the schema checks around it (each unless the
    /// function does it itself) and the timeout; `value` is the output
    /// that is checked.
    async fn checked<T>(
        &self,
        input: Value,
        timeout: std::time::Duration,
        call: &CheckedFn<T>,
        value: fn(&T) -> &Value,
    ) -> Result<T, String> {
        let timeout = self.call_timeout(timeout);
        let name = &self.spec.name;
        if !self.checks_input {
            self.schemas
                .input
                .check(&input)
                .map_err(|m| format!("{name}: input {m}"))?;
        }
        let output = match tokio::time::timeout(timeout, call(input)).await {
            Err(_) => {
                return Err(format!(
                    "{name}: timed out after {} ms",
                    timeout.as_millis()
                ));
            }
            Ok(Err(message)) => return Err(format!("{name}: {message}")),
            Ok(Ok(output)) => output,
        };
        if !self.checks_output {
            self.schemas
                .output
                .check(value(&output))
                .map_err(|m| format!("{name}: output {m}"))?;
        }
        Ok(output)
    }
}

impl Forge {
    /// Registers a host-native tool: `call` runs with the input checked
    /// against `spec.input_schema`, and its output is checked against
    /// `spec.output_schema`. Native tools are compose steps every agent of
    /// this host may use (see [`super::native`]). The name follows the
    /// forged-tool rules and must not be a native tool already.
    pub fn register_native<F, Fut>(
        &self,
        spec: NativeToolSpec,
        call: F,
    ) -> Result<(), ValidateError>
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        validate::check_name(&spec.name)?;
        let schemas = ToolSchemas::compile(&spec.input_schema, &spec.output_schema)?;
        let mut natives = lock(&self.inner.natives);
        if natives.contains_key(&spec.name) {
            return Err(ValidateError::Name {
                name: spec.name,
                reason: "is already a host-native tool".into(),
            });
        }
        let call = Arc::new(move |input: Value| -> NativeFuture { Box::pin(call(input)) });
        natives.insert(
            spec.name.clone(),
            Arc::new(NativeTool {
                spec,
                schemas,
                call,
                hub_source: None,
                own_timeout: None,
                checks_output: false,
                checks_input: false,
                call_output: None,
                live_in_tests: true,
            }),
        );
        Ok(())
    }

    /// The host-native tools (the embedder's and the hub's), by name.
    pub fn native_tools(&self) -> Vec<NativeToolSpec> {
        let mut out: Vec<NativeToolSpec> = lock(&self.inner.natives)
            .values()
            .map(|n| n.spec.clone())
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}
