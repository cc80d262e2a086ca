//! Running a compose tool: its adapter component (see [`super::adapter`])
//! in a fresh store per call, with each step import linked by the host to
//! a [`StepCall`]: a registered component tool (which runs in its own
//! fresh instance, with its own grants and limits) or a host-native tool.
//!
//! A step that fails (traps, times out, throws, returns output that does
//! not match its schema) returns an error to the adapter, which stops the
//! pipeline; the host reports [`RunError::Step`] naming the step. The whole
//! run, steps included, is bounded by the runtime's timeout, plus the own
//! limit of each step that has one ([`StepCall::own_timeout`]: a hub tool
//! such as an LLM, which may rightly take longer than a sandboxed call);
//! the adapter's own memory by the memory cap.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use wasmtime::component::{InstancePre, Linker, types::ComponentItem};
use wasmtime::{Store, StoreContextMut};

use super::adapter::{STEP_FUNC, TYPES_INTERFACE, import_names};
use temper_runtime::bindings::{RunIndices, ToolError};
use temper_runtime::error::{LoadError, RunError};
use temper_runtime::host_state::{LogLine, MemoryCap};
use temper_runtime::runtime::{
    CallFailure, CallOutput, RUN_EXPORT, Runtime, arm_deadline, deliver, settle,
};

/// What a step returned: its JSON output text and its console lines.
#[derive(Debug, Clone, Default)]
pub struct StepOutput {
    /// The step's output, JSON text.
    pub output: String,
    /// Console lines it printed.
    pub logs: Vec<LogLine>,
}

/// The future a [`StepCall`] returns: the output, or why the step failed.
pub type StepFuture<'a> = Pin<Box<dyn Future<Output = Result<StepOutput, String>> + Send + 'a>>;

/// Something a step import is linked to.
pub trait StepCall: Send + Sync {
    /// Runs the step on its JSON input text.
    fn call(&self, input: String) -> StepFuture<'_>;

    /// The step's own limit, when it bounds itself (a host-native hub
    /// tool with its `timeout_ms`): the run's deadline is extended by it,
    /// so that a slow but in-time step is not cut off by the runtime's
    /// timeout. `None` (the default): the step shares the run's timeout.
    fn own_timeout(&self) -> Option<std::time::Duration> {
        None
    }
}

/// A step of a pipeline as linked for one call.
#[derive(Clone)]
pub struct LinkedStep {
    /// The step's name in the pipeline.
    pub name: String,
    /// The tool it calls (for errors).
    pub tool: String,
    /// What runs it.
    pub call: Arc<dyn StepCall>,
}

/// A compose tool ready to call: the adapter compiled and linked. Cheap to
/// clone.
#[derive(Clone)]
pub struct ComposeTool {
    inner: Arc<ComposeInner>,
}

struct ComposeInner {
    id: String,
    steps: Vec<String>,
    pre: InstancePre<ComposeState>,
    run: RunIndices,
}

impl ComposeTool {
    /// blake3 of the adapter artifact, hex.
    pub fn id(&self) -> &str {
        &self.inner.id
    }
    /// The step names, in order.
    pub fn steps(&self) -> &[String] {
        &self.inner.steps
    }
}

/// The store state of one compose call.
pub struct ComposeState {
    memory: MemoryCap,
    steps: Vec<LinkedStep>,
    /// The first step that failed, and its error.
    failure: Option<(usize, String)>,
    logs: Vec<LogLine>,
}

/// Compose calls on a [`Runtime`]: loading a compose adapter and calling
/// it with its steps linked. A trait because the runtime is
/// `temper-runtime`'s type; `use temper_compose::ComposeRuntime` to call
/// them as methods.
pub trait ComposeRuntime {
    /// Loads a compose adapter: compiles it (cached on disk) and refuses it
    /// unless its imports are exactly the type-only `temper:tool/types`
    /// instance and one instance per step of `steps` (by import name), each
    /// with only `call`, and it exports `temper:tool/run`. Then links every
    /// step import to the step of the same index.
    fn load_compose(
        &self,
        bytes: Arc<Vec<u8>>,
        steps: Vec<String>,
    ) -> impl Future<Output = Result<ComposeTool, LoadError>> + Send;

