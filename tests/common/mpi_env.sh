# Sourced by the script tests that start ranks with mpirun: the tests run as
# root in CI and oversubscribe the two cores, each rank on one OpenMP thread
# (results do not depend on it), and NVLink multicast stays off.
if ! command -v mpirun >/dev/null 2>&1; then
  echo "mpirun not found: run launch/deps.sh (openmpi-bin)" >&2
  exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1 NCCL_NVLS_ENABLE=0
