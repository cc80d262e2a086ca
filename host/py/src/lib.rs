//! `temper_forge._temper`: the native module of the `temper-forge` Python
//! package. It translates and holds no logic of its own: a forge is opened
//! by [`temper_embed::Opened::open`] as `temper` opens one, calls go through
//! `temper-forge` and `temper-runtime`, and errors are classified by
//! [`temper_embed::Failure`].
//!
//! Values cross as JSON text (the Python layer dumps and loads it), parsed
//! once here. Each operation has a blocking form, which releases the GIL
//! while it runs on the module's tokio runtime, and an `_async` form, which
//! returns an awaitable on that runtime (cancelling the asyncio task drops
//! the Rust future, which stops the call).

/// The allocator of the `temper` binary (see docs/src/embedding.md#the-allocator):
/// calls hand used stores to the reaper thread, which glibc's malloc
/// serializes on its arena lock. It serves this module's Rust allocations
/// only; the interpreter keeps its own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use serde_json::{Value, json};
use temper_embed::{Failure, ForgeOptions, JudgeChoice, Opened, RuntimeOptions};
use temper_runtime::{Runtime, Tool};
use temper_store::Tier;

/// The module's tokio runtime (pyo3-async-runtimes' own, built once).
impl Drop for NativeForge {
    fn drop(&mut self) {
        // The call counts kept in memory go to the store (as `temper`
        // writes them on its way out); a failure here has no one to tell.
        let _ = self.opened.save();
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// A failure as the Python exception `temper_forge.errors` makes for it.
fn to_pyerr(py: Python<'_>, failure: Failure) -> PyErr {
    let doc = failure.to_json();
    let made = py
        .import("temper_forge.errors")
        .and_then(|m| m.getattr("_from_native"))
        .and_then(|f| f.call1((doc.to_string(),)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

type Outcome = Result<String, Failure>;

/// Runs `fut` to completion on the module's runtime with the GIL released.
fn block<F>(py: Python<'_>, fut: F) -> PyResult<String>
where
    F: Future<Output = Outcome> + Send + 'static,
{
    py.detach(|| runtime().block_on(fut))
        .map_err(|f| to_pyerr(py, f))
}

/// `fut` as an awaitable on the module's runtime.
fn awaitable<F>(py: Python<'_>, fut: F) -> PyResult<Bound<'_, PyAny>>
where
    F: Future<Output = Outcome> + Send + 'static,
{
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        fut.await.map_err(|f| Python::attach(|py| to_pyerr(py, f)))
    })
}

fn parse(text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| Failure::invalid_input(format!("not JSON: {e}")))
}

fn text(value: &impl serde::Serialize) -> Outcome {
    serde_json::to_string(value).map_err(Failure::host)
}

/// The `#[pymethods]` block of [`NativeForge`]: the items given as they
/// are, then for each operation its blocking method and its `_async` twin
/// (`#[pymethods]` expands no macro inside it, so the block is generated).
macro_rules! forge_methods {
    (
        { $($item:tt)* }
        $( $(#[$doc:meta])* fn $name:ident / $aname:ident ($($arg:ident : $ty:ty),*) => $op:path; )*
    ) => {
        #[pymethods]
        impl NativeForge {
            $($item)*

            $(
                $(#[$doc])*
                fn $name(&self, py: Python<'_>, $($arg: $ty),*) -> PyResult<String> {
                    block(py, $op(self.opened.clone(), $($arg),*))
                }

                $(#[$doc])*
                /// (awaitable)
                fn $aname<'py>(&self, py: Python<'py>, $($arg: $ty),*) -> PyResult<Bound<'py, PyAny>> {
                    awaitable(py, $op(self.opened.clone(), $($arg),*))
                }
            )*
        }
    };
}

/// A forge opened on a store, for one agent and session.
#[pyclass(frozen, module = "temper_forge._temper")]
struct NativeForge {
    opened: Arc<Opened>,
}

forge_methods! {
    {
        /// Opens the store (a directory or a PostgreSQL URL) as `temper` does.
        #[new]
        /// `allow_tools` narrows the hub tools its calls may reach, at any
        /// depth (names or globs, on top of the policy).
        #[pyo3(signature = (store, judge=None, agent="default".to_string(), session="default".to_string(), policy=None, tools=None, allow_tools=None))]
        #[allow(clippy::too_many_arguments)]
        fn new(
            py: Python<'_>,
            store: String,
            judge: Option<String>,
            agent: String,
            session: String,
            policy: Option<PathBuf>,
            tools: Option<PathBuf>,
            allow_tools: Option<Vec<String>>,
        ) -> PyResult<Self> {
            let opened = block_open(py, move || async move {
                let judge = JudgeChoice::from_name(judge.as_deref())?;
                let runtime = RuntimeOptions {
                    policy: temper_embed::load_policy(policy.as_deref())?,
                    ..Default::default()
                }
                .builder()
                .build()?;
                let options = ForgeOptions {
                    store: Some(store),
                    agent,
                    session,
                    judge: Some(judge),
                    allow_tools,
                    ..Default::default()
                };
                let mut opened = Opened::open(&options, runtime)?;
                if let Some(tools) = &tools {
                    opened.attach_hub(tools).await?;
                }
                // Under a trust policy, stored tools that no longer meet it are
                // disabled (the forge stops offering them), as `temper` does at
                // start; the CLI prints the list, a library has no one to tell.
                let agent = opened.ctx.agent_id.clone();
                opened.check_tiers(&[agent.as_str()]).await?;
                Ok(opened)
            })?;
            Ok(Self {
                opened: Arc::new(opened),
            })
        }

        /// The agent acting.
        #[getter]
        fn agent(&self) -> String {
            self.opened.ctx.agent_id.clone()
        }

        /// The session.
        #[getter]
        fn session(&self) -> String {
            self.opened.ctx.session_id.clone()
        }
    }

    /// Forges a request (JSON text in the seed's format): the result.
    fn forge / forge_async (request: String) => ops::forge;
    /// Calls a tool by name with JSON input: the output as JSON.
    fn call / call_async (name: String, input: String) => ops::call;
    /// The tools the caller sees (and the hub's), as JSON.
    fn tools / tools_async () => ops::tools;
    /// The tools matching a query, ranked (they join the working set), as JSON.
    fn search / search_async (query: String, limit: usize) => ops::search;
    /// The session's working set (names, most recent first), as JSON.
    fn working_set / working_set_async () => ops::working_set;
    /// `forge_tool` and `run_code` as the MCP server defines them, as JSON.
    fn meta_tools / meta_tools_async () => ops::meta_tools;
    /// A tool's call statistics, as JSON.
    fn stats / stats_async (name: String) => ops::stats;
    /// Promotes a session tool to the agent tier: the tool, as JSON.
    fn promote / promote_async (name: String, source: Option<String>) => ops::promote;
    /// Deletes a session tool (frees a slot): `{deleted: tool}`, as JSON.
    fn delete / delete_async (name: String) => ops::delete;
    /// Approves an agent tool for every agent: the tool, as JSON.
    fn approve / approve_async (name: String, by: String, note: Option<String>) => ops::approve;
    /// Runs code once with the tools it may call: `{result, logs, tools}`.
    fn run_code / run_code_async (code: String, tools: Option<Vec<String>>) => ops::run_code;
    /// Writes a tool's artifact to a file: `{id, bytes, path}`.
    fn export / export_async (name: String, path: PathBuf, with_source: bool) => ops::export;
    /// Imports an artifact file into a tier: the forge result.
    fn import_artifact / import_artifact_async (path: PathBuf, tier: String) => ops::import;
    /// Ends the session: `{discarded}`.
    fn end_session / end_session_async () => ops::end_session;
    /// Writes the calls counted in memory to the store.
    fn flush / flush_async () => ops::flush;
}

/// Opens something on the module's runtime with the GIL released.
fn block_open<T, F, Fut>(py: Python<'_>, make: F) -> PyResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send,
    Fut: Future<Output = Result<T, Failure>> + Send,
{
    py.detach(|| runtime().block_on(make()))
        .map_err(|f| to_pyerr(py, f))
}

mod ops {
    //! The operations, each an owned future over the opened forge.

    use super::*;

    pub async fn forge(o: Arc<Opened>, request: String) -> Outcome {
        let forged = o.forge_json(&request).await?;
        let outcome = Ok(forged);
        text(&temper_forge::ForgeResult::from(&outcome))
    }

    pub async fn call(o: Arc<Opened>, name: String, input: String) -> Outcome {
        let input = parse(&input)?;
        let called = o.call(&name, &input).await?;
        text(called.output())
    }

    pub async fn tools(o: Arc<Opened>) -> Outcome {
        let tools = o.forge.visible_tools_async(&o.ctx).await?;
        let hub: Vec<Value> = o
            .hub_tools()
            .into_iter()
            .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema, "outputSchema": t.output_schema}))
            .collect();
        text(&json!({"tools": tools, "hubTools": hub}))
    }

    pub async fn search(o: Arc<Opened>, query: String, limit: usize) -> Outcome {
        text(&o.search(&query, limit).await?)
    }

    pub async fn working_set(o: Arc<Opened>) -> Outcome {
        text(&o.working_set().await?)
    }

    pub async fn meta_tools(o: Arc<Opened>) -> Outcome {
        text(&o.meta_tools().await?)
    }

    pub async fn stats(o: Arc<Opened>, name: String) -> Outcome {
        let s = o.forge.tool_stats(&name, &o.ctx)?;
        text(
            &json!({"name": name, "totalCalls": s.total_calls, "successes": s.successes,
                     "successRate": s.success_rate, "avgLatencyMs": s.avg_latency_ms,
                     "p95LatencyMs": s.p95_latency_ms}),
        )
    }

    pub async fn promote(o: Arc<Opened>, name: String, source: Option<String>) -> Outcome {
        let t = o.forge.promote(&name, &o.ctx, source.as_deref()).await;
        o.save()?;
        text(&t?)
    }

    pub async fn delete(o: Arc<Opened>, name: String) -> Outcome {
        let t = o.forge.delete_session_tool(&name, &o.ctx);
        o.save()?;
        text(&json!({"deleted": t?}))
    }

    pub async fn approve(
        o: Arc<Opened>,
        name: String,
        by: String,
        note: Option<String>,
    ) -> Outcome {
        let t = o
            .forge
            .approve(&name, &o.ctx.agent_id, &by, note.as_deref())?;
        text(&t)
    }

    pub async fn run_code(o: Arc<Opened>, code: String, tools: Option<Vec<String>>) -> Outcome {
        let run = o.forge.run_code(&code, tools.as_deref(), &o.ctx).await?;
        text(&json!({"result": run.output, "logs": run.logs, "tools": run.tools}))
    }

    pub async fn export(o: Arc<Opened>, name: String, path: PathBuf, with_source: bool) -> Outcome {
        let exported = o.forge.export(&name, &o.ctx, with_source, None)?;
        temper_runtime::fsutil::write_atomically(&path, &exported.bytes)
            .map_err(|e| Failure::host(format!("cannot write {}: {e}", path.display())))?;
        text(&json!({"id": exported.id, "bytes": exported.bytes.len(), "path": path}))
    }

    pub async fn import(o: Arc<Opened>, path: PathBuf, tier: String) -> Outcome {
        let tier = match tier.as_str() {
            "session" => Tier::Session,
            "agent" => Tier::Agent,
            "shared" => Tier::Shared,
            other => {
                return Err(Failure::invalid_input(format!(
                    "tier {other:?}: expected \"session\", \"agent\" or \"shared\""
                )));
            }
        };
        // Bounded by maxArtifactBytes before anything is read whole.
        let bytes = match o.forge.read_artifact(&path) {
            Ok(bytes) => bytes,
            Err(e @ temper_forge::ImportError::Read { .. }) => {
                return Err(Failure::host(e.to_string()));
            }
            Err(e) => return Err(e.into()),
        };
        let outcome = o.forge.import(bytes, &o.ctx, tier).await;
        if let Some(failure) = temper_embed::forge_failure(&outcome) {
            return Err(failure);
        }
        o.save()?;
        text(&temper_forge::ForgeResult::from(&outcome))
    }

    pub async fn end_session(o: Arc<Opened>) -> Outcome {
        let n = o.forge.cleanup_session(&o.ctx)?;
        text(&json!({"discarded": n}))
    }

    pub async fn flush(o: Arc<Opened>) -> Outcome {
        o.save()?;
        Ok("null".into())
    }
}

/// A tool built (or loaded) by a [`NativeRuntime`], with the grants it was
/// given.
#[pyclass(frozen, module = "temper_forge._temper")]
struct NativeTool {
    tool: Tool,
}

#[pymethods]
impl NativeTool {
    /// The artifact's blake3, hex.
    #[getter]
    fn id(&self) -> String {
        self.tool.id().to_string()
    }
}

/// The sandbox alone: build JavaScript into a tool and call it.
#[pyclass(frozen, module = "temper_forge._temper")]
struct NativeRuntime {
    runtime: Arc<Runtime>,
}

async fn build_tool(rt: Arc<Runtime>, js: String) -> Result<Tool, Failure> {
    let artifact = rt.build(&js).await?;
    Ok(rt.tool(&artifact))
}

async fn call_tool(rt: Arc<Runtime>, tool: Tool, input: String, grants: Vec<String>) -> Outcome {
    // Check the input is JSON here, so that a bad one names the input.
    parse(&input)?;
    let granted = rt.grant(&tool, &grants)?;
    let out = rt.call(&granted, &input).await?;
    let output: Value = serde_json::from_str(&out.output).map_err(Failure::host)?;
    text(&json!({"output": output, "logs": out.logs}))
}

#[pymethods]
impl NativeRuntime {
    /// A runtime under the host policy file (default: deny everything).
    #[new]
    #[pyo3(signature = (policy=None))]
    fn new(py: Python<'_>, policy: Option<PathBuf>) -> PyResult<Self> {
        let runtime = block_open(py, move || async move {
            let rt = RuntimeOptions {
                policy: temper_embed::load_policy(policy.as_deref())?,
                ..Default::default()
            }
            .builder()
            .build()?;
            Ok::<_, Failure>(rt)
        })?;
        Ok(Self {
            runtime: Arc::new(runtime),
        })
    }

    /// Builds JavaScript (defining `execute(input)`) into a tool.
    fn build(&self, py: Python<'_>, js: String) -> PyResult<NativeTool> {
        let rt = self.runtime.clone();
        let tool = block_open(py, move || build_tool(rt, js))?;
        Ok(NativeTool { tool })
    }

    /// Builds JavaScript into a tool (awaitable).
    fn build_async<'py>(&self, py: Python<'py>, js: String) -> PyResult<Bound<'py, PyAny>> {
        let rt = self.runtime.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            match build_tool(rt, js).await {
                Ok(tool) => Ok(NativeTool { tool }),
                Err(f) => Err(Python::attach(|py| to_pyerr(py, f))),
            }
        })
    }

    /// Calls a tool in a fresh instance with JSON input and the given
    /// grants (each must be allowed by the host policy): `{output, logs}`.
    #[pyo3(signature = (tool, input, grants=Vec::new()))]
    fn call(
        &self,
        py: Python<'_>,
        tool: &NativeTool,
        input: String,
        grants: Vec<String>,
    ) -> PyResult<String> {
        block(
            py,
            call_tool(self.runtime.clone(), tool.tool.clone(), input, grants),
        )
    }

    /// [`NativeRuntime::call`], awaitable.
    #[pyo3(signature = (tool, input, grants=Vec::new()))]
    fn call_async<'py>(
        &self,
        py: Python<'py>,
        tool: &NativeTool,
        input: String,
        grants: Vec<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        awaitable(
            py,
            call_tool(self.runtime.clone(), tool.tool.clone(), input, grants),
        )
    }
}

/// The module.
#[pymodule]
fn _temper(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeForge>()?;
    m.add_class::<NativeRuntime>()?;
    m.add_class::<NativeTool>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
