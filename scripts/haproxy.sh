#!/usr/bin/env bash
# Installs HAProxy for the scale-out test (tests/all/scale_out.rs), which
# puts three `temper mcp --http` hosts behind it: Debian's `haproxy`
# package. Idempotent: installs only when the binary is missing. The test
# writes its own configuration and starts its own HAProxy on 127.0.0.1; the
# package's system service is not needed and is kept from starting.
set -euo pipefail
if command -v haproxy >/dev/null 2>&1; then
  exit 0
fi
echo "haproxy: installing Debian package haproxy" >&2
sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
# policy-rc.d 101: do not start the packaged service.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee "$policy" >/dev/null
  $sudo_cmd chmod +x "$policy"
  made_policy=1
fi
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends haproxy >/dev/null || status=$?
if [ "$made_policy" = 1 ]; then
  $sudo_cmd rm -f "$policy"
fi
if [ "${status:-0}" != 0 ]; then
  echo "haproxy: apt-get install haproxy failed (status $status)" >&2
  exit "$status"
fi
command -v haproxy >/dev/null 2>&1 || {
  echo "haproxy: installed but not on PATH" >&2
  exit 1
}
