# Sourced by the build scripts: the environment rquickjs-sys needs to build
# QuickJS for wasm32-wasip2 with Debian's clang-14 (no wasi-sdk download).
_temper_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export TEMPER_WASI_SYSROOT="$_temper_root/target/wasi-sysroot"
export RQUICKJS_SYS_NO_WASI_SDK=1
export LIBCLANG_PATH=/usr/lib/llvm-14/lib
export CC_wasm32_wasip2=clang-14
export AR_wasm32_wasip2=llvm-ar-14
export CFLAGS_wasm32_wasip2="--sysroot=$TEMPER_WASI_SYSROOT"
export BINDGEN_EXTRA_CLANG_ARGS_wasm32_wasip2="--sysroot=$TEMPER_WASI_SYSROOT"
unset _temper_root
