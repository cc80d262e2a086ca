//! Builds the compose core (`components/compose-core`,
//! `wasm32-unknown-unknown`, so it imports no WASI) that `temper-compose`
//! embeds, from source, and hands its path to it as
//! `TEMPER_COMPOSE_CORE_WASM`. It goes into `target/guest` with paths
//! remapped (`host/build-support/guest_build.rs`, shared with
//! `temper-runtime`'s build script), so its bytes do not depend on where the
//! checkout lives. Set the variable to a `.wasm` built elsewhere to use it
//! instead. Needs the `wasm32-unknown-unknown` target (`scripts/setup.sh`).

use std::path::Path;

#[path = "../build-support/guest_build.rs"]
#[allow(dead_code)] // the QuickJS guests' helpers are the runtime's
mod guest_build;
use guest_build::{checkout_root, guest_build, guest_target_dir, use_prebuilt, watch_crate};

fn main() {
    let root = checkout_root();
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    if !use_prebuilt("TEMPER_COMPOSE_CORE_WASM") {
        build_compose_core(&root);
    }
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