    /// Calls a compose tool with a JSON `input`, each step import linked to
    /// `steps[i]` (same order as the tool's steps). The adapter runs in a
    /// fresh store under the memory cap; the whole run is bounded by the
    /// timeout; the output by the output cap. Console lines of the steps
    /// come back prefixed with `[step]`.
    fn call_compose(
        &self,
        tool: &ComposeTool,
        steps: Vec<LinkedStep>,
        input: &str,
    ) -> impl Future<Output = Result<CallOutput, CallFailure>> + Send;
}

impl ComposeRuntime for Runtime {
    /// Loads a compose adapter: compiles it (cached on disk) and refuses it
    /// unless its imports are exactly the type-only `temper:tool/types`
    /// instance and one instance per step of `steps` (by import name), each
    /// with only `call`, and it exports `temper:tool/run`. Then links every
    /// step import to the step of the same index.
    async fn load_compose(
        &self,
        bytes: Arc<Vec<u8>>,
        steps: Vec<String>,
    ) -> Result<ComposeTool, LoadError> {
        let names: Vec<&str> = steps.iter().map(String::as_str).collect();
        let imports = import_names(&names).map_err(|e| LoadError::Invalid(e.to_string()))?;
        let rt = self.clone();
        let compiled_bytes = bytes.clone();
        let component = tokio::task::spawn_blocking(move || rt.engine().compile(&compiled_bytes))
            .await
            .map_err(|e| LoadError::Invalid(e.to_string()))?
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        let engine = self.engine().engine();
        let ty = component.component_type();
        for (name, item) in ty.imports(engine) {
            if name == TYPES_INTERFACE {
                continue;
            }
            if !imports.iter().any(|i| i == name) {
                return Err(LoadError::ImportNotAllowed(name.to_string()));
            }
            let ComponentItem::ComponentInstance(instance) = item.ty else {
                return Err(LoadError::ImportNotAllowed(name.to_string()));
            };
            // Types (`tool-error`) may come along; the functions must be
            // exactly `call`.
            let funcs: Vec<String> = instance
                .exports(engine)
                .filter(|(_, item)| !matches!(item.ty, ComponentItem::Type(_)))
                .map(|(n, _)| n.to_string())
                .collect();
            if funcs != [STEP_FUNC] {
                return Err(LoadError::ImportNotAllowed(format!(
                    "{name} (exports {funcs:?}, not just `{STEP_FUNC}`)"
                )));
            }
        }
        let mut linker: Linker<ComposeState> = Linker::new(engine);
        let invalid = |e: wasmtime::Error| LoadError::Invalid(format!("{e:#}"));
        linker.instance(TYPES_INTERFACE).map_err(invalid)?;
        for (index, import) in imports.iter().enumerate() {
            linker
                .instance(import)
                .map_err(invalid)?
                .func_wrap_async(STEP_FUNC, move |store, (input,): (String,)| {
                    Box::new(call_step(store, index, input))
                })
                .map_err(invalid)?;
        }
        let pre = linker.instantiate_pre(&component).map_err(invalid)?;
        let run = RunIndices::new(&pre).map_err(|_| LoadError::MissingExport(RUN_EXPORT.into()))?;
        Ok(ComposeTool {
            inner: Arc::new(ComposeInner {
                id: temper_runtime::id::ArtifactId::of(&bytes).to_string(),
                steps,
                pre,
                run,
            }),
        })
    }

