#!/usr/bin/env bash
# Installs the system packages staticpipe needs to build and test, when they
# are missing (Debian/Ubuntu names). As a non-root user it prints the exact
# command to run instead. The CUDA toolkit (nvcc, cuBLASLt, cuDNN, NCCL) is
# not installed here: it comes from NVIDIA; without it the CPU engine builds.
#
#   launch/deps.sh            install what is missing
#   launch/deps.sh --check    only report, exit 1 if something is missing
set -u
check_only=0
[ "${1:-}" = "--check" ] && check_only=1

missing=()
need_pkg() { # package  test-command...
  local pkg=$1; shift
  if ! "$@" >/dev/null 2>&1; then missing+=("$pkg"); fi
}
have_header() { # also in the multiarch folders, where Debian puts FFmpeg's
  local d
  for d in /usr/include /usr/local/include /usr/include/*-linux-gnu; do
    [ -e "$d/$1" ] && return 0
  done
  return 1
}
dist_python_has() { /usr/bin/python3 -c "import $1" 2>/dev/null; }

need_pkg build-essential command -v cc
need_pkg build-essential command -v make
need_pkg cmake command -v cmake
need_pkg pkg-config command -v pkg-config
need_pkg libopenmpi-dev command -v mpicc
need_pkg openmpi-bin command -v mpirun
need_pkg libhdf5-dev have_header hdf5/serial/hdf5.h
need_pkg libjson-c-dev have_header json-c/json.h
need_pkg libpng-dev have_header png.h   # PNG frames and images
need_pkg libjpeg-dev have_header jpeglib.h   # JPEG images (libjpeg-turbo; optional at build time)
need_pkg libjpeg-turbo-progs command -v djpeg   # tests: the JPEG decoder's reference
# Video files: FFmpeg's headers to build against; its libraries are opened
# only when a video file is written, so a machine without them still runs
# staticpipe. The ffmpeg package (ffprobe, ffmpeg) checks the files in tests.
need_pkg libavcodec-dev have_header libavcodec/avcodec.h
need_pkg libavformat-dev have_header libavformat/avformat.h
need_pkg libswscale-dev have_header libswscale/swscale.h
need_pkg libavutil-dev have_header libavutil/avutil.h
need_pkg ffmpeg command -v ffprobe
need_pkg python3 test -x /usr/bin/python3
need_pkg python3-numpy dist_python_has numpy
need_pkg python3-h5py dist_python_has h5py
need_pkg python3-sentencepiece dist_python_has sentencepiece   # the tokenizer parity tests (tests/text/)
need_pkg python3-protobuf dist_python_has google.protobuf      # their spiece.model reader
need_pkg python3-regex dist_python_has regex                   # Wan's whitespace cleaning, as a reference
need_pkg clang command -v clang   # the libFuzzer target (launch/fuzz.sh)
need_pkg gnuplot-nox command -v gnuplot   # the plots of staticpipe bench
# The .latent test reads and writes through the safetensors package (it
# falls back to tests/convert/stlib.py without it). Debian 12 has no
# python3-safetensors: where apt does not know it, pip installs it below.
pip_missing=()
if ! dist_python_has safetensors; then
  if apt-cache show python3-safetensors >/dev/null 2>&1; then missing+=(python3-safetensors)
  else pip_missing+=(safetensors); need_pkg python3-pip /usr/bin/python3 -m pip --version; fi
fi
# The quantized formats' tests compare against llama.cpp's gguf-py (GGUF
# files and the ggml types' numpy dequantisation); Debian has no package.
if ! dist_python_has gguf; then
  pip_missing+=(gguf); need_pkg python3-pip /usr/bin/python3 -m pip --version
fi
pip_install() {
  [ ${#pip_missing[@]} -eq 0 ] && return 0
  local pcmd="/usr/bin/python3 -m pip install --break-system-packages ${pip_missing[*]}"
  if [ $check_only -eq 1 ]; then echo "deps: optional, missing (pip): ${pip_missing[*]}"; return 0; fi
  if [ "$(id -u)" -eq 0 ]; then $pcmd >/dev/null && echo "deps: installed (pip) ${pip_missing[*]}" && return 0
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo $pcmd >/dev/null && return 0
  fi
  echo "deps: optional, for the .latent test: $pcmd" >&2
  return 0
}
need_pkg slurmctld test -x /usr/sbin/slurmctld   # tests/slurm: a one-host Slurm runs the sbatch examples
need_pkg slurmd test -x /usr/sbin/slurmd
need_pkg slurm-client command -v sbatch
need_pkg munge test -x /usr/sbin/munged

# Deduplicate.
if [ ${#missing[@]} -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
fi
if [ ${#missing[@]} -eq 0 ]; then
  pip_install || exit 1
  echo "deps: everything needed is installed"
  exit 0
fi
echo "deps: missing: ${missing[*]}"
[ $check_only -eq 1 ] && exit 1
if ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: no apt-get here: install the equivalents of: ${missing[*]}" >&2
  exit 1
fi
cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo sh -c "$cmd" || exit 1
  else
    echo "deps: run as root:  sudo sh -c '$cmd'" >&2
    exit 1
  fi
else
  sh -c "$cmd" || exit 1
fi
echo "deps: installed ${missing[*]}"
pip_install
