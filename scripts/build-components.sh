#!/usr/bin/env bash
# Builds the tools written in other languages against wit/ into
# target/components/ (idempotent): the Rust tool (cargo, wasm32-wasip2) and
# the Python tool (componentize-py from PyPI in target/componentize-venv,
# with WASI imports stubbed: a Temper tool imports no sockets).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=target/components
mkdir -p "$out"

cargo build --release --locked --target wasm32-wasip2 \
  --manifest-path components/rust-word-stats/Cargo.toml --target-dir "$out"

venv=target/componentize-venv
py_out="$out/python_word_count.wasm"
if [ ! -x "$venv/bin/componentize-py" ]; then
  if ! python3 -m venv "$venv" 2>/dev/null; then
    echo "build-components: python3 -m venv failed; installing python3-venv" >&2
    sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get install -y python3-venv >/dev/null
    rm -rf "$venv"; python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install --quiet 'componentize-py==0.25.1'
fi
src=components/python-word-count/app.py
if [ ! -f "$py_out" ] || [ "$src" -nt "$py_out" ] || [ wit/tool.wit -nt "$py_out" ]; then
  (cd components/python-word-count &&
    "$root/$venv/bin/componentize-py" -d ../../wit -w tool componentize --stub-wasi app \
      -o "$root/$py_out.tmp")
  mv "$py_out.tmp" "$py_out"
fi
echo "build-components: $out/wasm32-wasip2/release/rust_word_stats.wasm, $py_out"
