#!/usr/bin/env bash
# Installs the Prometheus server the metrics test scrapes Temper with:
# Debian's `prometheus` package (/usr/bin/prometheus). Idempotent: installs
# only when the binary is missing. The test starts its own throw-away
# server on 127.0.0.1 (random port, storage in a tempdir, its own scrape
# config); the package's system service is not needed and is not started.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
echo "prometheus: installing Debian package prometheus" >&2
sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
# policy-rc.d 101: do not start the packaged service (it would listen on :9090).
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee "$policy" >/dev/null
  $sudo_cmd chmod +x "$policy"
  made_policy=1
fi
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends prometheus >/dev/null || status=$?
if [ "$made_policy" = 1 ]; then
  $sudo_cmd rm -f "$policy"
fi
if [ "${status:-0}" != 0 ]; then
  echo "prometheus: apt-get install prometheus failed (status $status)" >&2
  exit "$status"
fi
command -v prometheus >/dev/null 2>&1 || {
  echo "prometheus: prometheus installed but not on PATH" >&2
  exit 1
}
