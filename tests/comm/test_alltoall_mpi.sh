#!/usr/bin/env bash
# comm_alltoall / comm_alltoallv under mpirun -np 2, 3 and 4
# (test_alltoall.c checks every byte against its formula).
set -u
. "$SP_SRC/tests/common/mpi_env.sh"
t=${SP_BUILD:-}/tests/comm_test_alltoall
if [ -z "${SP_BUILD:-}" ] || [ ! -x "$t" ]; then
  echo "SP_BUILD is not set to a build with tests/comm_test_alltoall (ctest sets it)" >&2
  exit 1
fi
fail=0
for n in 2 3 4; do
  if timeout 120 mpirun -np $n "$t"; then echo "ok   $n ranks"; else echo "FAIL $n ranks"; fail=1; fi
done
exit $fail
