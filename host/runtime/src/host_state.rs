//! The per-call store state: a locked-down WASI context, the memory limiter,
//! the console buffer, and the capability imports.
//!
//! Secure defaults, written down: no environment variables, no arguments, no
//! preopened directories, stdin closed, stdout/stderr discarded, no sockets
//! (TCP, UDP and name lookup all refused), and every capability import
//! (`fetch`, `crypto`) denies with `capability not granted: NAME` until a
//! later grant links a real implementation.
//!
//! `fs.readFile` has no import of its own: the grant is the read-only
//! preopened directories ([`Granted::read_dirs`]). With none, the guest
//! refuses with `capability not granted: fs.readFile`; a path outside every
//! preopen (or a `..` or symlink the host's filesystem refuses as leading
//! out of one) with `path outside the granted directories: PATH`. The shim
//! reports a refusal that ends the call as `ToolError::CapabilityDenied`
//! (by the error's identity, never its text), for all three capabilities.
//!
//! Clocks and random sources are the host's ([`Clocks`]): real ones, the
//! build's fixed ones, or deterministic mode's (policy `[determinism]`),
//! where every call reads the same time and seeded random.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::bindings::temper::tool::{crypto, fetch, log, tools, types};
use crate::capabilities::fetch::FetchTransport;
use crate::capabilities::tool_calls::CallContext;
use temper_policy::Determinism;

/// One captured console line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// The text as the tool printed it (possibly truncated).
    pub message: String,
}

/// Console lines of one call, bounded by bytes.
#[derive(Debug, Default)]
pub struct ConsoleBuffer {
    lines: Vec<LogLine>,
    bytes: usize,
    limit: usize,
    dropped: usize,
}

impl ConsoleBuffer {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    pub(crate) fn push(&mut self, level: &'static str, message: String) {
        if self.bytes + message.len() > self.limit {
            self.dropped += 1;
            return;
        }
        self.bytes += message.len();
        self.lines.push(LogLine { level, message });
    }

    /// The kept lines, plus a last line saying how many were dropped.
    pub fn into_lines(mut self) -> Vec<LogLine> {
        if self.dropped > 0 {
            self.lines.push(LogLine {
                level: "warn",
                message: format!(
                    "[temper: {} console line(s) dropped over the {}-byte limit]",
                    self.dropped, self.limit
                ),
            });
        }
        self.lines
    }
}

/// Memory limiter that remembers whether the cap was hit, so a trap after a
/// refused growth is reported as a memory error.
#[derive(Debug)]
pub struct MemoryCap {
    limit: usize,
    /// Set when a growth past `limit` was refused.
    pub hit: bool,
}

