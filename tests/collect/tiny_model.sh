#!/bin/sh
# collect end to end on the shipped small checkpoint with a real Qwen2.5
# vocabulary (data/models/qwen2-tiny) and the shipped traces: the first two
# episodes of data/traces/agent-450.jsonl with short decode windows, checked
# against the run-directory contract (check_run --contract), then once more
# with --resume after a completed run (nothing may change).
#   tiny_model.sh PROGRAM CHECK_RUN MODEL_DIR SCRATCH
set -u
program=$1
check_run=$2
model=$3
scratch=$4
root=${MD_SOURCE_ROOT:?}
rm -rf "$scratch"
mkdir -p "$scratch" || exit 99
run=$scratch/run
"$program" collect --quiet --reproducible --model "$model" \
  --traces "$root/data/traces/agent-450.jsonl" --out "$run" --max-episodes 2 --max-steps 8 \
  >"$scratch/stdout" || exit 1
[ -s "$scratch/stdout" ] && { echo "FAIL: collect wrote to standard output" >&2; exit 1; }
"$check_run" "$run" --contract || exit 1
fail=0
# Both episodes, every region of the workload in the manifest.
[ "$(grep -c '"prompt_tokens"' "$run/run.json")" = 2 ] || { echo "FAIL: expected 2 episodes" >&2; fail=1; }
for region in system plan user tool_in tool_out retrieval scratchpad; do
  grep -q "^[^,]*,[0-9]*,$region," "$run/manifest.csv" || { echo "FAIL: no $region token" >&2; fail=1; }
done
before=$(cd "$run" && find . -type f | sort | xargs sha256sum)
"$program" collect --quiet --reproducible --resume --model "$model" \
  --traces "$root/data/traces/agent-450.jsonl" --out "$run" --max-episodes 2 --max-steps 8 || exit 1
after=$(cd "$run" && find . -type f | sort | xargs sha256sum)
[ "$before" = "$after" ] || { echo "FAIL: resuming a complete run changed it" >&2; fail=1; }
exit $fail
