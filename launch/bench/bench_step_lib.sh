# What the step benchmarks share (bench_quant_step.sh, bench_lora.sh source it):
# the run they time, from SP_BENCH_PRESET, SP_BENCH_FRAMES, SP_BENCH_SIZE and
# SP_BENCH_DEVICE (default Wan 2.1 14B at 480x832x81 on CUDA; the tiny preset
# on the CPU checks a script), and the prompt condition every run reads.
PRESET=${SP_BENCH_PRESET:-wan2.1-14b}
FRAMES=${SP_BENCH_FRAMES:-81}
SIZE=${SP_BENCH_SIZE:-480x832}
DEV=${SP_BENCH_DEVICE:-cuda}
export NCCL_NVLS_ENABLE=0

# bench_cond FILE: a --cond file of 512 context rows and the negative's,
# random from a fixed seed (timing only).
bench_cond() {
  python3 - "$1" <<'PY'
import sys, h5py, numpy as np
r = np.random.default_rng(5)
with h5py.File(sys.argv[1], "w") as f:
    f["context"] = r.standard_normal((512, 4096)).astype(np.float32)
    f["context_null"] = r.standard_normal((512, 4096)).astype(np.float32)
PY
}
