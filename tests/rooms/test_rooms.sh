#!/usr/bin/env bash
# The rooms' include rule (DESIGN.md "Top-level rooms", its ```rooms
# block; tests/rooms/check_rooms.py): the tree keeps it, and the checker
# catches what goes against it, each case on a copy of the sources with one
# change planted: an upward include into the planner, a non-C header in
# the planner, a network's header in the model-file layer (below the
# networks), the pipeline's in a network, a library linked against the
# order, and a room order with a cycle.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_need_tool python3
sp_work_dir rooms
check=$SP_SRC/tests/rooms/check_rooms.py

out=$(python3 "$check" "$SP_SRC" 2>&1) && ok "the tree keeps the room order: ${out##*$'\n'}" ||
  bad "the tree goes against the room order:
$out"

# A copy of what the checker reads: DESIGN.md and the rooms' folders.
src=$work/src
mkdir -p "$src"
cp "$SP_SRC/DESIGN.md" "$src/"
for d in planner comm kernels ranks launch; do cp -r "$SP_SRC/$d" "$src/$d"; done

# plant NAME FILE LINE NEEDLE: FILE (relative) gets LINE appended; the
# checker, given that file, must exit 1 naming it with NEEDLE; the file is
# put back afterwards.
plant() {
  local name=$1 file=$2 line=$3 needle=$4 out rc
  cp "$src/$file" "$work/keep"
  printf '%s\n' "$line" >> "$src/$file"
  out=$(python3 "$check" "$src" "$file" 2>&1)
  rc=$?
  if [ $rc = 1 ] && grep -qF -- "$needle" <<<"$out"; then
    ok "$name: refused ($(grep -F -- "$needle" <<<"$out" | head -n 1))"
  else
    bad "$name: exit $rc, want 1 with '$needle' in:
$out"
  fi
  cp "$work/keep" "$src/$file"
}

plant "the job's parameters in the planner" planner/budget.c '#include "job_params.h"' \
  "planner/budget.c:$(($(wc -l < "$src/planner/budget.c") + 1)): planner includes job_params.h of ranks/pipeline"
plant "HDF5 in the planner" planner/budget.c '#include <hdf5.h>' \
  "planner includes <hdf5.h>: the planner uses the C library only"
plant "the DiT's model file in the model-file layer" ranks/model/mfile_open.c \
  '#include "model_file.h"' "ranks/model includes model_file.h of ranks/nets/wan_dit"
plant "the trace's collectives in the DiT's CUDA stage" ranks/nets/wan_dit/cuda/stage_cuda.c \
  '#include "trace.h"' "ranks/nets/wan_dit includes trace.h of ranks/pipeline"
plant "the LoRA files in the DiT's stage" ranks/nets/wan_dit/stage.h '#include "lora.h"' \
  "ranks/nets/wan_dit includes lora.h of ranks/import"

# The build's links keep the same order (the checker reads each room's
# CMakeLists.txt when no file is named): the planner linking the logger.
cp "$src/planner/CMakeLists.txt" "$work/keep"
printf 'target_link_libraries(sp_planner PUBLIC sp_log)\n' >> "$src/planner/CMakeLists.txt"
out=$(python3 "$check" "$src" 2>&1)
rc=$?
needle="planner/CMakeLists.txt: sp_planner links sp_log of comm/log"
[ $rc = 1 ] && grep -qF "$needle" <<<"$out" && ok "a link against the order: refused ($needle)" ||
  bad "a link against the order: exit $rc, want 1 with '$needle' in:
$out"
cp "$work/keep" "$src/planner/CMakeLists.txt"

# The whole copy, with a planted include and no file named, fails too.
printf '#include "pipeline.h"\n' >> "$src/kernels/kern_cpu.h"
out=$(python3 "$check" "$src" 2>&1)
rc=$?
[ $rc = 1 ] && grep -qF "kernels/kern_cpu.h:" <<<"$out" &&
  ok "the whole tree with one planted include: refused" ||
  bad "the whole tree with one planted include: exit $rc:
$out"

# A room order with a cycle is refused before any file is read.
sed -i 's/^planner:.*$/planner: kernels/' "$src/DESIGN.md"
out=$(python3 "$check" "$src" 2>&1)
rc=$?
[ $rc != 0 ] && grep -qF "cycle" <<<"$out" && ok "a room order with a cycle: $out" ||
  bad "a room order with a cycle: exit $rc: $out"

exit $fail
