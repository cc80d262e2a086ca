#!/usr/bin/env bash
# Installs one Debian package whose system service the tests do not want
# started: `bash scripts/apt-package.sh PACKAGE BINARY`. Idempotent: does
# nothing when BINARY is already on PATH. The tests start their own
# throw-away servers (docker-registry, haproxy, prometheus) on 127.0.0.1, so
# a policy-rc.d that answers 101 keeps the packaged service from starting
# during the install (and is removed afterwards if this script made it).
set -euo pipefail
package="${1:?usage: apt-package.sh PACKAGE BINARY}"
binary="${2:?usage: apt-package.sh PACKAGE BINARY}"
if command -v "$binary" >/dev/null 2>&1; then
  exit 0
fi
echo "$package: installing Debian package $package" >&2
sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee "$policy" >/dev/null
  $sudo_cmd chmod +x "$policy"
  made_policy=1
fi
status=0
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "$package" >/dev/null || status=$?
if [ "$made_policy" = 1 ]; then
  $sudo_cmd rm -f "$policy"
fi
if [ "$status" != 0 ]; then
  echo "$package: apt-get install $package failed (status $status)" >&2
  exit "$status"
fi
command -v "$binary" >/dev/null 2>&1 || {
  echo "$package: installed, but $binary is not on PATH" >&2
  exit 1
}
