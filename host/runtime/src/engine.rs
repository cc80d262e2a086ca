//! The shared wasmtime engine: pooling allocator, epoch interruption driven
//! by a ticker thread, and an on-disk cache of compiled components.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use wasmtime::component::Component;
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the ticker thread advances the engine's epoch.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Engine settings that must be fixed before anything is compiled.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// The largest linear memory any store may use (the pool's slot size).
    pub max_memory_bytes: usize,
    /// How many stores may be live at once for calls and builds.
    pub max_concurrent_instances: u32,
    /// Extra pool slots for pre-warmed instances (held between calls).
    pub warm_instances: u32,
    /// Bytes of each linear-memory slot kept resident between uses (reset in
    /// place instead of released): size it to what a call dirties.
    pub keep_resident_bytes: usize,
    /// Where compiled components are cached (`None` disables the cache).
    pub cache_dir: Option<PathBuf>,
    /// Cap on the on-disk compile cache, in bytes: past it, the least
    /// recently used files are removed.
    pub cache_max_bytes: u64,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            max_memory_bytes: crate::Limits::default().memory_bytes,
            max_concurrent_instances: 64,
            warm_instances: 0,
            keep_resident_bytes: DEFAULT_KEEP_RESIDENT,
            cache_dir: default_cache_dir(),
            cache_max_bytes: DEFAULT_CACHE_MAX_BYTES,
        }
    }
}

/// Pool slots for used stores waiting to be dropped off the request path
/// (the runtime's reaper holds at most this many), on top of
/// [`EngineOptions::max_concurrent_instances`] and the pre-warmed ones.
pub(crate) const RETIRING_SLOTS: u32 = 32;

/// Default [`EngineOptions::keep_resident_bytes`]: a call of a small JS tool
/// on the shared engine dirties a few hundred KiB of its memory slot.
pub const DEFAULT_KEEP_RESIDENT: usize = 1 << 20;

/// Default [`EngineOptions::cache_max_bytes`].
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 1 << 30;

/// `$XDG_CACHE_HOME/temper/compiled` (or the platform's cache directory).
pub fn default_cache_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join("temper").join("compiled"))
}

/// A wasmtime engine with its ticker and compile cache.
pub struct TemperEngine {
    engine: Engine,
    cache_dir: Option<PathBuf>,
    cache_max_bytes: u64,
    cache_tag: String,
    _ticker: Arc<()>,
}

impl TemperEngine {
    /// Builds the engine and starts its epoch ticker.
    pub fn new(options: &EngineOptions) -> wasmtime::Result<Self> {
        let mut pool = PoolingAllocationConfig::default();
        let slots =
            options.max_concurrent_instances.max(1) + options.warm_instances + RETIRING_SLOTS;
        pool.total_component_instances(slots)
            .total_core_instances(slots * 8)
            .total_memories(slots * 2)
            .total_tables(slots * 4)
            .total_stacks(slots)
            .max_memory_size(options.max_memory_bytes)
            // Reset only the pages a call dirtied (PAGEMAP_SCAN, Linux ≥ 6.7)
            // and keep them resident: no page faults on the next call.
            .linear_memory_keep_resident(options.keep_resident_bytes)
            .table_keep_resident(1 << 20)
            .pagemap_scan(Enabled::Auto);
        let mut config = Config::new();
        config
            .epoch_interruption(true)
            .max_wasm_stack(1 << 20)
            .async_stack_size(4 << 20)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // For profiling only: `TEMPER_PERFMAP=1` writes /tmp/perf-PID.map so
        // `perf report` names guest functions (needs the guest's name section).
        if std::env::var_os("TEMPER_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config)?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let cache_tag = format!("{:016x}", hasher.finish());
        let ticker = Arc::new(());
        spawn_ticker(engine.clone(), Arc::downgrade(&ticker));
        Ok(Self {
            engine,
            cache_dir: options.cache_dir.clone(),
            cache_max_bytes: options.cache_max_bytes,
            cache_tag,
            _ticker: ticker,
        })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compiles `bytes`, or loads the compiled form from the cache when this
    /// engine compiled the same bytes before.
    pub fn compile(&self, bytes: &[u8]) -> wasmtime::Result<Component> {
        let Some(dir) = &self.cache_dir else {
            return Component::new(&self.engine, bytes);
        };
        let path = dir.join(format!(
            "{}-{}.cwasm",
            blake3::hash(bytes).to_hex(),
            self.cache_tag
        ));
        if path.exists() {
            // SAFETY: files in the cache directory are written only by
            // `precompile_component` of an engine with the same compatibility
            // hash (it is in the name); the directory is created private.
            if let Ok(component) = unsafe { Component::deserialize_file(&self.engine, &path) } {
                touch(&path);
                return Ok(component);
            }
        }
        let compiled = self.engine.precompile_component(bytes)?;
        // A failed cache write only costs a recompile next time.
        if write_private_atomically(dir, &path, &compiled).is_ok() {
            self.trim_cache(dir);
        }
        // SAFETY: `compiled` was just produced by this engine.
        unsafe { Component::deserialize(&self.engine, &compiled) }
    }
}

impl TemperEngine {
    /// The compile cache's directory, if any.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// A file the runtime keeps next to the compiled components (e.g. the
    /// engine snapshot, bytecode records), by name; `None` when absent or
    /// without a cache.
    pub(crate) fn cache_get(&self, name: &str) -> Option<Vec<u8>> {
        let path = self.cache_dir.as_ref()?.join(name);
        let bytes = std::fs::read(&path).ok()?;
        touch(&path);
        Some(bytes)
    }

    /// Writes a cache file by name (private, atomically, not synced: a cache
    /// file lost in a crash only costs a rebuild); trims the cache now and
    /// then.
    pub(crate) fn cache_put(&self, name: &str, bytes: &[u8]) {
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let Some(dir) = &self.cache_dir else {
            return;
        };
        if write_private_unsynced(dir, &dir.join(name), bytes).is_ok()
            && WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 256 == 255
        {
            self.trim_cache(dir);
        }
    }

    /// Removes the least recently used cache files until the directory is
    /// within [`EngineOptions::cache_max_bytes`]. Removing a file that is
    /// mapped (a loaded component) is safe: the mapping stays valid.
    fn trim_cache(&self, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
            .filter_map(|e| {
                let e = e.ok()?;
                let meta = e.metadata().ok()?;
                if !meta.is_file() {
                    return None;
                }
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        if total <= self.cache_max_bytes {
            return;
        }
        files.sort();
        for (_, len, path) in files {
            if total <= self.cache_max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

/// Marks a cache file as used now (its mtime orders eviction).
fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(std::time::SystemTime::now());
    }
}

fn spawn_ticker(engine: Engine, alive: Weak<()>) {
    std::thread::Builder::new()
        .name("temper-epoch".into())
        .spawn(move || {
            while alive.strong_count() > 0 {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        })
        .expect("spawn epoch ticker");
}

/// Creates the cache directory private (0700), then writes atomically.
fn write_private_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    crate::fsutil::write_atomically(path, bytes)
}

/// Like [`write_private_atomically`] without the fsync.
fn write_private_unsynced(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}
