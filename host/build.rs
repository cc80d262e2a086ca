//! Builds the guests the library embeds, from source, and hands their paths
//! to it:
//!
//! - the JavaScript shim (`guest-js-shim`, `wasm32-wasip2`) as
//!   `TEMPER_SHIM_WASM`;
//! - the compose core (`components/compose-core`, `wasm32-unknown-unknown`,
//!   so it imports no WASI) as `TEMPER_COMPOSE_CORE_WASM`.
//!
//! Both are built into `target/guest` (their own target directory; each
//! crate has its own lock file) with paths remapped, so their bytes do not
//! depend on where the checkout lives. Set either variable to a `.wasm`
//! built elsewhere to use it instead. Needs what `scripts/setup.sh`
//! installs.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    if !use_prebuilt("TEMPER_SHIM_WASM") {
        build_shim(&root);
    }
    if !use_prebuilt("TEMPER_ENGINE_WASM") {
        build_engine(&root);
    }
    if !use_prebuilt("TEMPER_COMPOSE_CORE_WASM") {
        build_compose_core(&root);
    }
}

/// Passes on a guest path set in the environment; false when unset.
fn use_prebuilt(var: &str) -> bool {
    println!("cargo:rerun-if-env-changed={var}");
    match env::var(var) {
        Ok(path) => {
            println!("cargo:rerun-if-changed={path}");
            println!("cargo:rustc-env={var}={path}");
            true
        }
        Err(_) => false,
    }
}

/// Watches a guest crate's sources, manifest and lock file.
fn watch_crate(dir: &Path) {
    for watched in ["src", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", dir.join(watched).display());
    }
}

/// `cargo build --release --locked --target TARGET` for the guest crate in
/// `dir`, into `target/guest`, with the outer build's flags removed, paths
/// remapped (`/cargo`, `/temper`) and `SOURCE_DATE_EPOCH=0`.
fn guest_build(root: &Path, dir: &Path, target: &str) -> Command {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let rustflags = [
        format!("--remap-path-prefix={}=/cargo", cargo_home().display()),
        format!("--remap-path-prefix={}=/temper", root.display()),
    ]
    .join("\x1f");
    let mut cmd = Command::new(cargo);
    cmd.current_dir(dir)
        .args(["build", "--release", "--locked", "--target", target])
        .arg("--target-dir")
        .arg(guest_target_dir(root));
    for var in [
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        .env("SOURCE_DATE_EPOCH", "0");
    cmd
}

fn guest_target_dir(root: &Path) -> PathBuf {
    root.join("target").join("guest")
}

fn cargo_home() -> PathBuf {
    env::var("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env::var("HOME").unwrap_or_default()).join(".cargo"))
}

/// The JS shim, with QuickJS's C code built by Debian's clang-14 against
/// wasi-libc.
fn build_shim(root: &Path) {
    let guest = root.join("guest-js-shim");
    watch_crate(&guest);
    let wasm = build_quickjs_guest(root, &guest, "guest_js_shim");
    println!("cargo:rustc-env=TEMPER_SHIM_WASM={}", wasm.display());
}

/// The shared engine: the shim's source built with its `engine` feature, as
/// the `guest-js-shim/engine` package (same target directory, so the shim's
/// dependency builds are reused).
fn build_engine(root: &Path) {
    let guest = root.join("guest-js-shim").join("engine");
    // Its sources are the shim's (watched by `build_shim`).
    for watched in ["Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", guest.join(watched).display());
    }
    let wasm = build_quickjs_guest(root, &guest, "guest_js_engine");
    println!("cargo:rustc-env=TEMPER_ENGINE_WASM={}", wasm.display());
}

/// Builds a QuickJS guest crate (the shim's sources) in `guest`; returns the
/// path of `NAME.wasm`.
fn build_quickjs_guest(root: &Path, guest: &Path, name: &str) -> PathBuf {
    let sysroot = root.join("target").join("wasi-sysroot");
    make_sysroot(&sysroot);
    let cflags = format!(
        "--sysroot={} -ffile-prefix-map={}=/cargo -ffile-prefix-map={}=/temper",
        sysroot.display(),
        cargo_home().display(),
        root.display()
    );
    let mut cmd = guest_build(root, guest, "wasm32-wasip2");
    cmd.env("RQUICKJS_SYS_NO_WASI_SDK", "1")
        .env("LIBCLANG_PATH", "/usr/lib/llvm-14/lib")
        .env("CC_wasm32_wasip2", "clang-14")
        .env("AR_wasm32_wasip2", "llvm-ar-14")
        .env("CFLAGS_wasm32_wasip2", &cflags)
        .env(
            "BINDGEN_EXTRA_CLANG_ARGS_wasm32_wasip2",
            format!("--sysroot={}", sysroot.display()),
        );
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("failed to run cargo for {}: {e}", guest.display()));
    if !status.success() {
        panic!(
            "building {} for wasm32-wasip2 failed ({status}); run scripts/setup.sh to install clang-14, lld-14, wasi-libc and the wasm32-wasip2 target",
            guest.display()
        );
    }
    let wasm = guest_target_dir(root).join(format!("wasm32-wasip2/release/{name}.wasm"));
    assert!(wasm.exists(), "{name} not found at {}", wasm.display());
    wasm
}

/// The compose core (pure Rust, no C, no WASI). It reaches
/// `compose-mapping/` through a symlink inside its own directory (see its
/// `Cargo.toml`): that is what keeps its bytes independent of the checkout
/// path.
fn build_compose_core(root: &Path) {
    let guest = root.join("components").join("compose-core");
    watch_crate(&guest);
    let mapping = root.join("compose-mapping");
    watch_crate(&mapping);
    let status = guest_build(root, &guest, "wasm32-unknown-unknown")
        .status()
        .expect("failed to run cargo for components/compose-core");
    if !status.success() {
        panic!(
            "building components/compose-core for wasm32-unknown-unknown failed ({status}); run scripts/setup.sh to install the wasm32-unknown-unknown target"
        );
    }
    let wasm =
        guest_target_dir(root).join("wasm32-unknown-unknown/release/temper_compose_core.wasm");
    assert!(
        wasm.exists(),
        "compose core not found at {}",
        wasm.display()
    );
    println!(
        "cargo:rustc-env=TEMPER_COMPOSE_CORE_WASM={}",
        wasm.display()
    );
}

/// Debian's wasi-libc is not laid out as one sysroot: make one out of links.
fn make_sysroot(sysroot: &Path) {
    let lib = sysroot.join("lib");
    std::fs::create_dir_all(&lib).expect("create sysroot");
    link(
        Path::new("/usr/include/wasm32-wasi"),
        &sysroot.join("include"),
    );
    link(Path::new("/usr/lib/wasm32-wasi"), &lib.join("wasm32-wasi"));
}

fn link(target: &Path, at: &Path) {
    if std::fs::read_link(at).ok().as_deref() == Some(target) {
        return;
    }
    let _ = std::fs::remove_file(at);
    std::os::unix::fs::symlink(target, at).expect("create sysroot link");
}
