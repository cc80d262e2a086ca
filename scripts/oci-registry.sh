#!/usr/bin/env bash
# Installs the OCI registry the OCI distribution tests run against: Debian's
# `docker-registry` package (the CNCF distribution server, /usr/bin/docker-registry).
# Idempotent: installs only when the binary is missing. The tests start their
# own throw-away registry on 127.0.0.1 (random port, storage in a tempdir);
# the package's system service is not needed and is stopped if it started.
set -euo pipefail
if command -v docker-registry >/dev/null 2>&1; then
  exit 0
fi
echo "oci-registry: installing Debian package docker-registry" >&2
sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
# policy-rc.d 101: do not start the packaged service (it would listen on :5000).
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo_cmd tee "$policy" >/dev/null
  $sudo_cmd chmod +x "$policy"
  made_policy=1
fi
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends docker-registry >/dev/null || status=$?
if [ "$made_policy" = 1 ]; then
  $sudo_cmd rm -f "$policy"
fi
if [ "${status:-0}" != 0 ]; then
  echo "oci-registry: apt-get install docker-registry failed (status $status)" >&2
  exit "$status"
fi
command -v docker-registry >/dev/null 2>&1 || {
  echo "oci-registry: docker-registry installed but not on PATH" >&2
  exit 1
}
