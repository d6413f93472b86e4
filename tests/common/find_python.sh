# Sourced by the script tests: sets PY to a python3 that imports numpy and
# h5py. The first python3 on PATH may be a pyenv/venv one without them, so
# the distribution's /usr/bin/python3 (python3-numpy, python3-h5py) is tried
# next. When none has both, this prints how to install them and ends the
# calling script: exit 77 (skipped) only when SP_ALLOW_SKIP=1 and CI is not
# set (common/skip.sh), else exit 1, so CI cannot silently skip the parity
# tests.
. "$(dirname "${BASH_SOURCE[0]}")/python.sh"
if ! sp_python_find 'import numpy, h5py'; then
  _sp_why="no python3 with numpy and h5py found (tried python3, /usr/bin/python3): run launch/deps.sh or: sudo apt-get install python3-numpy python3-h5py"
  if [ "${SP_ALLOW_SKIP:-0}" = 1 ]; then
    . "$(dirname "${BASH_SOURCE[0]}")/skip.sh"
    sp_skip "$_sp_why"
  fi
  echo "FAIL: $_sp_why (SP_ALLOW_SKIP=1 skips instead, outside CI)" >&2
  exit 1
fi
export PY
