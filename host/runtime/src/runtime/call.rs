//! Calling: one fresh instance per call (pre-warmed for hot tools), the
//! deadline, trap classification and the output cap.

use crate::error::RunError;
use crate::host_state::{HostState, LogLine};
use crate::limits::Limits;
use crate::pool::{Ready, WarmKey};
use std::sync::Arc;
use std::time::Instant;
use temper_policy::Grants;
use wasmtime::{Store, Trap, UpdateDeadline};

use super::*;

/// How a guest call under the deadline ended: the deadline passed, the
/// guest trapped, or it returned.
pub type CallOutcome =
    Result<Result<Result<String, RunError>, wasmtime::Error>, tokio::time::error::Elapsed>;

/// The call envelope, first half (tools and compose adapters alike): a
/// passed deadline is a [`RunError::Timeout`], a trap is classified
/// ([`classify_trap_with`]), else what the guest returned, with a JS or
/// internal error after a refused memory growth classified as
/// [`RunError::Memory`] ([`memory_after_refusal`]).
pub fn settle(outcome: CallOutcome, memory_hit: bool, limits: &Limits) -> Result<String, RunError> {
    match outcome {
        Err(_elapsed) => Err(RunError::Timeout {
            limit_ms: limits.timeout.as_millis() as u64,
        }),
        Ok(Err(trap)) => Err(classify_trap_with(memory_hit, &trap, limits)),
        Ok(Ok(Err(error))) if memory_hit => Err(memory_after_refusal(error, limits)),
        Ok(Ok(result)) => result,
    }
}

/// A guest error reported after the memory limiter refused a growth.
///
/// QuickJS does not always say "out of memory" when its allocator fails:
/// pushing objects into an array until the cap throws an `InternalError`
/// whose message could not be allocated (`InternalError: ` and nothing
/// else), and a tool may catch the first failure and throw its own. The
/// limiter knows the cap was hit, so a JS or internal error from that call
/// is the memory cap, whatever QuickJS threw; its text is kept as the
/// detail. Other kinds (a capability refusal, bad input, a failed callee)
/// stay what they are.
pub fn memory_after_refusal(error: RunError, limits: &Limits) -> RunError {
    let thrown = match &error {
        RunError::Js { error } => error.message.clone(),
        RunError::Internal { message } => message.clone(),
        _ => return error,
    };
    RunError::Memory {
        limit_bytes: limits.memory_bytes,
        detail: format!("linear memory growth refused at the cap; the tool then threw: {thrown}"),
    }
}

/// The call envelope, second half: the output cap, the memory limit named
/// in a memory error, and the console lines with either outcome.
pub fn deliver(
    result: Result<String, RunError>,
    logs: Vec<LogLine>,
    limits: &Limits,
    compiled: bool,
) -> Result<CallOutput, CallFailure> {
    match result {
        Ok(output) if output.len() > limits.output_bytes => Err(CallFailure {
            error: RunError::OutputTooLarge {
                actual_bytes: output.len(),
                limit_bytes: limits.output_bytes,
            },
            logs,
        }),
        Ok(output) => Ok(CallOutput {
            output,
            logs,
            compiled,
        }),
        Err(RunError::Memory { detail, .. }) => Err(CallFailure {
            error: RunError::Memory {
                limit_bytes: limits.memory_bytes,
                detail,
            },
            logs,
        }),
        Err(error) => Err(CallFailure { error, logs }),
    }
}

/// Interrupts the store's guest once `timeout` has passed (the engine's
/// epoch ticker drives the check; the guest yields between ticks).
pub fn arm_deadline<T>(store: &mut Store<T>, timeout: std::time::Duration) {
    let deadline = Instant::now() + timeout;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
}

/// An instantiation that failed before any guest code ran (e.g. every
/// pool slot taken: more instances at once than the runtime was built
/// for): [`RunError::Instantiate`], not a trap.
pub fn instantiate_failed(err: &wasmtime::Error) -> RunError {
    RunError::Instantiate {
        message: format!("{err:#}"),
    }
}

pub(super) fn classify_trap(
    store: &Store<HostState>,
    err: &wasmtime::Error,
    limits: &Limits,
) -> RunError {
    classify_trap_with(store.data().memory.hit, err, limits)
}