impl MemoryCap {
    /// A cap of `limit` bytes per linear memory.
    pub fn new(limit: usize) -> Self {
        Self { limit, hit: false }
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// How the WASI clocks and random sources behave in a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clocks {
    /// The host's real clocks and random sources. The monotonic clock starts
    /// at a random offset per store, so `Math.random()` (which QuickJS's
    /// javy seeds from it on first use) differs from call to call.
    Real,
    /// Fixed clocks and seeded random: used while snapshotting a tool so the
    /// artifact's bytes do not depend on when or where it was built, and
    /// while replaying that snapshot's `load` on the warm-up path.
    Fixed,
    /// Deterministic mode: the wall clock stands at `epoch_ms`, the
    /// monotonic clock stands at a value derived from the seed, and every
    /// random source (WASI secure and insecure random, the `crypto`
    /// capability) is a generator seeded from `seed`. Same seed, same
    /// artifact: same reads, on every run and machine.
    Deterministic(Determinism),
}

/// Seed of the build's fixed insecure-random seed (`wasi:random/insecure-seed`).
const FIXED_INSECURE_SEED: u64 = 0x007e_3be7;

/// One of the independent random streams derived from a deterministic seed
/// (splitmix64 of seed and stream number).
fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed.wrapping_add(stream.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Where the monotonic clock stands in deterministic mode.
fn deterministic_monotonic(d: &Determinism) -> u64 {
    // Below 2^62 ns, so it is far from overflowing however a guest adds to it.
    stream_seed(d.seed, 0) >> 2
}

/// A switch shared by a store's clocks and random sources: while set, wall
/// clock reads 0 (the Unix epoch), the monotonic clock does not advance and
/// random bytes come from a fixed seed.
#[derive(Debug, Clone, Default)]
pub struct FixedSwitch(Arc<AtomicBool>);

impl FixedSwitch {
    /// Whether the fixed sources are in force.
    pub fn is_fixed(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    /// Switches between fixed and real sources.
    pub fn set_fixed(&self, fixed: bool) {
        self.0.store(fixed, Ordering::Relaxed)
    }
}

/// Everything one store owns.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// The memory cap for this store.
    pub memory: MemoryCap,
    /// Console lines captured so far.
    pub console: ConsoleBuffer,
    /// Fixed or real clocks and random (see [`FixedSwitch`]).
    pub fixed: FixedSwitch,
    granted: Granted,
    random: SwitchRng,
}

/// What one call is granted: built from the tool's grants and the runtime's
/// policy. The default grants nothing.
#[derive(Clone, Default)]
pub struct Granted {
    /// The fetch transport, when `fetch` is granted.
    pub fetch: Option<Arc<FetchTransport>>,
    /// Whether `crypto` is granted.
    pub crypto: bool,
    /// Read-only directories (host path, guest path), when `fs.readFile` is
    /// granted.
    pub read_dirs: Vec<(std::path::PathBuf, String)>,
    /// When the call must be over (fetch requests end by then; for tool
    /// calls, the whole call tree).
    pub deadline: Option<Instant>,
    /// The tools it may call (`tool:NAME`), and where it sits in the call
    /// tree; `None`: none.
    pub calls: Option<CallContext>,
}

impl HostState {
    /// A fresh state with the secure defaults above; the guest reads
    /// `clocks` (with [`Clocks::Fixed`], the fixed sources can later be
    /// switched to real ones through [`HostState::fixed`]).
    pub fn new(
        memory_limit: usize,
        console_limit: usize,
        clocks: Clocks,
        granted: Granted,
    ) -> Result<Self, String> {
        let start_fixed = clocks == Clocks::Fixed;
        let live = if start_fixed { Clocks::Real } else { clocks };
        Self::with_clocks(memory_limit, console_limit, live, start_fixed, granted)
    }

    /// A fresh state whose guest starts on the build's fixed clocks and
    /// random (the warm-up path replays the snapshot's `load` under them)
    /// and reads `live` once [`HostState::fixed`] is switched off.
    pub fn starting_fixed(
        memory_limit: usize,
        console_limit: usize,
        live: Clocks,
        granted: Granted,
    ) -> Result<Self, String> {
        Self::with_clocks(memory_limit, console_limit, live, true, granted)
    }

    fn with_clocks(
        memory_limit: usize,
        console_limit: usize,
        live: Clocks,
        start_fixed: bool,
        granted: Granted,
    ) -> Result<Self, String> {
        let mut builder = WasiCtxBuilder::new();
        for (host, guest) in &granted.read_dirs {
            builder
                .preopened_dir(host, guest, wasmtime_wasi::FsPerms::ReadOnly)
                .map_err(|e| format!("fs.readFile: cannot open {}: {e}", host.display()))?;
        }
        builder
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        let fixed = FixedSwitch::default();
        fixed.set_fixed(start_fixed || live == Clocks::Fixed);
        let det = match live {
            Clocks::Deterministic(d) => Some(d),
            Clocks::Real | Clocks::Fixed => None,
        };
        let monotonic = match det {
            Some(d) => MonotonicBase::Standing(deterministic_monotonic(&d)),
            None => {
                use rand::Rng;
                // An arbitrary origin (WASI promises nothing else), random
                // per store: it seeds `Math.random()`. Under 2^48 ns (3 days).
                MonotonicBase::Running(Instant::now(), rand::rng().next_u64() >> 16)
            }
        };
        builder
            .wall_clock(SwitchWallClock {
                fixed: fixed.clone(),
                epoch_ms: det.map(|d| d.epoch_ms),
            })
            .monotonic_clock(SwitchMonotonicClock {
                fixed: fixed.clone(),
                base: monotonic,
            })
            .secure_random(SwitchRng::new(fixed.clone(), 0x007e_3be5, det, 1))
            .insecure_random(SwitchRng::new(fixed.clone(), 0x007e_3be6, det, 2));
        // The insecure seed is one value per store, read by the guest's
        // runtime when it first builds a hash map (possibly during `load`):
        // the build's value whenever the store replays or continues a
        // snapshot deterministically.
        if fixed.is_fixed() || det.is_some() {
            builder.insecure_random_seed(FIXED_INSECURE_SEED.into());
        }
        Ok(Self {
            random: SwitchRng::new(fixed.clone(), 0x007e_3be8, det, 3),
            granted,
            wasi: builder.build(),
            table: ResourceTable::new(),
            memory: MemoryCap {
                limit: memory_limit,
                hit: false,
            },
            console: ConsoleBuffer::new(console_limit),
            fixed,
        })
    }

    /// Forgets what a tool's module top level printed while it loaded (before its call), as a snapshot taken at build would.
    pub fn reset_after_load(&mut self) {
        self.console = ConsoleBuffer::new(self.console.limit);
    }

    /// Sets when the call must be over (for a store made before its call,
    /// e.g. a pre-warmed instance).
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.granted.deadline = Some(deadline);
    }

    /// Sets the tools the call may call and its place in the call tree (for
    /// a store made before its call).
    pub fn set_calls(&mut self, calls: Option<CallContext>) {
        self.granted.calls = calls;
    }

    /// The refusal the guest gets for an ungranted capability (the shim
    /// turns exactly this text into a typed denial).
    fn deny(&mut self, capability: &str) -> String {
        format!("capability not granted: {capability}")
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The wall clock: the Unix epoch while fixed; in deterministic mode
/// `epoch_ms`; else the host's.
struct SwitchWallClock {
    fixed: FixedSwitch,
    epoch_ms: Option<u64>,
}
impl wasmtime_wasi::HostWallClock for SwitchWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }
    fn now(&self) -> Duration {
        if self.fixed.is_fixed() {
            return Duration::ZERO;
        }
        if let Some(ms) = self.epoch_ms {
            return Duration::from_millis(ms);
        }
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
    }
}

/// Where the monotonic clock reads from once it is not fixed.
#[derive(Clone, Copy)]
enum MonotonicBase {
    /// Deterministic mode: stands still at this value.
    Standing(u64),
    /// Counts from the store's creation, plus a per-store offset.
    Running(Instant, u64),
}

/// The monotonic clock: stands at 0 while fixed, else see [`MonotonicBase`].
struct SwitchMonotonicClock {
    fixed: FixedSwitch,
    base: MonotonicBase,
}
impl wasmtime_wasi::HostMonotonicClock for SwitchMonotonicClock {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        if self.fixed.is_fixed() {
            return 0;
        }
        match self.base {
            MonotonicBase::Standing(at) => at,
            MonotonicBase::Running(start, offset) => {
                offset.saturating_add(start.elapsed().as_nanos() as u64)
            }
        }
    }
}

