#!/usr/bin/env bash
# staticpipe commcheck under mpirun -np 2, 3 and 4 on the CPU: every pattern
# at odd and even sizes passes (exit 0, every JSON row ok, one row per
# pattern and size); with --corrupt-rank 1 (the test aid) the check fails with
# exit 1 and a FAIL line naming the corrupting rank as the sender; one rank
# alone skips every pattern; bad options exit 2 with a line naming them.
set -u
. "$SP_SRC/tests/common/script.sh"
sp_mpi
BIN=${SP_BIN:?SP_BIN is the staticpipe binary}
command -v python3 >/dev/null || sp_skip "python3 not found"
sp_work_dir comm-commcheck-mpi
TMP=$work
SZ=13b,4kb,1mb

for n in 2 3 4; do
  timeout 300 mpirun -np $n "$BIN" commcheck --sizes $SZ --iters 2 --timeout 30 --json \
    >"$TMP/ok$n.json" 2>"$TMP/ok$n.err" || bad "$n ranks: exit $?: $(tail -5 "$TMP/ok$n.err")"
  python3 - "$TMP/ok$n.json" $n <<'PY' || bad "$n ranks: JSON"
import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2])
assert r["ok"] is True and r["ranks"] == n, r
rows = r["results"]
assert len(rows) == 3 * 3, len(rows)
assert sorted({x["pattern"] for x in rows}) == ["alltoall", "exchange", "p2p"]
for x in rows:
    assert x["ok"] is True and x["transport"] == "mpi" and x["memory"] == "host", x
    if x["pattern"] == "alltoall":
        assert x["bytes"] % n == 0 and x["moved_bytes"] == x["bytes"] // n * (n - 1), x
    else:
        assert x["moved_bytes"] == x["bytes"], x
PY
  c=1 # in every pattern at every rank count (an odd last rank sits out of exchange)
  timeout 300 mpirun -np $n "$BIN" commcheck --sizes 4kb --iters 1 --timeout 30 --corrupt-rank $c \
    >"$TMP/bad$n.out" 2>"$TMP/bad$n.err"
  rc=$?
  [ $rc -eq 1 ] || bad "$n ranks corrupted by rank $c: exit $rc, want 1"
  for p in p2p alltoall exchange; do
    grep -qE "FAIL $p [0-9]+ bytes \(host\): rank [0-9]+ received from rank $c: byte [0-9]+ of the block is 0x[0-9a-f]{2}, expected 0x[0-9a-f]{2}" \
      "$TMP/bad$n.err" || bad "$n ranks: no FAIL line for $p from rank $c: $(grep FAIL "$TMP/bad$n.err")"
  done
  grep -q "FAILED" "$TMP/bad$n.out" || bad "$n ranks: the table does not say FAILED"
  # no FAIL line names a sender other than the corrupting rank
  if grep "FAIL " "$TMP/bad$n.err" | grep -v "received from rank $c:" | grep -q .; then
    bad "$n ranks: a FAIL line blames another rank: $(grep FAIL "$TMP/bad$n.err")"
  fi
done

# one rank, no mpirun: nothing to move, every pattern skipped, exit 0
"$BIN" commcheck --sizes 4kb >"$TMP/one.out" 2>&1 || bad "one rank: exit $?"
[ "$(grep -c 'needs 2 ranks' "$TMP/one.out")" -eq 3 ] || bad "one rank: $(cat "$TMP/one.out")"

expect2() { # NAME NEEDLE ARGS...
  local name=$1 needle=$2
  shift 2
  "$BIN" commcheck "$@" >"$TMP/x.out" 2>"$TMP/x.err"
  local rc=$?
  [ $rc -eq 2 ] || bad "$name: exit $rc, want 2"
  grep -qF -- "$needle" "$TMP/x.err" || bad "$name: no '$needle' in: $(cat "$TMP/x.err")"
}
expect2 "size unit" "--sizes" --sizes 4
expect2 "size zero" "--sizes: size '0b' is zero" --sizes 0b
expect2 "size too large" "outside 1b..4gb" --sizes 5gb
expect2 "pattern" "'ring' is not p2p" --patterns ring
expect2 "device" "--device: 'tpu'" --device tpu
expect2 "transport" "--transport" --transport tcp
expect2 "nccl on cpu" "needs --device cuda" --transport nccl
expect2 "iters" "--iters" --iters -1
expect2 "stray" "unexpected argument" extra
"$BIN" commcheck --help | grep -q -- "--corrupt-rank" || bad "--help lacks --corrupt-rank"
exit $fail
