#!/usr/bin/env bash
# Builds the book (docs/, mdBook) into target/book and fails on a broken
# internal link: a link to a page or file the book does not have, an
# `#anchor` the target page does not define, an `{{#include}}` whose file is
# missing, or a README link into the book or the repository that leads
# nowhere (docs/linkcheck.py). External links are never fetched.
#
# mdbook comes from crates.io (scripts/setup.sh installs it when missing).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if ! command -v mdbook >/dev/null 2>&1; then
  echo "book: mdbook not found: run scripts/setup.sh" >&2
  exit 1
fi

out="$root/target/book"
rm -rf "$out"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# mdbook logs a missing {{#include}} file as an ERROR and still exits 0.
status=0
mdbook build docs 2>&1 | tee "$log" || status=$?
if [ "$status" != 0 ]; then
  echo "book: mdbook build failed (status $status)" >&2
  exit 1
fi
if grep -Eq '(^|[^A-Za-z])ERROR([^A-Za-z]|$)' "$log"; then
  echo "book: mdbook reported errors (above)" >&2
  exit 1
fi
python3 docs/linkcheck.py "$out" docs/src README.md
echo "book: $out/index.html"