/// What a trap means: the timeout, the memory cap (when `memory_hit`), or
/// a plain trap.
pub(crate) fn classify_trap_with(
    memory_hit: bool,
    err: &wasmtime::Error,
    limits: &Limits,
) -> RunError {
    if matches!(err.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        return RunError::Timeout {
            limit_ms: limits.timeout.as_millis() as u64,
        };
    }
    if memory_hit {
        return RunError::Memory {
            limit_bytes: limits.memory_bytes,
            detail: "linear memory growth refused at the cap".into(),
        };
    }
    let message = match err.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{err:#}"),
    };
    RunError::Trap { message }
}

pub(super) fn describe_trap(
    store: &Store<HostState>,
    err: &wasmtime::Error,
    limits: &Limits,
) -> String {
    match classify_trap(store, err, limits) {
        RunError::Timeout { limit_ms } => format!("ran past the {limit_ms} ms limit"),
        RunError::Memory { limit_bytes, .. } => format!("ran out of memory ({limit_bytes} bytes)"),
        other => format!("trapped: {other}"),
    }
}

/// When a call must be over and where it sits in a call tree.
#[derive(Debug, Clone, Copy)]
pub(super) struct CallAt {
    /// Its own deadline, or the call tree's when that is sooner.
    pub(super) deadline: Instant,
    /// Its depth in the call tree (0: a top-level call).
    pub(super) depth: usize,
}

impl CallAt {
    /// The time left until the deadline.
    fn remaining(&self) -> std::time::Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// What a JS tool's instances are made from: the shared engine and its
/// bytecode, or its promoted compiled snapshot (`promote`).
#[derive(Clone)]
pub(super) enum Source {
    Engine(Arc<Vec<u8>>),
    Promoted(Arc<Compiled>),
}

/// [`Source`] with the shared engine at hand.
enum Maker<'a> {
    Engine(&'a EngineRuntime, &'a [u8]),
    Promoted(&'a Compiled),
}

impl Runtime {
    /// Calls `tool` with a JSON `input` in a fresh instance under the limits:
    /// a pre-warmed one when the tool is hot, else one made now.
    pub async fn call(&self, tool: &Tool, input: &str) -> Result<CallOutput, CallFailure> {
        let limits = &self.inner.limits;
        let fail = |error| CallFailure {
            error,
            logs: Vec::new(),
        };
        self.check_input(input).map_err(fail)?;
        // Inside a tool call's callee, the call tree's deadline and depth.
        // The call's own deadline starts once what it runs on is compiled
        // (a one-time cost of the host, not the call's).
        let scope = crate::capabilities::tool_calls::current_scope();
        // A top-level call keeps a core busy (a callee runs on its caller's).
        let _busy = scope.is_none().then(|| self.inner.reaper.busy());
        let at = || {
            let own = Instant::now() + limits.timeout;
            CallAt {
                deadline: scope.map_or(own, |s| s.deadline.min(own)),
                depth: scope.map_or(0, |s| s.depth),
            }
        };
        match &tool.inner.form {
            ToolForm::Engine { bytecode } => {
                self.engine_rt().await.map_err(|e| {
                    fail(RunError::Instantiate {
                        message: e.to_string(),
                    })
                })?;
                let source = match self.promoted(tool, bytecode) {
                    Some(compiled) => Source::Promoted(compiled),
                    None => Source::Engine(bytecode.clone()),
                };
                self.call_warm(tool, source, input, at()).await
            }
            ToolForm::Component { artifact } => {
                let compiled = self.compiled(&tool.inner.id, artifact).await.map_err(|e| {
                    fail(RunError::Instantiate {
                        message: e.to_string(),
                    })
                })?;
                self.call_compiled(tool, &compiled, input, at()).await
            }
            ToolForm::Pinned { compiled, .. } => {
                self.call_compiled(tool, compiled, input, at()).await
            }
        }
    }

    pub(super) async fn call_compiled(
        &self,
        tool: &Tool,
        compiled: &Compiled,
        input: &str,
        call: CallAt,
    ) -> Result<CallOutput, CallFailure> {
        let mut granted = self.granted(&tool.grants, call.deadline);
        granted.calls = self.call_context(tool, call.depth);
        let mut store = self
            .new_store_granted(self.call_clocks(), false, granted)
            .map_err(|message| CallFailure {
                error: RunError::Instantiate { message },
                logs: Vec::new(),
            })?;
        arm_deadline(&mut store, call.remaining());
        let outcome = tokio::time::timeout(call.remaining(), async {
            let instance = match compiled.pre.instantiate_async(&mut store).await {
                Ok(instance) => instance,
                Err(e) => return Ok(Err(instantiate_failed(&e))),
            };
            let run = compiled.run.load(&mut store, &instance)?;
            run.call_call(&mut store, input)
                .await
                .map(|r| r.map_err(RunError::from))
        })
        .await;
        self.finish(store, outcome, true)
    }

