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
    /// How many stores may be live at once (pool size).
    pub max_concurrent_instances: u32,
    /// Where compiled components are cached (`None` disables the cache).
    pub cache_dir: Option<PathBuf>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            max_memory_bytes: crate::Limits::default().memory_bytes,
            max_concurrent_instances: 64,
            cache_dir: default_cache_dir(),
        }
    }
}

/// `$XDG_CACHE_HOME/temper/compiled` (or the platform's cache directory).
pub fn default_cache_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join("temper").join("compiled"))
}

/// A wasmtime engine with its ticker and compile cache.
pub struct TemperEngine {
    engine: Engine,
    cache_dir: Option<PathBuf>,
    cache_tag: String,
    _ticker: Arc<()>,
}

impl TemperEngine {
    /// Builds the engine and starts its epoch ticker.
    pub fn new(options: &EngineOptions) -> wasmtime::Result<Self> {
        let mut pool = PoolingAllocationConfig::default();
        let slots = options.max_concurrent_instances.max(1);
        pool.total_component_instances(slots)
            .total_core_instances(slots * 8)
            .total_memories(slots * 2)
            .total_tables(slots * 4)
            .total_stacks(slots)
            .max_memory_size(options.max_memory_bytes)
            // Reset only the pages a call dirtied (PAGEMAP_SCAN, Linux ≥ 6.7)
            // and keep them resident: no page faults on the next call.
            .linear_memory_keep_resident(16 << 20)
            .table_keep_resident(1 << 20)
            .pagemap_scan(Enabled::Auto);
        let mut config = Config::new();
        config
            .epoch_interruption(true)
            .max_wasm_stack(1 << 20)
            .async_stack_size(4 << 20)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let cache_tag = format!("{:016x}", hasher.finish());
        let ticker = Arc::new(());
        spawn_ticker(engine.clone(), Arc::downgrade(&ticker));
        Ok(Self {
            engine,
            cache_dir: options.cache_dir.clone(),
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
                return Ok(component);
            }
        }
        let compiled = self.engine.precompile_component(bytes)?;
        // A failed cache write only costs a recompile next time.
        let _ = write_private_atomically(dir, &path, &compiled);
        // SAFETY: `compiled` was just produced by this engine.
        unsafe { Component::deserialize(&self.engine, &compiled) }
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
