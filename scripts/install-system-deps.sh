#!/usr/bin/env bash
# Installs the Debian packages the tests and `make run` need, only those missing.
# Idempotent; a no-op on a machine that already has them.
set -euo pipefail
need=()
command -v tarantool >/dev/null || need+=(tarantool)
command -v redis-server >/dev/null || need+=(redis-server)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
# hstore and citext (tests/postgres/test_pg_typecodecs.py): in postgresql-contrib.
ls /usr/share/postgresql/*/extension/hstore.control >/dev/null 2>&1 || need+=(postgresql-contrib)
command -v curl >/dev/null || need+=(curl)
command -v wrk >/dev/null || need+=(wrk)
# surge.services.start_graphite (seed 000: per-second rates into Graphite).
command -v carbon-cache >/dev/null || need+=(graphite-carbon)
# The WebSocket browser test (tests/websocket/test_ws_browser.py) drives headless Chromium.
command -v chromium >/dev/null || need+=(chromium)
# The static-file benchmark's native reference (benchmarks/files), as the http suite's.
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
# The load-generator suite's wire check (benchmarks/loadgen/wire.py).
command -v tcpdump >/dev/null || [ -x /usr/bin/tcpdump ] || need+=(tcpdump)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing system packages: ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
