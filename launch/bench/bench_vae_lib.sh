# What the VAE decoder benches share (bench_vae.sh, bench_vae22.sh),
# sourced by them: their arguments, our decoder's runs, the report
# (bench_vae_report.py).

# bench_vae_args NAME DEFAULT_OUT ARGS...: sets wan (--wan-repo DIR or
# WAN_REPO), B (the build directory) and out (the JSON, DEFAULT_OUT unless
# given).
bench_vae_args() {
  local name=$1 dflt=$2
  shift 2
  wan=${WAN_REPO:-}
  if [ "${1:-}" = "--wan-repo" ]; then
    wan=${2:?--wan-repo needs a directory}
    shift 2
  fi
  B=$(cd "${1:?usage: $name [--wan-repo DIR] BUILD_DIR [OUT_JSON]}" && pwd) || exit 2
  out=${2:-$dflt}
}

# bench_vae_ours BIN FRAMES SIZES DIR: BIN --bench at each latent size
# (HxW, comma-separated) of FRAMES frames, its JSON lines into
# DIR/ours.jsonl, its log into DIR/ours_SIZE.log (the tail shown on
# failure).
bench_vae_ours() {
  local bin=$1 frames=$2 sizes=$3 d=$4 s h w
  : > "$d/ours.jsonl"
  for s in ${sizes//,/ }; do
    h=${s%x*}
    w=${s#*x}
    echo "# staticpipe CUDA decoder, latent ${frames}x${h}x${w}" >&2
    "$bin" --bench "$h" "$w" "$frames" --reps 3 > "$d/ours_$s.log" 2>&1 || tail -5 "$d/ours_$s.log" >&2
    grep '^{' "$d/ours_$s.log" >> "$d/ours.jsonl"
  done
}
