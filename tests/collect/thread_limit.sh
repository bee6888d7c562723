#!/bin/sh
# run.json records the threads a collection computes with: --threads 2
# under OMP_THREAD_LIMIT=1 computes with one, and records 1 (a merge
# compares the shards' thread counts).
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
