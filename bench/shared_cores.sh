#!/bin/bash
# Cores shared with another busy process: what each way of waiting costs
# OpenMP's idle threads when a run has the machine to itself, and what it
# buys when two runs share the cores. For each setting, in rounds that
# alternate them:
#
#   alone   one `eval --policies full` of the first episode of agent-450
#           on the model (default: the real Qwen2.5-Coder-0.5B), then one
#           default eval of 6 episodes of the shipped demo
#   shared  the same two at once (both wall times printed)
#
# Settings: `program` (none of OMP_WAIT_POLICY, GOMP_SPINCOUNT,
# KMP_BLOCKTIME set: the program's own bound, GOMP_SPINCOUNT=1000);
# `libgomp` (GOMP_SPINCOUNT=300000, libgomp's default when nothing is set,
# which the program would otherwise replace); `passive`
# (OMP_WAIT_POLICY=passive). Two runs sharing the cores should each take
# about twice their time alone; spinning threads make it far more.
#
#   bench/shared_cores.sh [--model PATH] [--threads N] [--rounds N] [--no-build]
set -eu
cd "$(dirname "$0")/.."
threads=$(nproc)
rounds=2
model=
build_first=1
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --no-build) build_first=0; shift ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "shared_cores.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/common.sh
bench_build "$build_first" shared_cores.sh calib/memdecay-calibrate
bin=${MD_BUILD_DIR:-build}/calib/memdecay-calibrate
model=$(bench_model_or_real "$model")
work=${MD_BUILD_DIR:-build}/bench-work/shared-cores
bench_fresh_work "$work" "$threads" "$model"

# real TAG / demo TAG: one run, its wall time in WORK/TAG.time.
real() {
  /usr/bin/time -f %e -o "$work/$1.time" "${setting[@]}" "$bin" eval --model "$model" \
    --traces data/traces/agent-450.jsonl --config data/golden/qwen2-tiny-agent-450.json \
    --max-episodes 1 --policies full --threads "$threads" -q -o "$work/$1.json" 2>"$work/$1.log"
}
demo() {
  /usr/bin/time -f %e -o "$work/$1.time" "${setting[@]}" "$bin" eval --model data/models/qwen2-tiny \
    --traces data/traces/agent-450.jsonl --config data/golden/qwen2-tiny-agent-450.json \
    --max-episodes 6 --threads "$threads" -q -o "$work/$1.json" 2>"$work/$1.log"
}
for round in $(seq 1 "$rounds"); do
  for name in program libgomp passive; do
    case $name in
      program) setting=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u KMP_BLOCKTIME -u MD_OMP_WAIT_FROM) ;;
      libgomp) setting=(env -u OMP_WAIT_POLICY -u KMP_BLOCKTIME GOMP_SPINCOUNT=300000) ;;
      passive) setting=(env -u GOMP_SPINCOUNT -u KMP_BLOCKTIME OMP_WAIT_POLICY=passive) ;;
    esac
    real alone; real a & real b & wait
    demo dalone; demo da & demo db & wait
    echo "round $round, $name: model alone $(cat "$work/alone.time") s, shared" \
         "$(cat "$work/a.time") and $(cat "$work/b.time") s; demo alone $(cat "$work/dalone.time") s," \
         "shared $(cat "$work/da.time") and $(cat "$work/db.time") s" | tee -a "$work/results.txt"
  done
done