    /// A call of a JS tool this host can run from its bytecode: a
    /// pre-warmed instance of the tool if one waits, else one made now from
    /// `source` — a fresh engine instance into which the bytecode is loaded
    /// (under the build's fixed clocks, as the build's snapshot was), or a
    /// fresh instance of the tool's promoted snapshot; then `execute`, on
    /// the call's clocks. Afterwards the tool's pre-warmed instances are
    /// topped up in the background.
    pub(super) async fn call_warm(
        &self,
        tool: &Tool,
        source: Source,
        input: &str,
        call: CallAt,
    ) -> Result<CallOutput, CallFailure> {
        let fail = |message| CallFailure {
            error: RunError::Instantiate { message },
            logs: Vec::new(),
        };
        // What an instance is made from when none waits.
        let maker = match &source {
            Source::Engine(bytecode) => {
                let engine = self.engine_rt().await.map_err(|e| fail(e.to_string()))?;
                Maker::Engine(engine, bytecode)
            }
            Source::Promoted(compiled) => Maker::Promoted(compiled),
        };
        let key = tool.warm_key();
        let wants_compiled = matches!(maker, Maker::Promoted(_));
        // An instance made before the tool changed form (a refill that was
        // running when it was promoted or demoted) is dropped: calls run
        // on the form the tool has now.
        let waiting = self.inner.warm.take(&key).and_then(|ready| {
            if ready.compiled == wants_compiled {
                Some(ready)
            } else {
                self.retire(ready.store);
                None
            }
        });
        let (mut store, ready, compiled) = match waiting {
            Some(Ready {
                mut store,
                run,
                compiled,
            }) => {
                store.data_mut().set_deadline(call.deadline);
                store
                    .data_mut()
                    .set_calls(self.call_context(tool, call.depth));
                (store, Some(run), compiled)
            }
            None => {
                let mut granted = self.granted(&tool.grants, call.deadline);
                granted.calls = self.call_context(tool, call.depth);
                let store = self
                    .new_store_granted(self.call_clocks(), !wants_compiled, granted)
                    .map_err(fail)?;
                (store, None, wants_compiled)
            }
        };
        arm_deadline(&mut store, call.remaining());
        let outcome = tokio::time::timeout(call.remaining(), async {
            let run = match (ready, maker) {
                (Some(run), _) => run,
                (None, Maker::Engine(engine, bytecode)) => {
                    let instance = match engine.pre.instantiate_async(&mut store).await {
                        Ok(instance) => instance,
                        Err(e) => return Ok(Err(instantiate_failed(&e))),
                    };
                    let shim = engine.shim.load(&mut store, &instance)?;
                    if let Err(e) = shim.call_load(&mut store, &[], bytecode).await? {
                        return Ok(Err(RunError::from(e)));
                    }
                    store.data_mut().reset_after_load();
                    engine.run.load(&mut store, &instance)?
                }
                (None, Maker::Promoted(compiled)) => {
                    let instance = match compiled.pre.instantiate_async(&mut store).await {
                        Ok(instance) => instance,
                        Err(e) => return Ok(Err(instantiate_failed(&e))),
                    };
                    compiled.run.load(&mut store, &instance)?
                }
            };
            store.data().fixed.set_fixed(false);
            run.call_call(&mut store, input)
                .await
                .map(|r| r.map_err(RunError::from))
        })
        .await;
        let result = self.finish(store, outcome, compiled);
        if !tool.inner.one_shot {
            self.refill(key, source, tool.grants);
        }
        result
    }

    /// Tops up the pre-warmed instances of a tool (making it hot), in a
    /// background task, unless one runs already or the pool is off.
    pub(super) fn refill(&self, key: WarmKey, source: Source, grants: Grants) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.inner.warm.start_refill(&key) {
            return;
        }
        let rt = self.clone();
        // In a `RetireAfter` scope (a thread answering the call itself),
        // started once the answer is out.
        reaper::run_after_scope(move || {
            handle.spawn(async move {
                while rt.inner.warm.reserve(&key) {
                    match rt.prepare(&source, &grants).await {
                        Some(ready) => rt.inner.warm.put(&key, ready),
                        None => {
                            rt.inner.warm.abort(&key);
                            break;
                        }
                    }
                }
            });
        });
    }

