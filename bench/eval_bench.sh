#!/bin/sh
# Measures `memdecay-calibrate eval` end to end on the shipped checkpoint and
# both shipped tiers (data/traces/agent-450.jsonl and agent-1700.jsonl) with
# the shipped golden config, default policies and budgets, and prints per
# tier the wall time, peak RSS and the prefill and decode rates it reached,
# next to `collect` on the same model and traces (the forward pass without
# eviction, probes or policy) so that the cost of the runtime shows:
#   whole default eval of both tiers      target: within 10 minutes
#   eval prefill rate / decode rate       the chunks are matrix-matrix: > 1
#   eval decode rate / collect's           the policy's and eviction's cost
#
#   bench/eval_bench.sh [--threads N] [--model DIR] [--work DIR] [--no-build]
#
# --no-build: use the build in $MD_BUILD_DIR (default build) as it is.
#
# Runs the two programs one after the other, alternating tiers, with
# OMP_WAIT_POLICY as set (see inference_bench.sh: set it to passive on a
# shared machine). Prints the CPU model and flags with the numbers.
set -eu
cd "$(dirname "$0")/.."
threads=$(nproc)
model=data/models/qwen2-tiny
config=data/golden/qwen2-tiny-agent-450.json
work=build/bench-work/eval
build_first=1
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --no-build) build_first=0; shift ;;
    *) echo "eval_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/common.sh
bench_build "$build_first" eval_bench.sh calib/memdecay-calibrate
bin=${MD_BUILD_DIR:-build}/calib/memdecay-calibrate
rm -rf "$work" && mkdir -p "$work"
bench_cpu_line
echo "threads: $threads; OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; $(date -u +%Y-%m-%d)"

# rate LOG WHAT: the "prefill|decode N tok/s" figure of a progress log's done line.
rate() { sed -n "s/.*done:.*$2 \([0-9.]*\) tok\/s.*/\1/p" "$1" | tail -1; }

total=0
for tier in 450 1700; do
  traces=data/traces/agent-$tier.jsonl
  /usr/bin/time -f '%e %M' -o "$work/collect-$tier.time" \
    "$bin" collect --model "$model" --traces "$traces" --out "$work/run-$tier" \
    --threads "$threads" --reproducible 2>"$work/collect-$tier.log"
  /usr/bin/time -f '%e %M' -o "$work/eval-$tier.time" \
    "$bin" eval --model "$model" --traces "$traces" --config "$config" \
    -o "$work/eval-$tier.json" --threads "$threads" --reproducible 2>"$work/eval-$tier.log"
  read -r seconds rss <"$work/eval-$tier.time"
  read -r cseconds crss <"$work/collect-$tier.time"
  ep=$(rate "$work/eval-$tier.log" prefill) ed=$(rate "$work/eval-$tier.log" decode)
  cd_=$(rate "$work/collect-$tier.log" decode)
  total=$(echo "$total + $seconds" | bc)
  echo "agent-$tier: eval $seconds s, peak RSS $((rss / 1024)) MiB; prefill $ep tok/s, decode $ed tok/s" \
       "(prefill/decode $(echo "scale=2; $ep / $ed" | bc)x)"
  echo "  collect $cseconds s, peak RSS $((crss / 1024)) MiB, decode $cd_ tok/s;" \
       "eval decode / collect decode $(echo "scale=2; $ed / $cd_" | bc)"
  grep -A12 'budget of 25%' "$work/eval-$tier.log" | sed 's/^/  /'
done
verdict=met
[ "$(echo "$total > 600" | bc)" -eq 1 ] && verdict=MISSED
echo "both tiers: $total s; target <= 600 s: $verdict"
