//! `Runtime`: agent code run without a registry (what
//! `temper-forge/agentos`'s `TemperSandboxForge` runs on). Each distinct
//! code and allowlist is built once (static check, QuickJS bytecode,
//! snapshot) and kept in a bounded LRU cache keyed by the blake3 of both;
//! every call runs in a fresh instance under the runtime's limits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hashlink::LruCache;
use napi_derive::napi;
use serde_json::{Value, json};
use temper_embed::{ErrorKind, Failure};
use temper_runtime::runtime::Tool;

use crate::cancel;
use crate::errors::to_napi;
use crate::forge::build_runtime;
use crate::pump::Channel;
use napi::bindgen_prelude::External;

/// Built tools kept by default.
pub const DEFAULT_CACHE_ENTRIES: u32 = 256;
/// The most built tools a runtime keeps (each holds its bytecode, a few KB
/// to a few hundred KB).
pub const MAX_CACHE_ENTRIES: u32 = 65_536;

/// How `Runtime.create` builds a runtime.
#[napi(object)]
#[derive(Default)]
pub struct RuntimeCreateOptions {
    /// The host policy: a TOML file's path, or an object with its keys.
    /// Default: everything denied.
    #[napi(ts_type = "string | Record<string, unknown>")]
    pub policy: Option<Value>,
    /// Wall clock per call, ms (default 5000).
    pub timeout_ms: Option<u32>,
    /// Linear memory per call, MiB (default 128).
    pub memory_mb: Option<u32>,
    /// Built tools kept (default 256, at most 65536).
    pub cache_entries: Option<u32>,
    /// The compiled-component cache directory (default: the platform's).
    pub cache_dir: Option<String>,
}

/// What `runtime.execute` takes besides code, input and allowlist.
#[napi(object)]
#[derive(Default)]
pub struct ExecuteOptions {
    /// A wall clock for this call shorter than the runtime's, ms.
    pub timeout_ms: Option<u32>,
    /// Set by `index.cjs` from an `AbortSignal`.
    pub cancel_id: Option<u32>,
}

/// The build cache's counters.
#[napi(object)]
pub struct CacheStats {
    /// Built tools held.
    pub entries: u32,
    /// The bound.
    pub capacity: u32,
    /// Calls that found their tool built.
    pub hits: f64,
    /// Calls that built it.
    pub builds: f64,
}

/// A sandbox runtime with a bounded cache of built tools.
#[napi]
pub struct Runtime {
    inner: Arc<Inner>,
}

/// What a [`Runtime`] and its calls in flight share.
struct Inner {
    runtime: temper_runtime::Runtime,
    cache: Mutex<LruCache<[u8; 32], Tool>>,
    capacity: u32,
    hits: AtomicU64,
    builds: AtomicU64,
}

/// The cache key of `code` granted `allowlist`: blake3 over both, each
/// length-prefixed so that no two pairs share a key.
pub fn cache_key(code: &str, allowlist: &[String]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(&(code.len() as u64).to_le_bytes());
    h.update(code.as_bytes());
    h.update(&(allowlist.len() as u64).to_le_bytes());
    for a in allowlist {
        h.update(&(a.len() as u64).to_le_bytes());
        h.update(a.as_bytes());
    }
    *h.finalize().as_bytes()
}

#[napi]
impl Runtime {
    /// A runtime with `options`' policy and limits.
    #[napi(ts_args_type = "options?: RuntimeCreateOptions")]
    pub fn create(options: Option<RuntimeCreateOptions>) -> napi::Result<Runtime> {
        let o = options.unwrap_or_default();
        let capacity = o
            .cache_entries
            .unwrap_or(DEFAULT_CACHE_ENTRIES)
            .clamp(1, MAX_CACHE_ENTRIES);
        let runtime = build_runtime(o.policy.as_ref(), o.timeout_ms, o.memory_mb, o.cache_dir)?;
        Ok(Runtime {
            inner: Arc::new(Inner {
                runtime,
                cache: Mutex::new(LruCache::new(capacity as usize)),
                capacity,
                hits: AtomicU64::new(0),
                builds: AtomicU64::new(0),
            }),
        })
    }

