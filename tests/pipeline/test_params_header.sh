#!/usr/bin/env bash
# The job's parameters are plain (ranks/pipeline/job_params.h): their
# headers compile with none of the runtime's on the include path (no comm/
# with MPI, no stage/, no model files, no HDF5), so a command can hold and
# check them before MPI starts and without a model.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_work_dir params-header
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || sp_skip "no C compiler ($cc)"
inc=(-I"$SP_SRC/ranks/pipeline" -I"$SP_SRC/ranks/import" -I"$SP_SRC/ranks/sampling"
     -I"$SP_SRC/planner" -I"$SP_SRC/kernels")
while IFS= read -r d; do inc+=(-I"$d"); done < <(find "$SP_SRC/ranks/nets" -type d)
for h in job_option.h job_parse.h job_params.h jobs.h job_prompt.h; do
  printf '#include "%s"\nint main(void) { return 0; }\n' "$h" >"$work/t.c"
  if "$cc" -std=c11 -fsyntax-only "${inc[@]}" "$work/t.c" 2>"$work/err"; then
    ok "$h: compiles without comm/, stage/, model/ or HDF5"
  else
    bad "$h needs a runtime header: $(head -3 "$work/err")"
  fi
done
exit $fail
