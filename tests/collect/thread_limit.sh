#!/bin/sh
# run.json records the threads a collection computes with: --threads 2
# under OMP_THREAD_LIMIT=1 computes with one, and records 1 (a merge
# compares the shards' thread counts), and never more than the CPUs it may
# run on.
#
#   thread_limit.sh PROGRAM MODEL TRACES WORK
set -u
program=$1 model=$2 traces=$3 work=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" || exit 99
OMP_THREAD_LIMIT=1 "$program" collect --model "$model" --traces "$traces" --max-episodes 1 \
  --threads 2 --out "$work" -q || fail "collect failed"
grep -Eq '"threads": 1,' "$work/run.json" || fail "run.json: $(grep threads "$work/run.json")"
echo "thread_limit: run.json records 1 thread"
# More threads than CPUs compute with the CPUs (they would only take turns):
# four times the CPUs records the CPUs, and pinned to one CPU, one.
cpus=$(nproc)
rm -rf "$work" || exit 99
"$program" collect --model "$model" --traces "$traces" --max-episodes 1 \
  --threads $((4 * cpus)) --out "$work" -q || fail "collect --threads $((4 * cpus)) failed"
grep -Eq "\"threads\": $cpus," "$work/run.json" ||
  fail "--threads $((4 * cpus)) on $cpus CPUs: $(grep threads "$work/run.json")"
if command -v taskset >/dev/null; then
  rm -rf "$work" || exit 99
  taskset -c 0 "$program" collect --model "$model" --traces "$traces" --max-episodes 1 \
    --threads 8 --out "$work" -q || fail "collect under taskset failed"
  grep -Eq '"threads": 1,' "$work/run.json" || fail "pinned to CPU 0: $(grep threads "$work/run.json")"
fi
echo "thread_limit: more threads than CPUs record the CPUs"
