#!/bin/bash
# plan with quantized weights against the byte formula of a CUDA stage
# written out in plan_quant.py: 14B fp8 on one 24 GB card at 480p fits,
# Wan 2.2 A14B fp8 on 2 x 24 GB keeps both experts resident, every rank's
# peak equal to the formula's; H200 (sm_90) without the products scratch;
# --fp8-accum fast: the same peak, a shorter predicted step than full's.
set -u
: "${SP_BIN:?}" "${SP_SRC:?}"
. "$SP_SRC/tests/common/script.sh"
sp_python
"$PY" "$SP_SRC/tests/quant/plan_quant.py" "$SP_BIN"
