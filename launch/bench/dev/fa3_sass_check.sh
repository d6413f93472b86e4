#!/usr/bin/env bash
# Checks the compiled fa3 kernels (kernels/cuda/sm90a/, tests/gpu/dev/sm90a/)
# without a GPU: compiles both files for sm_90a with ptxas -v, then for every
# kernel instance
#   - prints registers, stack frame and spills, and fails on any spill, any
#     stack frame, or ptxas's notes that wgmma was serialised (C7512, C7510)
#     or setmaxnreg ignored (C7508);
#   - counts wgmma instructions in its SASS (HGMMA bf16, IGMMA int8, QGMMA
#     e4m3; fails on none; the fp8 P V instances must have QGMMA);
#   - for the overlapped instances, counts the MUFU.EX2 (the softmax's
#     exponentials) between each wait for S (WARPGROUP.DEPBAR.LE gsb0, 0x1)
#     and the following wait for P V (... 0x0); fails when a step has fewer
#     than BN / 2 (one per score of a thread), i.e. when ptxas hoisted the P V
#     wait above the softmax
#     (fa3_kernel.cuh, fa3_consumer).
# usage: launch/bench/dev/fa3_sass_check.sh   (from anywhere; needs nvcc and
# cuobjdump: PATH, /usr/local/cuda/bin, or CUOBJDUMP=...)
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
[ -x "$cuobjdump" ] || { echo "fa3_sass_check: no cuobjdump (set CUOBJDUMP)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
inc="-I$root/kernels -I$root/kernels/cuda -I$root/kernels/cuda/sm90a -I$root/comm/log"
inc="$inc -I$root/comm/log/cuda -I$root/planner -I$root/tests/gpu/dev"
for src in kernels/cuda/sm90a/fa3_attn.cu kernels/cuda/sm90a/fa3_int8.cu \
  kernels/cuda/sm90a/fa3_fp8.cu tests/gpu/dev/sm90a/fa3_variants.cu; do
  obj=$tmp/$(basename "$src").o
  "$nvcc" -O2 -DNDEBUG -std=c++17 -gencode=arch=compute_90a,code=sm_90a $inc -Xptxas -v \
    -c "$root/$src" -o "$obj" >"$tmp/ptxas.log" 2>&1 || { cat "$tmp/ptxas.log"; exit 1; }
  if grep -E "C7512|C7510|C7508" "$tmp/ptxas.log"; then fail=1; fi
  # one line per kernel: name, registers, stack, spills
  awk '/Compiling entry function/ { match($0, /_Z[^'"'"']*/); k = substr($0, RSTART, RLENGTH) }
       /bytes stack frame/ { st = $1; ss = $5; sl = $9 }
       /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); r = substr($0, RSTART + 5, RLENGTH - 5);
         printf "%s regs %s stack %s spill-st %s spill-ld %s\n", k, r, st, ss, sl }' \
    "$tmp/ptxas.log" >"$tmp/res.txt"
  while read -r k _ regs _ stack _ sst _ sld; do
    "$cuobjdump" -sass -fun "$k" "$obj" >"$tmp/k.sass"
    hg=$(grep -cE "[HIQ]GMMA" "$tmp/k.sass" || true)
    qg=$(grep -cE "QGMMA" "$tmp/k.sass" || true)
    # template args: fa3_cfg<HD, BN, NCWG, STAGES, OVERLAP, PINGPONG, QK8, TMA_STORE, PV8>
    cfg=$(echo "$k" | sed -E 's/.*fa3_cfgILi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELb([01])ELb([01])ELb([01])ELb([01])ELb([01]).*/\1 \2 \3 \4 \5 \6 \7 \8 \9/')
    minexp=-
    case $cfg in
    *fa3*) # not an attention kernel (the int8 passes): registers and spills only
      n=${k#_Z}
      len=${n%%[!0-9]*}
      name=${n:${#len}:$len}
      hg=n/a
      set -- 0 0 0 0 0 0 0 0 0 ;;
    *)
      set -- $cfg
      name="hd$1 bn$2 wg$3 st$4 ovl$5 pp$6 int8-$7 tma-st$8 fp8pv-$9"
      if [ "$9" = 1 ] && [ "$qg" = 0 ]; then
        echo "  ^ e4m3 P V without a QGMMA"
        fail=1
      fi ;;
    esac
    if [ "$5" = 1 ]; then
      minexp=$(awk '/WARPGROUP.DEPBAR.LE gsb0, 0x1/ { on = 1; n = 0; next }
                    on && /MUFU.EX2/ { n++ }
                    on && /WARPGROUP.DEPBAR.LE gsb0, 0x0/ { if (min == "" || n < min) min = n; on = 0 }
                    END { print (min == "" ? "none" : min) }' "$tmp/k.sass")
    fi
    printf '%-46s regs %3s stack %3s spill %s/%s  wgmma %3s  exp2 between S and PV waits (min) %s\n' \
      "$name" "$regs" "$stack" "$sst" "$sld" "$hg" "$minexp"
    if [ "$stack" != 0 ] || [ "$sst" != 0 ] || [ "$sld" != 0 ] || [ "$hg" = 0 ]; then fail=1; fi
    [ "$sst" = 0 ] || echo "  ^ spills"
    if [ "$minexp" != - ] && { [ "$minexp" = none ] || [ "$minexp" -lt $(($2 / 2)) ]; }; then
      fail=1
    fi
  done <"$tmp/res.txt"
done
[ $fail = 0 ] && echo "fa3_sass_check: ok" || echo "fa3_sass_check: FAILED"
exit $fail
