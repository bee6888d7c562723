#!/bin/sh
# The eval regression as a user's CI would run it: `eval` of the shipped
# checkpoint on the shipped short traces with the golden config, checked
# against the golden results, and the proof that the check is not blind.
#
#   eval_regression.sh PROGRAM MODEL TRACES CONFIG GOLDEN WORK PROBES RETENTION
#                      [-- EVAL OPTIONS...]
#
# 1. eval with default options (and the eval options given, the same as the
#    golden results were made with), then `check --probes PROBES --retention
#    RETENTION` against GOLDEN: must pass (another machine's arithmetic can
#    flip a greedy answer or a tie between pages now and then: PROBES > 0).
# 2. Real drift of the policy: the same eval with the pinning taken out of
#    the config (system no longer pinned), memdecay only (the other policies
#    do not read the config; their runs are then missing, drift of another
#    kind): memdecay's retention of the system region falls, and check must
#    say DRIFT on that row.
# 3. A golden cell moved by PROBES + 1 probes: check must say DRIFT.
set -u
program=$1 model=$2 traces=$3 config=$4 golden=$5 work=$6 probes=$7 retention=$8
shift 8
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
fail() { echo "FAIL: $*" >&2; exit 1; }
# OpenMP threads sleep while waiting: the test machines are small and shared.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$work" && mkdir -p "$work" || exit 99

check() { # NEW GOLDEN WANT_EXIT LABEL
  "$program" check "$1" --golden "$2" --probes "$probes" --retention "$retention" >"$1.check" 2>&1
  got=$?
  echo "== $4: check exited $got (want $3)"
  grep -E 'DRIFT|^OK' "$1.check"
  [ "$got" -eq "$3" ] || fail "$4: check exited $got, expected $3"
}

start=$(date +%s)
"$program" eval --model "$model" --traces "$traces" --config "$config" -o "$work/new.json" \
  --reproducible "$@" || fail "eval failed"
echo "eval: $(( $(date +%s) - start )) s"
check "$work/new.json" "$golden" 0 "the shipped checkpoint against the golden results"

# The config with every region unpinned (the "pinned": true of system).
sed 's/"pinned": true/"pinned": false/' "$config" >"$work/unpinned.json" || exit 99
cmp -s "$config" "$work/unpinned.json" && fail "the golden config has no pinned region"
"$program" eval --model "$model" --traces "$traces" --config "$work/unpinned.json" \
  -o "$work/unpinned.eval.json" --reproducible -q "$@" --policies memdecay || fail "eval (unpinned) failed"
check "$work/unpinned.eval.json" "$golden" 1 "system unpinned (real drift)"
grep -q '^system .*memdecay@0.25 retention.*DRIFT' "$work/unpinned.eval.json.check" ||
  fail "unpinned: the system region's retention did not drift"

# One cell of the golden results moved by PROBES + 1 recalled probes.
awk -v add=$((probes + 1)) '
  !done && /"plan": \{/ { inside = 1 }
  inside && /"recalled": [0-9]+/ && !done {
    match($0, /[0-9]+/); n = substr($0, RSTART, RLENGTH) + 0
    sub(/[0-9]+/, (n >= add ? n - add : n + add)); done = 1
  }
  { print }' "$golden" >"$work/moved.golden.json" || exit 99
cmp -s "$golden" "$work/moved.golden.json" && fail "could not move a golden cell"
check "$work/new.json" "$work/moved.golden.json" 1 "a golden cell moved by $((probes + 1)) probes"
echo "eval regression: ok in $(( $(date +%s) - start )) s"
