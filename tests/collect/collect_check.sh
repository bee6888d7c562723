#!/bin/sh
# Runs `collect` on a checkpoint of tests/model/fixtures with the tiny
# tokenizer of tests/collect/fixtures beside it, then checks the run
# directory against the HF references with check_run.
#   collect_check.sh PROGRAM CHECK_RUN CHECKPOINT FIXTURE OUT_DIR [COLLECT ARGS...] -- [CHECK ARGS...]
set -u
program=$1
check_run=$2
checkpoint=$3
fixture=$4
out=$5
shift 5
root=${MD_SOURCE_ROOT:?}
rm -rf "$out"
mkdir -p "$out/model" || exit 99
ln -s "$root/tests/model/fixtures/$checkpoint/config.json" "$out/model/config.json" || exit 99
ln -s "$root/tests/model/fixtures/$checkpoint/model.safetensors" "$out/model/model.safetensors" || exit 99
cp "$root/tests/collect/fixtures/tokenizer.json" "$out/model/tokenizer.json" || exit 99
collect_args=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  collect_args="$collect_args $(printf '%s' "$1" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/")"
  shift
done
[ $# -gt 0 ] && shift
eval "\"\$program\" collect --model \"\$out/model\" --traces \"\$root/tests/collect/data/episodes.jsonl\" \
  --out \"\$out/run\" $collect_args" >"$out/stdout" 2>"$out/stderr"
code=$?
if [ $code -ne 0 ]; then
  echo "FAIL: collect exited with $code" >&2
  cat "$out/stderr" >&2
  exit 1
fi
if [ -s "$out/stdout" ]; then
  echo "FAIL: collect wrote to standard output" >&2
  exit 1
fi
"$check_run" "$out/run" "$root/tests/collect/fixtures/$fixture" "$@"
