#!/usr/bin/env bash
# Installs a folder's npm packages at the versions of its package-lock.json:
# `bash scripts/npm-pinned.sh WHO DIR PACKAGE...`. Node and npm come from
# Debian (scripts/apt-package.sh) when missing. Idempotent: `npm ci` runs in
# DIR only when one of the PACKAGEs is missing or not at its locked version.
# WHO names the caller in messages. Packages come from the npm registry
# through npm, nothing else.
set -euo pipefail
who="${1:?usage: npm-pinned.sh WHO DIR PACKAGE...}"
dir="${2:?usage: npm-pinned.sh WHO DIR PACKAGE...}"
shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/apt-package.sh" nodejs node
bash "$here/apt-package.sh" npm npm

stale=""
for pkg in "$@"; do
  read -r want have <<<"$(node -e '
    const [lock, dir, name] = process.argv.slice(1);
    const want = require(lock).packages["node_modules/" + name].version;
    let have = "";
    try { have = require(dir + "/node_modules/" + name + "/package.json").version } catch {}
    console.log(want + " " + have);
  ' "$dir/package-lock.json" "$dir" "$pkg")"
  if [ "$want" != "$have" ]; then
    stale="$stale $pkg@$want"
  fi
done
if [ -n "$stale" ]; then
  echo "$who: installing$stale into $dir/node_modules" >&2
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
