#!/usr/bin/env bash
# Installs the OCI registry the OCI distribution tests run against: Debian's
# `docker-registry` package (the CNCF distribution server, /usr/bin/docker-registry).
# Idempotent: installs only when the binary is missing. The tests start their
# own throw-away registry on 127.0.0.1 (random port, storage in a tempdir);
# the package's system service is not needed and is stopped if it started.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/apt-package.sh" docker-registry docker-registry
