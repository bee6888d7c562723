#!/bin/sh
# The paper's experiment on a real model: calibrate MemDecay (`run`) on
# calibration episodes of each tier, then `eval` every policy at 25% and 50%
# of each episode on the shipped tiers (other episodes than the calibration's:
# the config is never fitted on the episodes it is judged on), with figures,
# tables and times.
#
#   bench/paper_table.sh [--model PATH] [--episodes-450 N] [--episodes-1700 N]
#                        [--calibration-episodes N] [--policies LIST]
#                        [--threads N] [--work DIR] [--no-build]
#
# --model: a Qwen2/Qwen2.5 checkpoint directory or GGUF file (default: the
# real Qwen2.5-Coder-0.5B-Instruct Q4_K_M, fetched by
# data/models/fetch_qwen25.py into its cache when missing).
# --episodes-450 / --episodes-1700: shipped episodes evaluated per tier
# (default all 24 and 8). --calibration-episodes: episodes generated per tier
# for the calibration (default 12; seeds 4501 and 17001, disjoint from the
# shipped tiers' 450 and 1700 and from the demo model's training seeds 7
# and 8). --policies: eval's --policies (default: eval's default set).
#
# Writes WORK/tables.md (bench/eval_tables.py over both results), the configs,
# the figures (calibration: cfg-TIER.png; eval: eval-TIER.png) and the logs;
# prints the CPU model and flags and every step's wall time.
set -eu
cd "$(dirname "$0")/.."
threads=$(nproc)
model=
episodes_450=24
episodes_1700=8
calibration_episodes=12
policies=
work=build/bench-work/paper-table
build_first=1
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --episodes-450) episodes_450=$2; shift 2 ;;
    --episodes-1700) episodes_1700=$2; shift 2 ;;
    --calibration-episodes) calibration_episodes=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --no-build) build_first=0; shift ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "paper_table.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/common.sh
bench_build "$build_first" paper_table.sh calib/memdecay-calibrate
bin=${MD_BUILD_DIR:-build}/calib/memdecay-calibrate
model=$(bench_model_or_real "$model")
bench_fresh_work "$work" "$threads" "$model"

# step NAME COMMAND...: runs it with its wall time and peak RSS in WORK/NAME.time.
step() {
  _name=$1
  shift
  /usr/bin/time -f '%e %M' -o "$work/$_name.time" "$@" 2>"$work/$_name.log" || {
    echo "paper_table.sh: $_name failed; see $work/$_name.log" >&2
    tail -5 "$work/$_name.log" >&2
    exit 1
  }
  read -r _seconds _rss <"$work/$_name.time"
  echo "$_name: $_seconds s, peak RSS $((_rss / 1024)) MiB" | tee -a "$work/times.txt"
}

for tier in 450 1700; do
  eval "episodes=\$episodes_$tier"
  python3 data/traces/generate.py --context "$tier" --episodes "$calibration_episodes" \
    --seed "${tier}1" --out "$work/calibration-$tier.jsonl" --quiet
  step "run-$tier" "$bin" run --model "$model" --traces "$work/calibration-$tier.jsonl" \
    -o "$work/cfg-$tier.json" --workdir "$work/run-$tier" --plot "$work/cfg-$tier.png" \
    --threads "$threads"
  grep -A10 '^region' "$work/run-$tier.log" | sed "s/^/  calibration $tier: /" || true
  step "eval-$tier" "$bin" eval --model "$model" --traces "data/traces/agent-$tier.jsonl" \
    --config "$work/cfg-$tier.json" -o "$work/eval-$tier.json" --plot "$work/eval-$tier.png" \
    --max-episodes "$episodes" --threads "$threads" ${policies:+--policies "$policies"}
done
python3 bench/eval_tables.py "$work/eval-450.json" "$work/eval-1700.json" >"$work/tables.md"
cat "$work/tables.md"
echo "wrote $work/tables.md"
