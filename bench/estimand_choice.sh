#!/bin/sh
# Which definition of a token's lifetime calibrates the best policy? One
# collection of calibration episodes, extracted and fitted under each
# candidate (estimand last-use or gap, refresh threshold tau, censoring
# guard), each resulting config judged by `eval` of memdecay on other
# episodes (the shipped agent-450 tier) at 25% and 50%; prints, per
# candidate, the half-life of every region (an asterisk where fit found it
# not identifiable from the window) and the recall it buys.
#
#   bench/estimand_choice.sh [--model PATH] [--calibration-episodes N]
#                            [--episodes N] [--candidates LIST]
#                            [--threads N] [--work DIR] [--no-build]
#
# --model: as bench/paper_table.sh (default the real Qwen2.5-Coder-0.5B).
# --calibration-episodes: generated agent-450 episodes to calibrate on
# (default 12, seed 4501). --episodes: shipped agent-450 episodes evaluated
# (default all 24). --candidates: space-separated ESTIMAND:TAU:GUARD
# (default "last-use:1:16 last-use:3:16 last-use:1:0 gap:1:16 gap:3:16").
#
# Writes WORK/choice.md and the configs, events and eval results per
# candidate.
set -eu
cd "$(dirname "$0")/.."
threads=$(nproc)
model=
calibration_episodes=12
episodes=24
candidates="last-use:1:16 last-use:3:16 last-use:1:0 gap:1:16 gap:3:16"
work=build/bench-work/estimand-choice
build_first=1
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --calibration-episodes) calibration_episodes=$2; shift 2 ;;
    --episodes) episodes=$2; shift 2 ;;
    --candidates) candidates=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --no-build) build_first=0; shift ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "estimand_choice.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/common.sh
bench_build "$build_first" estimand_choice.sh calib/memdecay-calibrate
bin=${MD_BUILD_DIR:-build}/calib/memdecay-calibrate
model=$(bench_model_or_real "$model")
bench_fresh_work "$work" "$threads" "$model"

python3 data/traces/generate.py --context 450 --episodes "$calibration_episodes" --seed 4501 \
  --out "$work/calibration.jsonl" --quiet
start=$(date +%s)
"$bin" collect --model "$model" --traces "$work/calibration.jsonl" --out "$work/run" \
  --threads "$threads" 2>"$work/collect.log"
echo "collect: $(( $(date +%s) - start )) s"
for candidate in $candidates; do
  estimand=${candidate%%:*} rest=${candidate#*:}
  tau=${rest%%:*} guard=${rest#*:}
  name="$estimand-tau$tau-guard$guard"
  "$bin" extract "$work/run" -o "$work/$name.csv" --estimand "$estimand" --tau "$tau" \
    --guard "$guard" 2>"$work/$name.extract.log"
  "$bin" fit "$work/$name.csv" -o "$work/$name.json" 2>"$work/$name.fit.log"
  start=$(date +%s)
  "$bin" eval --model "$model" --traces data/traces/agent-450.jsonl --config "$work/$name.json" \
    -o "$work/$name.eval.json" --policies memdecay --max-episodes "$episodes" \
    --threads "$threads" 2>"$work/$name.eval.log"
  echo "$name: eval $(( $(date +%s) - start )) s"
done
python3 - "$work" $candidates >"$work/choice.md" <<'EOF'
import json, sys
work, candidates = sys.argv[1], sys.argv[2:]
regions = ["system", "plan", "user", "tool_in", "tool_out", "retrieval", "scratchpad"]
print("| candidate | " + " | ".join(regions) + " | memdecay 25% | memdecay 50% | answers evicted, recalled |")
print("| --- |" + " --- |" * (len(regions) + 3))
for c in candidates:
    estimand, tau, guard = c.split(":")
    name = f"{estimand}-tau{tau}-guard{guard}"
    config = json.load(open(f"{work}/{name}.json"))
    results = json.load(open(f"{work}/{name}.eval.json"))
    cells = []
    for r in regions:
        region = config["regions"].get(r)
        if not region or region["half_life"] is None:
            cells.append("-")
            continue
        mark = "" if region.get("identification", {}).get("identified", True) else "*"
        cells.append(f"{region['half_life']:.1f}{mark}")
    runs = {s["budget"]: s for s in results["summary"] if s["policy"] == "memdecay"}
    recall = [f"{runs[b]['recalled']}/{runs[b]['total']}" if b in runs else "-" for b in (0.25, 0.5)]
    ev = [runs[b].get("answer_evicted", {}) for b in (0.25, 0.5) if b in runs]
    evicted = f"{sum(e.get('recalled', 0) for e in ev)}/{sum(e.get('total', 0) for e in ev)}"
    print(f"| {estimand}, tau {tau}, guard {guard} | " + " | ".join(cells) + " | "
          + " | ".join(recall) + f" | {evicted} |")
full = next(s for s in results["summary"] if s["policy"] == "full")
print(f"\nfull cache: {full['recalled']}/{full['total']}; * = not identifiable from the window")
EOF
cat "$work/choice.md"
