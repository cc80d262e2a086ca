#!/usr/bin/env bash
# Installs the Prometheus server the metrics test scrapes Temper with:
# Debian's `prometheus` package (/usr/bin/prometheus). Idempotent: installs
# only when the binary is missing. The test starts its own throw-away
# server on 127.0.0.1 (random port, storage in a tempdir, its own scrape
# config); the package's system service is not needed and is not started.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/apt-package.sh" prometheus prometheus
