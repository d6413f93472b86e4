#!/usr/bin/env bash
# Step caching (run --cache teacache:T / magcache:T) against the published
# criteria and a float64 cached sampling loop (tests/ref/cache_parity.py):
# the steps skipped per CFG branch and the latents (<= 1e-4 relative L2).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/find_python.sh"
if [ -z "${SP_BIN:-}" ] || [ ! -x "$SP_BIN" ]; then
  echo "SP_BIN is not set to the staticpipe binary (ctest sets it)" >&2
  exit 1
fi
exec "$PY" "$here/cache_parity.py" --bin "$SP_BIN"