    /// Calls a compose tool with a JSON `input`, each step import linked to
    /// `steps[i]` (same order as the tool's steps). The adapter runs in a
    /// fresh store under the memory cap; the whole run is bounded by the
    /// timeout; the output by the output cap. Console lines of the steps
    /// come back prefixed with `[step]`.
    async fn call_compose(
        &self,
        tool: &ComposeTool,
        steps: Vec<LinkedStep>,
        input: &str,
    ) -> Result<CallOutput, CallFailure> {
        let mut limits = self.limits().clone();
        // Steps that bound themselves extend the run's deadline by their
        // own limit (still a bound: the sum of finite limits).
        let own: std::time::Duration = steps.iter().filter_map(|s| s.call.own_timeout()).sum();
        limits.timeout += own;
        let fail = |error| CallFailure {
            error,
            logs: Vec::new(),
        };
        self.check_input(input).map_err(fail)?;
        if steps.len() != tool.inner.steps.len() {
            return Err(fail(RunError::Internal {
                message: format!(
                    "{} steps linked to a pipeline of {}",
                    steps.len(),
                    tool.inner.steps.len()
                ),
            }));
        }
        let state = ComposeState {
            memory: MemoryCap::new(limits.memory_bytes),
            steps,
            failure: None,
            logs: Vec::new(),
        };
        let mut store = Store::new(self.engine().engine(), state);
        store.limiter(|state| &mut state.memory);
        arm_deadline(&mut store, limits.timeout);
        let started = std::time::Instant::now();
        let outcome = tokio::time::timeout(limits.timeout, async {
            let instance = match tool.inner.pre.instantiate_async(&mut store).await {
                Ok(instance) => instance,
                Err(e) => return Ok(Err(temper_runtime::runtime::instantiate_failed(&e))),
            };
            let run = tool.inner.run.load(&mut store, &instance)?;
            run.call_call(&mut store, input)
                .await
                .map(|r| r.map_err(RunError::from))
        })
        .await;
        let result = settle(outcome, store.data().memory.hit, &limits);
        let state = store.into_data();
        let result = match (result, state.failure) {
            (Ok(output), _) => Ok(output),
            // A timeout of the whole run stays one, also when a step's own
            // deadline (as long, started a little later) ended it first.
            (Err(RunError::Timeout { limit_ms }), _) => Err(RunError::Timeout { limit_ms }),
            (Err(_), _) if started.elapsed() >= limits.timeout => Err(RunError::Timeout {
                limit_ms: limits.timeout.as_millis() as u64,
            }),
            // A step failed: name it.
            (Err(_), Some((index, message))) => {
                let step = &state.steps[index];
                Err(RunError::Step {
                    index,
                    step: step.name.as_str().into(),
                    tool: step.tool.as_str().into(),
                    message: message.into(),
                })
            }
            (Err(error), None) => Err(error),
        };
        deliver(result, state.logs, &limits, true)
    }
}

/// The host side of a step import: runs `steps[index]` and hands its output
/// (or its failure, as a `tool-error`) back to the adapter.
async fn call_step(
    mut store: StoreContextMut<'_, ComposeState>,
    index: usize,
    input: String,
) -> wasmtime::Result<(Result<String, ToolError>,)> {
    let Some(step) = store.data().steps.get(index).cloned() else {
        return Ok((Err(ToolError::Internal(format!(
            "no step {index} is linked"
        ))),));
    };
    let outcome = step.call.call(input).await;
    let state = store.data_mut();
    match outcome {
        Ok(out) => {
            state.logs.extend(out.logs.into_iter().map(|l| LogLine {
                level: l.level,
                message: format!("[{}] {}", step.name, l.message),
            }));
            Ok((Ok(out.output),))
        }
        Err(message) => {
            let error = ToolError::Internal(format!("step {:?} failed: {message}", step.name));
            state.failure.get_or_insert((index, message));
            Ok((Err(error),))
        }
    }
}

