#!/usr/bin/env bash
# Configures and builds staticpipe into build/ (or $SP_BUILD_DIR). The CUDA
# backend is built when nvcc is found; STATICPIPE_CUDA=OFF forces the CPU
# engine alone. Prints the path of the binary last.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SP_BUILD_DIR:-$root/build}
args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo})
[ -n "${STATICPIPE_CUDA:-}" ] && args+=(-DSTATICPIPE_CUDA="$STATICPIPE_CUDA")
[ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && args+=(-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES")
mkdir -p "$build"
cmake "${args[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
grep -E 'staticpipe:' "$build/configure.log" || true
cmake --build "$build" -j"$(nproc)"
echo "$build/staticpipe"
