#!/bin/sh
# The CI regression as a user's CI would run it, and the proof that its
# tolerance is right: wide enough for another machine's arithmetic, narrow
# enough for real drift.
#
#   regression.sh PROGRAM PERTURB MODEL TRACES GOLDEN WORK RTOL [-- RUN OPTIONS...]
#
# 1. `run` on MODEL and TRACES (with the collect options given, the same as
#    the golden config was made with; see data/golden/README.md), then
#    `check` against GOLDEN at RTOL: must pass.
# 2. Another machine: every captured attention value of that run multiplied
#    by 1 + 1e-4 u (tests/regression/perturb_run.c; a different BLAS kernel,
#    instruction set or thread count changes them by 1e-7 to 1e-6), then
#    extract + fit + check: must pass.
# 3. Real drift, measured on the same run directory: tau 1 -> 4 (a runtime
#    that counts only strong attention as a refresh): fewer tokens are ever
#    used, so the measured base priorities and alpha move; check must say
#    DRIFT. (The shipped checkpoint's attention is selective: a token is
#    either used far above the uniform share or far below it, so its
#    half-lives hardly move with tau, and a small change of tau, 1.25, is
#    within the tolerance.)
# 4. Real drift in the model run: attention captured from the first layer
#    only instead of all (--layers 0:1): check must say DRIFT, with at least
#    one half-life outside its widened golden interval.
set -u
program=$1 perturb=$2 model=$3 traces=$4 golden=$5 work=$6 rtol=$7
shift 7
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 99

# check NEW WANT_EXIT LABEL: prints the comparison, fails unless it exits WANT_EXIT.
check() {
  "$program" check "$1" --golden "$golden" --rtol "$rtol" >"$1.check" 2>&1
  got=$?
  echo "== $3: check exited $got (want $2)"
  cat "$1.check"
  [ "$got" -eq "$2" ] || fail "$3: check exited $got, expected $2"
}

# extract + fit on a run directory with extra extract options.
refit() {
  dir=$1 name=$2
  shift 2
  "$program" extract "$dir" -o "$work/$name.csv" --reproducible -q "$@" &&
    "$program" fit "$work/$name.csv" --calibration "$work/$name.calibration.json" \
      --reproducible -q -o "$work/$name.json" || fail "$name: extract or fit failed"
}

start=$(date +%s)
"$program" run --model "$model" --traces "$traces" -o "$work/new.json" --reproducible -q "$@" ||
  fail "run failed"
echo "run: $(( $(date +%s) - start )) s"
check "$work/new.json" 0 "the shipped checkpoint against the golden config"

cp -r "$work/new.run/run" "$work/noisy" && "$perturb" "$work/noisy" 1e-4 7 || fail "perturb_run"
refit "$work/noisy" noisy
check "$work/noisy.json" 0 "attention perturbed by 1e-4 relative (another machine)"

refit "$work/new.run/run" tau --tau 4
check "$work/tau.json" 1 "tau 4 instead of 1 (real drift)"

"$program" run --model "$model" --traces "$traces" -o "$work/layers.json" --reproducible -q \
  "$@" --layers 0:1 || fail "run --layers 0:1 failed"
check "$work/layers.json" 1 "first layer only instead of all (real drift)"
grep -q 'half_life .*DRIFT' "$work/layers.json.check" || fail "--layers 0:1: no half-life drifted"
echo "regression: ok in $(( $(date +%s) - start )) s"
