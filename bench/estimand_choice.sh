#!/bin/sh
# Which definition of a token's lifetime calibrates the best policy? One
# collection of calibration episodes, extracted and fitted under each
# candidate (estimand last-use or gap, refresh threshold tau, censoring
# guard), each resulting config judged by `eval` on other episodes (the
# shipped tiers) at 25% and 50%; prints, per candidate, the half-life of
# every region (an asterisk where fit found it not identifiable from the
# window) and the unpinned and total recall each policy buys on each tier.
#
#   bench/estimand_choice.sh [--model PATH] [--calibration-episodes N]
#                            [--run DIR] [--tiers LIST] [--episodes-450 N]
#                            [--episodes-1700 N] [--policies LIST]
#                            [--candidates LIST] [--threads N] [--work DIR]
#                            [--no-build]
#
# --model: as bench/paper_table.sh (default the real Qwen2.5-Coder-0.5B).
# --calibration-episodes: generated agent-450 episodes to calibrate on
# (default 12, seed 4501: the calibration of bench/paper_table.sh).
# --run: a collected run of those episodes to reuse instead of collecting
# (bench/paper_table.sh leaves one in its work directory, run-450/run).
# --tiers: the shipped tiers evaluated (default "450 1700"); --episodes-450
# and --episodes-1700: episodes of each (default 24 and 8). --policies:
# eval's --policies (default memdecay). --candidates: space-separated
# ESTIMAND:TAU:GUARD (default "last-use:1:16 last-use:3:16 gap:1:16
# gap:3:16").
#
# Writes WORK/choice.md and the configs, events and eval results per
# candidate and tier.
set -eu
cd "$(dirname "$0")/.."
threads=$(nproc)
model=
calibration_episodes=12
episodes_450=24
episodes_1700=8
tiers="450 1700"
policies=memdecay
run=
candidates="last-use:1:16 last-use:3:16 gap:1:16 gap:3:16"
work=build/bench-work/estimand-choice
build_first=1
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --calibration-episodes) calibration_episodes=$2; shift 2 ;;
    --episodes-450) episodes_450=$2; shift 2 ;;
    --episodes-1700) episodes_1700=$2; shift 2 ;;
    --tiers) tiers=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
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

if [ -n "$run" ]; then
  echo "collect: reusing $run"
else
  python3 data/traces/generate.py --context 450 --episodes "$calibration_episodes" --seed 4501 \
    --out "$work/calibration.jsonl" --quiet
  start=$(date +%s)
  "$bin" collect --model "$model" --traces "$work/calibration.jsonl" --out "$work/run" \
    --threads "$threads" 2>"$work/collect.log"
  echo "collect: $(( $(date +%s) - start )) s"
  run=$work/run
fi
for candidate in $candidates; do
  estimand=${candidate%%:*} rest=${candidate#*:}
  tau=${rest%%:*} guard=${rest#*:}
  name="$estimand-tau$tau-guard$guard"
  "$bin" extract "$run" -o "$work/$name.csv" --estimand "$estimand" --tau "$tau" \
    --guard "$guard" 2>"$work/$name.extract.log"
  "$bin" fit "$work/$name.csv" --calibration "$work/$name.calibration.json" \
    -o "$work/$name.json" 2>"$work/$name.fit.log"
  for tier in $tiers; do
    eval "episodes=\$episodes_$tier"
    start=$(date +%s)
    "$bin" eval --model "$model" --traces "data/traces/agent-$tier.jsonl" \
      --config "$work/$name.json" -o "$work/$name.eval-$tier.json" --policies "$policies" \
      --max-episodes "$episodes" --threads "$threads" 2>"$work/$name.eval-$tier.log"
    echo "$name: eval agent-$tier $(( $(date +%s) - start )) s"
  done
done
python3 - "$work" "$tiers" $candidates >"$work/choice.md" <<'EOF'
import json, sys
work, tiers, candidates = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
regions = ["system", "plan", "user", "tool_in", "tool_out", "retrieval", "scratchpad"]
print("Half-lives in decode steps (* not identifiable from the window):\n")
print("| candidate | " + " | ".join(regions) + " |")
print("| --- |" + " --- |" * len(regions))
for c in candidates:
    estimand, tau, guard = c.split(":")
    config = json.load(open(f"{work}/{estimand}-tau{tau}-guard{guard}.json"))
    cells = []
    for r in regions:
        region = config["regions"].get(r)
        if not region or region["half_life"] is None:
            cells.append("-")
            continue
        mark = "" if region.get("identification", {}).get("identified", True) else "*"
        cells.append(f"{region['half_life']:.1f}{mark}")
    print(f"| {estimand}, tau {tau}, guard {guard} | " + " | ".join(cells) + " |")
for tier in tiers:
    print(f"\nagent-{tier}: unpinned recalled (all recalled) at 25% / 50%\n")
    print("| candidate | policy | 25% | 50% | answers evicted, recalled |")
    print("| --- | --- | --- | --- | --- |")
    full = None
    for c in candidates:
        estimand, tau, guard = c.split(":")
        results = json.load(open(f"{work}/{estimand}-tau{tau}-guard{guard}.eval-{tier}.json"))
        full = next(s for s in results["summary"] if s["policy"] == "full")
        policies = [p for p in dict.fromkeys(s["policy"] for s in results["summary"]) if p != "full"]
        for policy in policies:
            runs = {s["budget"]: s for s in results["summary"] if s["policy"] == policy}
            cells = [f"{runs[b]['unpinned']['recalled']}/{runs[b]['unpinned']['total']} "
                     f"({runs[b]['recalled']}/{runs[b]['total']})" if b in runs else "-"
                     for b in (0.25, 0.5)]
            ev = [runs[b].get("answer_evicted", {}) for b in (0.25, 0.5) if b in runs]
            evicted = f"{sum(e.get('recalled', 0) for e in ev)}/{sum(e.get('total', 0) for e in ev)}"
            print(f"| {estimand}, tau {tau}, guard {guard} | {policy} | " + " | ".join(cells)
                  + f" | {evicted} |")
    if full:
        print(f"\nfull cache: {full['unpinned']['recalled']}/{full['unpinned']['total']} unpinned "
              f"({full['recalled']}/{full['total']})")
EOF
cat "$work/choice.md"
