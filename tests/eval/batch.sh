#!/bin/sh
# eval's runs of an episode stepped together (--batch) write the bytes
# that one run at a time (--batch 1) writes: every run of the default table
# in one batch and in batches of 4 (the last one short), on the first
# EPISODES (default 4) episodes of agent-450 with page size 8 (so the budget runs
# fork off the shared cache at different chunks and steps); and --batch 0,
# a negative or a non-number are refused with exit 2, writing nothing.
#
#   batch.sh PROGRAM MODEL TRACES CONFIG WORK [EPISODES]
set -u
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
program=$(absolute "$1") model=$(absolute "$2") traces=$(absolute "$3") config=$(absolute "$4")
work=$5 episodes=${6:-4}
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 99
eval_() {
  "$program" eval --model "$model" --traces "$traces" --config "$config" --max-episodes "$episodes" \
    --page-size 8 --reproducible -q "$@"
}
eval_ --batch 1 -o one.json || fail "eval --batch 1 failed"
for batch in 4 ""; do
  eval_ ${batch:+--batch $batch} -o "batch$batch.json" || fail "eval --batch $batch failed"
  cmp one.json "batch$batch.json" || fail "--batch ${batch:-(default)} differs from --batch 1"
done
grep -q '"evicted": [1-9]' one.json || fail "no run evicted: the test would not see a fork"
for bad in 0 -3 x 99999; do
  eval_ --batch "$bad" -o bad.json 2>err.txt
  code=$?
  [ "$code" -eq 2 ] || fail "--batch $bad: exit $code, expected 2"
  grep -q -- "--batch" err.txt || fail "--batch $bad: the message does not name the option"
  [ ! -e bad.json ] || fail "--batch $bad wrote results"
done
echo "batch: --batch 4 and the default equal --batch 1 byte for byte"
