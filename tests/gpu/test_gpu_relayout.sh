#!/usr/bin/env bash
# A latent shape change between jobs on the CUDA backend: the checks of
# tests/ops/test_jobs_relayout.sh (a jobs file and a queue of two shapes
# alternating on 1 and 2 ranks, each job bit-identical to its own run, the
# weights read once, a bypassed LoRA's pairs kept) with --device cuda, and
# once more with half the blocks streamed (--stream-frac 0.5). The arena is
# loaded for the plan's largest shape and re-carved for each job's. Two
# ranks on one GPU move their activations through the host-staged MPI
# transport. Skips (77) without a GPU.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_gpu
export OMP_NUM_THREADS=2
SP_RELAYOUT_DEVICE=cuda exec bash "$SP_SRC/tests/ops/test_jobs_relayout.sh"