/// Random bytes: from the build's fixed seed while fixed; in deterministic
/// mode from a generator seeded by the policy's seed (one stream per
/// source); else from the thread RNG.
struct SwitchRng {
    fixed: FixedSwitch,
    seeded: rand::rngs::StdRng,
    deterministic: Option<rand::rngs::StdRng>,
}

impl SwitchRng {
    fn new(fixed: FixedSwitch, build_seed: u64, det: Option<Determinism>, stream: u64) -> Self {
        use rand::SeedableRng;
        Self {
            fixed,
            seeded: rand::rngs::StdRng::seed_from_u64(build_seed),
            deterministic: det
                .map(|d| rand::rngs::StdRng::seed_from_u64(stream_seed(d.seed, stream))),
        }
    }
}

impl rand::TryRng for SwitchRng {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        let mut b = [0; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        let mut b = [0; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        use rand::Rng;
        if self.fixed.is_fixed() {
            self.seeded.fill_bytes(dst);
        } else if let Some(rng) = &mut self.deterministic {
            rng.fill_bytes(dst);
        } else {
            rand::rng().fill_bytes(dst);
        }
        Ok(())
    }
}

impl types::Host for HostState {}

impl log::Host for HostState {
    async fn log(&mut self, level: types::LogLevel, message: String) -> wasmtime::Result<()> {
        let level = match level {
            types::LogLevel::Debug => "debug",
            types::LogLevel::Info => "info",
            types::LogLevel::Warn => "warn",
            types::LogLevel::Error => "error",
        };
        self.console.push(level, message);
        Ok(())
    }
}

impl fetch::Host for HostState {
    async fn fetch(
        &mut self,
        req: fetch::Request,
    ) -> wasmtime::Result<Result<fetch::Response, String>> {
        let Some(transport) = self.granted.fetch.clone() else {
            return Ok(Err(self.deny("fetch")));
        };
        let deadline = self
            .granted
            .deadline
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(30));
        Ok(transport.fetch(req, deadline).await)
    }
}

impl crypto::Host for HostState {
    async fn hash(
        &mut self,
        alg: String,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<Vec<u8>, String>> {
        if !self.granted.crypto {
            return Ok(Err(self.deny("crypto")));
        }
        Ok(crate::capabilities::crypto::hash(&alg, &data))
    }
    async fn hmac(
        &mut self,
        alg: String,
        key: Vec<u8>,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<Vec<u8>, String>> {
        if !self.granted.crypto {
            return Ok(Err(self.deny("crypto")));
        }
        Ok(crate::capabilities::crypto::hmac(&alg, &key, &data))
    }
    async fn random_bytes(&mut self, len: u32) -> wasmtime::Result<Result<Vec<u8>, String>> {
        if !self.granted.crypto {
            return Ok(Err(self.deny("crypto")));
        }
        if len > 65536 {
            return Ok(Err(format!(
                "crypto: at most 65536 random bytes per call, asked for {len}"
            )));
        }
        use rand::Rng;
        let mut bytes = vec![0; len as usize];
        self.random.fill_bytes(&mut bytes);
        Ok(Ok(bytes))
    }
}

impl tools::Host for HostState {
    async fn call(
        &mut self,
        name: String,
        input: String,
    ) -> wasmtime::Result<Result<String, types::ToolError>> {
        let context = self.granted.calls.clone();
        Ok(crate::capabilities::tool_calls::call(
            context.as_ref(),
            self.granted.deadline,
            &mut self.console,
            name,
            input,
        )
        .await)
    }
}

#[cfg(test)]
#[path = "host_state_tests.rs"]
mod tests;
