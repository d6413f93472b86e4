# Sourced by the script tests' helpers (find_python.sh, script.sh).
# sp_python_find IMPORTS: PY = the first of python3 and /usr/bin/python3
# that runs the Python statement IMPORTS (the first python3 on PATH may be a
# pyenv/venv one without the distribution's modules); returns 1 with PY
# empty when neither does.
sp_python_find() {
  PY=
  local p
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "$1" >/dev/null 2>&1; then
      PY=$(command -v "$p")
      return 0
    fi
  done
  return 1
}
