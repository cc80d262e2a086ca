#!/usr/bin/env bash
# Installs HAProxy for the scale-out test (tests/all/scale_out.rs), which
# puts three `temper mcp --http` hosts behind it: Debian's `haproxy`
# package. Idempotent: installs only when the binary is missing. The test
# writes its own configuration and starts its own HAProxy on 127.0.0.1; the
# package's system service is not needed and is kept from starting.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/apt-package.sh" haproxy haproxy
