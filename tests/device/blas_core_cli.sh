#!/bin/sh
# memdecay-calibrate's OpenBLAS core switch (MEMDECAY_BLAS_CORE in
# memdecay-calibrate(1)), seen through `devices`:
#   simulate-weak          starts on Prescott as if OpenBLAS had chosen it,
#                          then switches to the best core for this CPU
#   OPENBLAS_CORETYPE=...  the user's choice is kept, and said to be theirs
#   MEMDECAY_BLAS_CORE=keep  OpenBLAS's own choice is kept
#   an unknown core name   refused with a warning, OpenBLAS's choice kept
# The best core comes from the unit-tested function (test_blas_core
# --best-core), so the expectations hold on any x86 CPU.
#   blas_core_cli.sh PROGRAM TEST_BLAS_CORE
set -u
program=$1
helper=$2
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
# Decide from a clean start, whatever the caller's environment says.
unset OPENBLAS_CORETYPE MEMDECAY_BLAS_CORE MD_BLAS_CORE_FROM
best=$("$helper" --best-core) || exit 99
library=$("$helper" --current-core) || exit 99
echo "best core for this CPU: $best; OpenBLAS chooses: $library"
failed=0
fail() { echo "FAIL: $*" >&2; cat "$tmp/out" "$tmp/err" >&2; failed=1; }
run() {
  env "$@" "$program" devices >"$tmp/out" 2>"$tmp/err"
  status=$?
  echo "$*: exit $status: $(grep '^blas:' "$tmp/out")"
  [ "$status" = 0 ] || fail "$*: exit $status"
  grep -q '^blas: ' "$tmp/out" || fail "$*: no blas line"
}

run MEMDECAY_BLAS_CORE=simulate-weak
if [ "$best" = none ]; then
  grep -Eq '^blas: .* core Prescott .*\(simulated: MEMDECAY_BLAS_CORE=simulate-weak\)$' "$tmp/out" ||
    fail "simulate-weak on a CPU without AVX: expected to stay on Prescott"
elif grep -q "OpenBLAS has no $best kernels for this CPU" "$tmp/err"; then
  echo "(this OpenBLAS lacks the $best kernels: warned)"
  grep -Eq '^blas: .*\(switched from Prescott\)$' "$tmp/out" || fail "simulate-weak: not switched"
else
  grep -Eiq "^blas: OpenBLAS .*, core $best \(best for this CPU: $best\) \(switched from Prescott\)$" "$tmp/out" ||
    fail "simulate-weak: expected core $best, switched from Prescott"
  [ -s "$tmp/err" ] && fail "simulate-weak: unexpected stderr"
fi

run OPENBLAS_CORETYPE=Prescott
grep -Eq '^blas: .* core Prescott .*\(set by OPENBLAS_CORETYPE\)$' "$tmp/out" ||
  fail "OPENBLAS_CORETYPE=Prescott: the user's core not kept"

run OPENBLAS_CORETYPE=Prescott MEMDECAY_BLAS_CORE=simulate-weak
grep -Eq '^blas: .* core Prescott .*\(set by OPENBLAS_CORETYPE\)$' "$tmp/out" ||
  fail "OPENBLAS_CORETYPE with simulate-weak: the user's core not kept"

run MEMDECAY_BLAS_CORE=keep
grep -Eiq "^blas: .* core $library .*\(kept: MEMDECAY_BLAS_CORE=keep\)$" "$tmp/out" ||
  fail "keep: expected OpenBLAS's own $library"

run MEMDECAY_BLAS_CORE=NoSuchCore
grep -Eiq "^blas: .* core $library " "$tmp/out" || fail "an unknown core: OpenBLAS's choice not kept"
grep -q '^memdecay-calibrate: warning: MEMDECAY_BLAS_CORE=NoSuchCore: not an OpenBLAS core' "$tmp/err" ||
  fail "an unknown core: no warning"

if [ "$best" != none ] && [ "$best" != Sandybridge ]; then
  # A forced narrower core (one every CPU with AVX runs).
  run MEMDECAY_BLAS_CORE=Sandybridge
  grep -Eq "^blas: .* core Sandybridge .*\(switched from [A-Za-z0-9_]+\)$" "$tmp/out" ||
    fail "MEMDECAY_BLAS_CORE=Sandybridge: not switched"
fi
exit $failed
