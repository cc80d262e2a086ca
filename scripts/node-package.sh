#!/usr/bin/env bash
# The `temper-forge` npm package (host/node): installs its pinned npm
# dependencies (@napi-rs/cli, @framers/agentos, ai, zod, typescript: the versions in
# host/node/package-lock.json) into host/node/node_modules, builds the
# native addon (host/node/build.mjs: cargo in the release profile and the
# workspace's target directory, so wasmtime is compiled once; the types and
# the loader from @napi-rs/cli's generators), writing
# temper-forge.linux-x64-gnu.node, native.cjs and the generated index.d.ts
# into host/node; with --test, then runs the package's tests
# (`node --test`).
# Idempotent: npm ci only when an installed version differs from the lock;
# cargo rebuilds only what changed. Packages come from the npm registry
# through npm, nothing else.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/host/node"
cd "$dir"

bash "$root/scripts/npm-pinned.sh" node-package "$dir" @napi-rs/cli @framers/agentos ai zod typescript

# The addon, in the release profile and the workspace's target directory,
# with its types and loader from @napi-rs/cli's generators (build.mjs).
node build.mjs

if [ "${1:-}" = "--test" ]; then
  node --test test/*.test.js
fi
