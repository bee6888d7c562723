#!/bin/sh
# run end to end on a random checkpoint (tests/collect/with_model.sh made
# SCRATCH/model), then checks that it is the three stages chained:
#  - standard output stays empty; the half-life table is on standard error;
#  - the work directory holds the run, the events and the sidecar;
#  - collect + extract by hand with the same options give the same run
#    directory (run.json names no output path with --reproducible) and
#    events byte for byte, and the same sidecar but for the
#    paths; fit on the work directory's files gives the same config;
#  - run again: refused without --resume (the config untouched); with
#    --resume the same config again;
#  - extract given the work directory instead of its run/ says which to give.
#   run_e2e.sh PROGRAM JSON_CHECK TRACES SCRATCH
set -u
program=$1 json_check=$2 traces=$3 s=$4
opts="--max-steps 8 --layers 1: --tau 1.2 --guard 2 --reproducible"
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck disable=SC2086
"$program" run --model "$s/model" --traces "$traces" -o "$s/m.json" $opts --plot "$s/m.svg" \
  >"$s/out" 2>"$s/err" || { cat "$s/err" >&2; fail "run exited $?"; }
[ -s "$s/out" ] && fail "run wrote to standard output"
grep -Eq '^region +rows +events +half-life' "$s/err" || fail "no half-life table on stderr"
grep -q '^run: extract: 3 episodes' "$s/err" || fail "no extract line on stderr"
for f in m.run/run/run.json m.run/run/manifest.csv m.run/events.csv m.run/events.calibration.json m.svg; do
  [ -f "$s/$f" ] || fail "$f missing"
done
"$json_check" "$s/m.json" policy.source=\"measured\" model.name=\"model\" workload.episodes=3 \
  workload.tau=1.2 workload.guard=2 "workload.traces[0].path=\"$traces\"" \
  "workload.sources[0]=\"$s/m.run/events.csv\"" || fail "config"
"$json_check" "$s/m.run/events.calibration.json" "run.aggregation.layers[0]=1" || fail "sidecar"
# The same stages by hand.
# shellcheck disable=SC2086
"$program" collect --model "$s/model" --traces "$traces" --out "$s/hand" --max-steps 8 --layers 1: \
  --reproducible -q || fail "collect"
"$program" extract "$s/hand" -o "$s/hand.csv" --tau 1.2 --guard 2 --reproducible -q || fail "extract"
for f in run.json manifest.csv attn/chat-1.npy prefill/raw-2.npy; do
  cmp "$s/hand/$f" "$s/m.run/run/$f" || fail "$f differs"
done
cmp "$s/hand.csv" "$s/m.run/events.csv" || fail "events differ"
grep -v '"path"' "$s/hand.calibration.json" >"$s/a" && grep -v '"path"' "$s/m.run/events.calibration.json" >"$s/b"
cmp "$s/a" "$s/b" || fail "sidecars differ beyond their paths"
"$program" fit "$s/m.run/events.csv" --calibration "$s/m.run/events.calibration.json" \
  --reproducible -q -o "$s/refit.json" || fail "fit"
cmp "$s/refit.json" "$s/m.json" || fail "fit on the work directory gives another config"
# Again: refused without --resume, nothing touched; then resumed.
cp "$s/m.json" "$s/first.json"
# shellcheck disable=SC2086
"$program" run --model "$s/model" --traces "$traces" -o "$s/m.json" $opts 2>"$s/err2"
[ $? -eq 2 ] || fail "a second run without --resume did not exit 2"
grep -q "m.run/run already holds a run: pass --resume" "$s/err2" || fail "message: $(cat "$s/err2")"
cmp "$s/m.json" "$s/first.json" || fail "the refused run changed the config"
# shellcheck disable=SC2086
"$program" run --model "$s/model" --traces "$traces" -o "$s/m.json" $opts --resume -q 2>"$s/err3" ||
  fail "resume: $(cat "$s/err3")"
[ -s "$s/err3" ] && fail "--quiet printed: $(cat "$s/err3")"
cmp "$s/m.json" "$s/first.json" || fail "resuming a finished run changed the config"
# extract given the work directory instead of its run/ names the right one.
"$program" extract "$s/m.run" -o "$s/wrong.csv" -q 2>"$s/err4" && fail "extract on the work directory succeeded"
grep -q "m.run is the work directory of 'run'; its run directory is .*m.run/run" "$s/err4" ||
  fail "work directory message: $(cat "$s/err4")"
echo "run_e2e: ok"