    /// One pre-warmed instance, never called: a fresh engine instance with
    /// the bytecode loaded under the build's fixed clocks (still on; the
    /// call switches them), or a fresh instance of the promoted snapshot.
    /// `None` when it cannot be made (no pool slot free, or the load
    /// failed): calls then make their own.
    pub(super) async fn prepare(&self, source: &Source, grants: &Grants) -> Option<Ready> {
        // Not counted as busy (see `Reaper::busy`): a lone call that ends
        // while its refill runs still hands its store to the reaper, so
        // the drop does not delay its answer.
        let limits = &self.inner.limits;
        let granted = self.granted(grants, Instant::now() + limits.timeout);
        match source {
            Source::Engine(bytecode) => {
                let engine = self.engine_rt().await.ok()?;
                let mut store = self
                    .new_store_granted(self.call_clocks(), true, granted)
                    .ok()?;
                let loaded = tokio::time::timeout(limits.timeout, async {
                    let instance = engine.pre.instantiate_async(&mut store).await?;
                    let shim = engine.shim.load(&mut store, &instance)?;
                    let loaded = shim.call_load(&mut store, &[], bytecode).await?;
                    Ok::<_, wasmtime::Error>(loaded.ok().map(|()| instance))
                })
                .await;
                let Ok(Ok(Some(instance))) = loaded else {
                    return None;
                };
                // The export is looked up here, not on the call.
                let run = engine.run.load(&mut store, &instance).ok()?;
                store.data_mut().reset_after_load();
                Some(Ready {
                    store,
                    run,
                    compiled: false,
                })
            }
            Source::Promoted(compiled) => {
                let mut store = self
                    .new_store_granted(self.call_clocks(), false, granted)
                    .ok()?;
                let instance = compiled.pre.instantiate_async(&mut store).await.ok()?;
                let run = compiled.run.load(&mut store, &instance).ok()?;
                Some(Ready {
                    store,
                    run,
                    compiled: true,
                })
            }
        }
    }

    /// Opens a [`RetireAfter`] scope on this thread: the stores its calls
    /// retire until the scope ends are dropped by this thread then, not
    /// handed to the reaper, and the pre-warm refills they start are
    /// spawned then (for a thread that answers a call itself and can do
    /// both after the answer is out, with no wake-up before it).
    pub fn retire_after() -> RetireAfter {
        RetireAfter::open()
    }

    /// Drops a used store off the request path (resetting its instance's
    /// memory slot costs about as much as the call): on the reaper thread,
    /// or here when the reaper is behind or every core is busy with calls.
    pub(super) fn retire(&self, store: Store<HostState>) {
        self.inner.reaper.retire(store);
    }

    /// Turns a tool call's outcome and its store into what the caller gets
    /// (see [`settle`] and [`deliver`]); the store goes to the reaper.
    pub(super) fn finish(
        &self,
        mut store: Store<HostState>,
        outcome: CallOutcome,
        compiled: bool,
    ) -> Result<CallOutput, CallFailure> {
        let limits = &self.inner.limits;
        let mut result = settle(outcome, store.data().memory.hit, limits);
        if let Err(e) = &mut result {
            self.inner.observe_denial(e);
            name_granted_dirs(e, self.policy());
        }
        let logs = std::mem::take(&mut store.data_mut().console).into_lines();
        self.retire(store);
        deliver(result, logs, limits, compiled)
    }
}

/// What the shim says for a path outside every granted directory (the guest
/// knows its preopens only by descriptor, not by name); see `open_error` in
/// `guest-js-shim/src/host_bridge.rs`.
pub(crate) const OUTSIDE_GRANTED_DIRS: &str = "path outside the granted directories: ";

/// A file refusal names the directories the tool may read (their guest
/// paths, capped), so the agent can retry with a path inside one: the
/// guest cannot name them, the host can.
pub(crate) fn name_granted_dirs(error: &mut RunError, policy: &temper_policy::HostPolicy) {
    if let RunError::Js { error } = error
        && error.message.contains(OUTSIDE_GRANTED_DIRS)
        && !error.message.contains("; the granted directories: ")
    {
        error.message.push_str(&format!(
            "; the granted directories: {} (read a path inside one, like {}/FILE; a link \
             inside one that leads out of it is refused too)",
            policy.granted_dirs(),
            policy
                .read_dirs
                .first()
                .map_or("/data", |d| d.guest.trim_end_matches('/'))
        ));
    }
}
