#!/bin/sh
# collect --batch: episodes collected together write the run directory one
# at a time writes, byte for byte: 7 episodes of agent-450, three of them
# with a greedy (generated) continuation of different lengths and the others
# teacher-forced, so the batch mixes both and shrinks as episodes finish;
# --batch 1, 3 (the last batch short) and the default; a resume after the
# first 3 episodes (--max-episodes then the rest) equals the whole; and
# --batch 0, 257 and a non-number are refused (exit 2) creating nothing.
#
#   batch.sh PROGRAM MODEL TRACES WORK
set -u
program=$1 model=$2 traces=$3 work=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 99
python3 - "$traces" "$work/mixed.jsonl" <<'PY' || exit 99
import json, sys
with open(sys.argv[1]) as src, open(sys.argv[2], "w") as out:
    for i, line in zip(range(7), src):
        ep = json.loads(line)
        if i in (0, 3):
            ep["continuation"] = {"region": "scratchpad", "generate": 5 + 4 * i}
        elif i == 5:
            ep.pop("continuation", None)
        out.write(json.dumps(ep) + "\n")
PY
collect() {
  "$program" collect --model "$model" --traces "$work/mixed.jsonl" --reproducible --max-steps 40 \
    -q "$@"
}
collect --batch 1 --out "$work/one" || fail "collect --batch 1 failed"
grep -q '"generated"' "$work/one/run.json" || fail "no generated continuation: the test would not see one"
for batch in 3 ""; do
  collect ${batch:+--batch $batch} --out "$work/b$batch" || fail "collect --batch $batch failed"
  diff -r "$work/one" "$work/b$batch" >/dev/null ||
    fail "--batch ${batch:-(default)}: the run directory differs from --batch 1"
done
collect --batch 3 --max-episodes 3 --out "$work/resumed" || fail "the first 3 episodes failed"
collect --batch 3 --resume --out "$work/resumed" || fail "the resume failed"
diff -r "$work/one" "$work/resumed" >/dev/null || fail "a batched resume differs from the whole"
for bad in 0 257 x; do
  collect --batch "$bad" --out "$work/bad" 2>"$work/err.txt"
  code=$?
  [ "$code" -eq 2 ] || fail "--batch $bad: exit $code, expected 2"
  grep -q -- "--batch" "$work/err.txt" || fail "--batch $bad: the message does not name the option"
  [ ! -e "$work/bad" ] || fail "--batch $bad created the run directory"
done
echo "batch: --batch 3 and the default write --batch 1's run directory"