/// A [`StepCall`] from an async function of the input text.
pub fn step_fn<F, Fut>(f: F) -> Arc<dyn StepCall>
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<StepOutput, String>> + Send + 'static,
{
    struct FnStep<F>(F);
    impl<F, Fut> StepCall for FnStep<F>
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<StepOutput, String>> + Send + 'static,
    {
        fn call(&self, input: String) -> StepFuture<'_> {
            Box::pin((self.0)(input))
        }
    }
    Arc::new(FnStep(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::{check_adapter_imports, component_imports, generate};
    use serde_json::{Value, json};
    use std::time::Duration;
    use temper_runtime::limits::Limits;

    fn runtime(timeout_ms: u64) -> Runtime {
        Runtime::builder()
            .limits(Limits {
                timeout: Duration::from_millis(timeout_ms),
                ..Limits::default()
            })
            .cache_dir(None)
            .max_concurrent_instances(8)
            .build()
            .unwrap()
    }

    fn steps() -> Vec<Value> {
        json!([
            {"name": "search", "tool": "web_search", "inputMapping": {"q": "$input.topic", "n": 2}},
            {"name": "summarize_2", "tool": "generate_text",
             "inputMapping": {"prompt": "About $input.topic ($$0): $prev.output", "count": "$steps.search.count"}}
        ])
        .as_array()
        .unwrap()
        .clone()
    }

    fn echo(tag: &'static str) -> Arc<dyn StepCall> {
        step_fn(move |input: String| async move {
            let v: Value = serde_json::from_str(&input).unwrap();
            Ok(StepOutput {
                output: json!({"output": format!("{tag}<{v}>"), "count": 7}).to_string(),
                logs: vec![LogLine {
                    level: "info",
                    message: format!("{tag} ran"),
                }],
            })
        })
    }

    fn linked(calls: Vec<Arc<dyn StepCall>>) -> Vec<LinkedStep> {
        ["search", "summarize_2"]
            .iter()
            .zip(["web_search", "generate_text"])
            .zip(calls)
            .map(|((name, tool), call)| LinkedStep {
                name: name.to_string(),
                tool: tool.to_string(),
                call,
            })
            .collect()
    }

    async fn load(rt: &Runtime) -> ComposeTool {
        let bytes = generate(&steps()).unwrap();
        rt.load_compose(Arc::new(bytes), vec!["search".into(), "summarize_2".into()])
            .await
            .unwrap()
    }

    #[test]
    fn adapter_is_deterministic_and_imports_only_its_steps() {
        let a = generate(&steps()).unwrap();
        let b = generate(&steps()).unwrap();
        assert_eq!(a, b, "same steps, same bytes");
        let imports = component_imports(&a).unwrap();
        let names: Vec<&str> = imports.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["temper:tool/types@0.1.0", "search", "summarize2"],
            "{imports:?}"
        );
        check_adapter_imports(&a, &["search".into(), "summarize2".into()]).unwrap();
        // The check fails when the expected steps differ.
        assert!(check_adapter_imports(&a, &["search".into()]).is_err());
        assert!(
            check_adapter_imports(&a, &["search".into(), "x".into(), "summarize2".into()]).is_err()
        );
        // Another pipeline, other bytes.
        let mut other = steps();
        other[0]["inputMapping"]["n"] = json!(3);
        assert_ne!(generate(&other).unwrap(), a);
    }

    #[tokio::test]
    async fn runs_the_pipeline_with_linked_steps() {
        let rt = runtime(5_000);
        let tool = load(&rt).await;
        let out = rt
            .call_compose(
                &tool,
                linked(vec![echo("S"), echo("G")]),
                r#"{"topic":"wasm"}"#,
            )
            .await
            .unwrap();
        let v: Value = serde_json::from_str(&out.output).unwrap();
        assert_eq!(
            v,
            json!({"output": "G<{\"prompt\":\"About wasm ($0): S<{\\\"q\\\":\\\"wasm\\\",\\\"n\\\":2}>\",\"count\":7}>", "count": 7})
        );
        let logs: Vec<&str> = out.logs.iter().map(|l| l.message.as_str()).collect();
        assert_eq!(logs, ["[search] S ran", "[summarize_2] G ran"]);

        // A missing field: a clear error naming step and key, no step 2 call.
        let err = rt
            .call_compose(
                &tool,
                linked(vec![
                    step_fn(|_| async {
                        Ok(StepOutput {
                            output: r#"{"nothing":1}"#.into(),
                            logs: vec![],
                        })
                    }),
                    step_fn(|_| async { panic!("step 2 must not run") }),
                ]),
                r#"{"topic":"wasm"}"#,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err.error, RunError::BadInput { message } if message.contains("steps[1] (\"summarize_2\") inputMapping.prompt") && message.contains("\"output\"")),
            "{err}"
        );
        // Bad JSON input never reaches the adapter.
        let err = rt
            .call_compose(&tool, linked(vec![echo("S"), echo("G")]), "{")
            .await
            .unwrap_err();
        assert!(matches!(err.error, RunError::BadInput { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_failing_step_stops_the_pipeline_and_is_named() {
        let rt = runtime(5_000);
        let tool = load(&rt).await;
        let ran_second = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran_second.clone();
        let err = rt
            .call_compose(
                &tool,
                linked(vec![
                    step_fn(|_| async {
                        Err("run: the tool trapped: wasm `unreachable`".to_string())
                    }),
                    step_fn(move |_| {
                        flag.store(true, std::sync::atomic::Ordering::SeqCst);
                        async { Ok(StepOutput::default()) }
                    }),
                ]),
                r#"{"topic":"x"}"#,
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.error,
            RunError::Step {
                index: 0,
                step: "search".into(),
                tool: "web_search".into(),
                message: "run: the tool trapped: wasm `unreachable`".into(),
            }
        );
        assert!(!ran_second.load(std::sync::atomic::Ordering::SeqCst));
        // The runtime and the adapter keep working.
        rt.call_compose(
            &tool,
            linked(vec![echo("S"), echo("G")]),
            r#"{"topic":"y"}"#,
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn the_whole_run_is_bounded_by_the_timeout() {
        let rt = runtime(300);
        let tool = load(&rt).await;
        let started = std::time::Instant::now();
        let err = rt
            .call_compose(
                &tool,
                linked(vec![
                    echo("S"),
                    step_fn(|_| async {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        Ok(StepOutput::default())
                    }),
                ]),
                r#"{"topic":"x"}"#,
            )
            .await
            .unwrap_err();
        assert_eq!(err.error, RunError::Timeout { limit_ms: 300 });
        assert!(started.elapsed() < Duration::from_secs(10));
        rt.call_compose(
            &tool,
            linked(vec![echo("S"), echo("G")]),
            r#"{"topic":"y"}"#,
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn the_output_and_memory_caps_hold_for_the_adapter() {
        let rt = Runtime::builder()
            .limits(Limits {
                output_bytes: 1024,
                memory_bytes: 32 << 20,
                ..Limits::default()
            })
            .cache_dir(None)
            .max_concurrent_instances(8)
            .build()
            .unwrap();
        let tool = load(&rt).await;
        let big = |n: usize| {
            step_fn(move |_| async move {
                Ok(StepOutput {
                    output: json!({"output": "x".repeat(n), "count": 1}).to_string(),
                    logs: vec![],
                })
            })
        };
        // The last step's output passes through the adapter: over the cap.
        let err = rt
            .call_compose(
                &tool,
                linked(vec![echo("S"), big(2048)]),
                r#"{"topic":"x"}"#,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                err.error,
                RunError::OutputTooLarge {
                    limit_bytes: 1024,
                    ..
                }
            ),
            "{err}"
        );
        // A step output larger than the adapter's memory cap: copied into
        // the dispatcher's memory, refused there, reported as memory.
        let err = rt
            .call_compose(
                &tool,
                linked(vec![big(40 << 20), echo("G")]),
                r#"{"topic":"x"}"#,
            )
            .await
            .unwrap_err();
        assert!(matches!(err.error, RunError::Memory { .. }), "{err}");
        // Under both caps it runs.
        rt.call_compose(&tool, linked(vec![echo("S"), big(100)]), r#"{"topic":"x"}"#)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_component_importing_more_than_its_steps_is_refused() {
        let rt = runtime(1_000);
        let bytes = generate(&steps()).unwrap();
        // Linked against other step names: its imports do not match.
        let err = rt
            .load_compose(Arc::new(bytes), vec!["search".into(), "other".into()])
            .await
            .err()
            .expect("refused");
        assert!(
            matches!(err, LoadError::ImportNotAllowed(ref n) if n == "summarize2"),
            "{err}"
        );
    }
}
