#!/usr/bin/env bash
# Configures and builds staticpipe into build/ (or $SP_BUILD_DIR). The CUDA
# backend is built when nvcc is found; STATICPIPE_CUDA=OFF forces the CPU
# engine alone, CMAKE_CUDA_ARCHITECTURES chooses the GPU architectures
# (default 80 89 90).
#
# Progress goes to stderr: on a terminal one line redrawn in place ("[ 45%]
# Building ..."), elsewhere (a log, CI) a line at every tenth of the build;
# compiler warnings and errors as they come, the log's end on a failure.
# The whole output is in BUILD/build.log. At the end it says where the
# binary is and how to call it; stdout gets the binary's path alone, as its
# last line (bin=$(launch/build.sh | tail -n 1)).
set -eu -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SP_BUILD_DIR:-$root/build}
jobs=${SP_JOBS:-$(nproc)}
args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo})
[ -n "${STATICPIPE_CUDA:-}" ] && args+=(-DSTATICPIPE_CUDA="$STATICPIPE_CUDA")
[ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && args+=(-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES")
mkdir -p "$build"
say() { echo "build.sh: $*" >&2; }

say "configuring $build (log: $build/configure.log)"
cmake "${args[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
grep -E 'staticpipe:' "$build/configure.log" | sed 's/^-- /  /' >&2 || true

# progress LOG: cmake --build's lines on stdin, kept in LOG, shown as
# progress on stderr.
progress() {
  local line pct shown=-1 tty=0 width=100
  [ -t 2 ] && tty=1 && width=$(tput cols 2>/dev/null || echo 100)
  : >"$1"
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$1"
    case $line in
      *warning:* | *"): warning"* | *error:* | *"): error"* | *Error\ [0-9]*)
        [ $tty = 1 ] && printf '\r\033[K' >&2
        printf '%s\n' "$line" >&2
        continue ;;
    esac
    [[ $line =~ ^\[\ *([0-9]+)%\]\ (.*)$ ]] || continue
    pct=${BASH_REMATCH[1]}
    if [ $tty = 1 ]; then
      printf '\r\033[K%s' "${line:0:$((width - 1))}" >&2
    elif [ $((pct / 10)) -gt $((shown / 10)) ] || [ "$shown" -lt 0 ]; then
      printf '%s\n' "$line" >&2
      shown=$pct
    fi
  done
  [ $tty = 1 ] && printf '\r\033[K' >&2
  return 0
}

say "compiling with $jobs jobs (the whole output: $build/build.log)"
t0=$SECONDS
if ! cmake --build "$build" -j"$jobs" 2>&1 | progress "$build/build.log"; then
  say "FAILED; the end of $build/build.log:"
  tail -n 40 "$build/build.log" >&2
  exit 1
fi
dt=$((SECONDS - t0))
bin=$build/staticpipe
say "built in $((dt / 60))m$(printf '%02d' $((dt % 60)))s: $bin"
say "call it by its path ($bin --help), or put it on PATH:"
say "  cmake --install $build --prefix ~/.local   # then: staticpipe --help (with ~/.local/bin on PATH)"
echo "$bin"
