#!/usr/bin/env bash
# Quantized weights on the CUDA stage (gpu_quant.py): fp8 W8A8, int8 W8A8,
# the weight-only path (fp8, int8, every GGUF format), a bf16 file
# quantised at load, each GPU forward within 1e-2 relative L2 of the CPU's
# at the same precision; reruns, 2 and 3 ranks sharing the GPU, streamed
# blocks and row chunks bit-identical; LoRAs bypassed (every case) and merged
# (fp8, int8) within 2e-2 of the CPU; --fp8-accum fast (cuBLASLt's fast fp8
# accumulation, sm_90) within 1e-2 of the CPU's fp8 forward, a rerun and 2
# ranks bit-identical (sm_89: its refusal naming the flag, a skip line);
# fp8, Q8_0 and Q4_K against the bf16 forward of the same weights, reported
# (quality.json in the work folder). Skips (77) without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
sp_python_with 'import numpy, h5py, gguf' "numpy, h5py and gguf (pip install gguf)"
sp_mpi
export OMP_NUM_THREADS=2
sp_work_dir gpu-quant
"$PY" "$SP_SRC/tests/gpu/gpu_quant.py" "$SP_BIN" "$work" cuda
