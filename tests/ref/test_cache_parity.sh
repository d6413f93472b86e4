#!/usr/bin/env bash
# Step caching (run --cache teacache:T / magcache:T) against the published
# criteria and a float64 cached sampling loop (tests/ref/cache_parity.py):
# the steps skipped per CFG branch and the latents (<= 1e-4 relative L2).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../common/script.sh"
sp_python
sp_need_bin
exec "$PY" "$here/cache_parity.py" --bin "$SP_BIN"
