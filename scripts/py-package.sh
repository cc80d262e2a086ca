#!/usr/bin/env bash
# The Python package `temper-forge` (host/py): build its wheel and test the
# installed wheel.
#
#   scripts/py-package.sh build   pinned maturin (in target/py-build-venv)
#                                 builds the wheel into target/wheels/; a
#                                 fresh venv (target/py-test-venv) gets the
#                                 wheel and the pinned test dependencies from
#                                 PyPI. Needs the network (PyPI).
#   scripts/py-package.sh test    in that venv: mypy.stubtest of the package's
#                                 stubs, then pytest (host/py/tests) against
#                                 the installed wheel, not the source tree.
#                                 Runs offline; `temper forge` (for the
#                                 same-id test) is target/release/temper.
#   scripts/py-package.sh         both.
#
# The wheel is built in the workspace's target/ with the release profile, so
# wasmtime is not compiled again. Idempotent; packages come from PyPI through
# pip, nothing else.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

maturin_spec="maturin==1.16.0"
# The adapter tests' frameworks and the bench's comparison, pinned.
test_deps=(
  "pytest==9.2.0"
  "mypy==2.4.1"
  "pydantic-ai-slim==2.68.0"
  "openai-agents==0.24.0"
  "langchain-core==1.8.1"
  "pydantic-monty==1.4.0"
  "mcp==2.3.0"
)
build_venv="$root/target/py-build-venv"
test_venv="$root/target/py-test-venv"
wheels="$root/target/wheels"
pip_flags=(--quiet --disable-pip-version-check)

need_venv() {
  # Debian splits venv/ensurepip out of python3.
  if ! command -v python3 >/dev/null 2>&1 || ! python3 -c "import venv, ensurepip" 2>/dev/null; then
    echo "py-package: installing Debian packages: python3 python3-venv" >&2
    sudo_cmd=""
    [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq python3 python3-venv >/dev/null
  fi
}

build() {
  need_venv
  if ! [ -x "$build_venv/bin/maturin" ] || [ "$("$build_venv/bin/maturin" --version)" != "maturin ${maturin_spec#maturin==}" ]; then
    rm -rf "$build_venv"
    python3 -m venv "$build_venv"
    "$build_venv/bin/pip" install "${pip_flags[@]}" "$maturin_spec"
  fi
  rm -f "$wheels"/temper_forge-*.whl
  "$build_venv/bin/maturin" build --release --locked -m host/py/Cargo.toml -o "$wheels"
  local wheel
  wheel="$(ls "$wheels"/temper_forge-*.whl)"
  # A fresh venv each time: a file missing from the wheel fails the tests.
  rm -rf "$test_venv"
  python3 -m venv "$test_venv"
  "$test_venv/bin/pip" install "${pip_flags[@]}" "${test_deps[@]}" "$wheel"
  echo "py-package: installed $(basename "$wheel") into $test_venv" >&2
}

run_tests() {
  local py="$test_venv/bin/python"
  if ! [ -x "$py" ]; then
    echo "py-package: $test_venv is missing: run scripts/py-package.sh build first" >&2
    exit 1
  fi
  # Run from outside the source tree so that `import temper_forge` is the
  # installed wheel.
  cd "$root/target"
  "$py" -m mypy.stubtest temper_forge
  TEMPER_BIN="${TEMPER_BIN:-$root/target/release/temper}" \
    "$py" -m pytest -p no:cacheprovider -q "$root/host/py/tests"
}

case "${1:-all}" in
  build) build ;;
  test) run_tests ;;
  all) build && run_tests ;;
  *)
    echo "usage: scripts/py-package.sh [build|test|all]" >&2
    exit 2
    ;;
esac