    /// Runs `code` (defining `execute(input)`, or AgentOS's `run(input)`)
    /// with `input`, granted `allowlist` ∩ the policy, in a fresh instance.
    /// Resolves to the output. (The addon takes the input and returns the
    /// output as JSON text, as the guest does: `index.cjs` stringifies and
    /// parses, and sends the call through the call pump; this `async fn` is
    /// the direct path.)
    #[napi(
        ts_args_type = "code: string, input: unknown, allowlist: string[], options?: { timeoutMs?: number, signal?: AbortSignal }",
        ts_return_type = "Promise<any>"
    )]
    pub async fn execute(
        &self,
        code: String,
        input: String,
        allowlist: Vec<String>,
        options: Option<ExecuteOptions>,
    ) -> napi::Result<String> {
        let options = options.unwrap_or_default();
        self.inner
            .execute(
                &code,
                &input,
                &allowlist,
                options.timeout_ms,
                options.cancel_id,
            )
            .await
    }

    /// `execute` through the call pump ([`crate::pump`]): queues the call
    /// and returns at once; its answer comes through `channel` under
    /// `ticket`.
    #[napi(skip_typescript)]
    #[allow(clippy::too_many_arguments)]
    pub fn execute_start(
        &self,
        channel: &External<Channel>,
        ticket: u32,
        code: String,
        input: String,
        allowlist: Vec<String>,
        timeout_ms: Option<u32>,
        cancel_id: Option<u32>,
    ) {
        let inner = self.inner.clone();
        channel.submit(
            ticket,
            Box::pin(async move {
                inner
                    .execute(&code, &input, &allowlist, timeout_ms, cancel_id)
                    .await
            }),
        );
    }

    /// Times `count` runs of `code` with `input` granted `allowlist` made
    /// inside Rust (the cached build, then a fresh instance, as `execute`
    /// runs them, without crossing into JavaScript), one after another on
    /// a tokio worker: each run's wall time, µs.
    #[napi(ts_return_type = "Promise<number[]>")]
    pub async fn time_executes(
        &self,
        code: String,
        input: String,
        allowlist: Vec<String>,
        count: u32,
    ) -> napi::Result<Vec<f64>> {
        let mut times = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let started = std::time::Instant::now();
            self.inner
                .execute(&code, &input, &allowlist, None, None)
                .await?;
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        Ok(times)
    }

    /// Temper's static check of `code` (the one the forge runs, on the
    /// source it builds): one line per blocked API use, in source order,
    /// as the forge's refusal lists them; empty when there is none.
    /// Synchronous, as AgentOS's `validateCode` is.
    #[napi]
    pub fn static_check(&self, code: String) -> Vec<String> {
        let source = temper_forge::agentos::temper_source(&code);
        match temper_runtime::static_check::check(&source) {
            Ok(()) => Vec::new(),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }

    /// Checks `code` without running it: the static check and the compile
    /// (syntax). Resolves to `{ valid, violations }`, as AgentOS's
    /// `validateCode` returns.
    #[napi(ts_return_type = "Promise<{ valid: boolean, violations: string[] }>")]
    pub async fn validate(&self, code: String) -> napi::Result<Value> {
        let source = temper_forge::agentos::temper_source(&code);
        let checked = match temper_runtime::static_check::check(&source) {
            Ok(()) => self
                .inner
                .runtime
                .compile_on_engine(&source)
                .await
                .map(|_| ()),
            Err(e) => Err(e.into()),
        };
        Ok(match checked {
            Ok(()) => json!({"valid": true, "violations": []}),
            Err(e) => json!({"valid": false, "violations": [e.to_string()]}),
        })
    }

    /// The build cache's counters.
    #[napi]
    pub fn cache_stats(&self) -> CacheStats {
        let entries = self
            .inner
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len();
        CacheStats {
            entries: entries as u32,
            capacity: self.inner.capacity,
            hits: self.inner.hits.load(Ordering::Relaxed) as f64,
            builds: self.inner.builds.load(Ordering::Relaxed) as f64,
        }
    }
}

impl Inner {
    fn cached(&self, key: &[u8; 32]) -> Option<Tool> {
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    /// The built tool of `code` granted `allowlist`, from the cache or
    /// built now (AgentOS's `run(input)` entry point is adapted).
    async fn tool(&self, code: &str, allowlist: &[String]) -> Result<Tool, Failure> {
        let key = cache_key(code, allowlist);
        if let Some(tool) = self.cached(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(tool);
        }
        let source = temper_forge::agentos::temper_source(code);
        let artifact = self.runtime.build(&source).await?;
        let tool = self
            .runtime
            .grant(&self.runtime.tool(&artifact), allowlist)?;
        self.builds.fetch_add(1, Ordering::Relaxed);
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, tool.clone());
        Ok(tool)
    }

    /// [`Runtime::execute`]: the output's JSON text.
    async fn execute(
        &self,
        code: &str,
        input: &str,
        allowlist: &[String],
        timeout_ms: Option<u32>,
        cancel_id: Option<u32>,
    ) -> napi::Result<String> {
        let limit = timeout_ms.map(|ms| Duration::from_millis(ms.into()));
        let run = async {
            let tool = self.tool(code, allowlist).await?;
            let call = self.runtime.call(&tool, input);
            let out = match limit.filter(|l| *l < self.runtime.limits().timeout) {
                None => call.await?,
                Some(l) => match tokio::time::timeout(l, call).await {
                    Ok(out) => out?,
                    Err(_) => {
                        return Err(Failure {
                            kind: ErrorKind::Timeout {
                                limit_ms: l.as_millis() as u64,
                            },
                            message: format!("timeout: the call ran past {} ms", l.as_millis()),
                            logs: Vec::new(),
                            result: None,
                        });
                    }
                },
            };
            Ok(out.output)
        };
        match cancel::run(cancel_id, run).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(f)) => Err(to_napi(f)),
            Err(cancel::Cancelled) => Err(napi::Error::from_reason("TEMPER_CANCELLED")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cache_key;

    #[test]
    fn keys_separate_code_and_allowlist() {
        let a = cache_key("ab", &["c".into()]);
        assert_eq!(a, cache_key("ab", &["c".into()]));
        assert_ne!(a, cache_key("a", &["bc".into()]));
        assert_ne!(a, cache_key("ab", &[]));
        assert_ne!(a, cache_key("ab", &["c".into(), String::new()]));
    }
}
