#!/bin/sh
# A run, then --resume of it with another model, other settings or other
# traces: each is refused (exit 2, a message saying what differs) and the
# run directory is left byte for byte as it was.
#   resume_mismatch.sh PROGRAM SCRATCH
set -u
program=$1
scratch=$2
root=${MD_SOURCE_ROOT:?}
traces=$root/tests/collect/data/episodes.jsonl
rm -rf "$scratch"
mkdir -p "$scratch/theta" "$scratch/other" || exit 99
for f in config.json model.safetensors; do
  ln -s "$root/tests/model/fixtures/theta1e4_f32/$f" "$scratch/theta/$f" || exit 99
  ln -s "$root/tests/model/fixtures/theta1e4_f16/$f" "$scratch/other/$f" || exit 99
done
cp "$root/tests/collect/fixtures/tokenizer.json" "$scratch/theta/" || exit 99
cp "$root/tests/collect/fixtures/tokenizer.json" "$scratch/other/" || exit 99
run=$scratch/run
"$program" collect --quiet --model "$scratch/theta" --traces "$traces" --out "$run" \
  --max-steps 4 --max-episodes 1 || exit 1
snapshot() { (cd "$run" && find . -type f | sort | xargs sha256sum); }
before=$(snapshot)
fail=0
expect_refusal() {
  regex=$1
  shift
  "$program" collect --quiet --resume --out "$run" "$@" >"$scratch/out" 2>"$scratch/err"
  code=$?
  if [ $code -ne 2 ]; then echo "FAIL: exit $code for: $*" >&2; fail=1; fi
  if ! grep -Eq -- "$regex" "$scratch/err"; then
    echo "FAIL: stderr does not match /$regex/ for: $*" >&2; cat "$scratch/err" >&2; fail=1
  fi
  if [ "$(snapshot)" != "$before" ]; then echo "FAIL: the run directory changed: $*" >&2; fail=1; fi
}
expect_refusal "run\.json: this run was collected with a model whose config\.json has sha256 '[0-9a-f]{64}', this run has '[0-9a-f]{64}'" \
  --model "$scratch/other" --traces "$traces" --max-steps 4 --max-episodes 1
expect_refusal "this run was collected with --heads 'mean', this run has 'max'" \
  --model "$scratch/theta" --traces "$traces" --max-steps 4 --heads max
expect_refusal "this run was collected with --layers 0:3, this run has 1:3" \
  --model "$scratch/theta" --traces "$traces" --max-steps 4 --layers 1:
expect_refusal "this run was collected with --max-steps 4, this run has 5" \
  --model "$scratch/theta" --traces "$traces" --max-steps 5
expect_refusal "this run was collected with a trace file with sha256" \
  --model "$scratch/theta" --traces "$root/tests/collect/data/too-long.jsonl" --max-steps 4 \
  --skip-invalid
# The same settings resume (and complete) it.
"$program" collect --quiet --resume --out "$run" --model "$scratch/theta" --traces "$traces" \
  --max-steps 4 || { echo "FAIL: resume with the same settings" >&2; fail=1; }
grep -q '"complete": true' "$run/run.json" || { echo "FAIL: not complete after resume" >&2; fail=1; }
[ "$(grep -c '"id"' "$run/run.json")" = 3 ] || { echo "FAIL: expected 3 episodes" >&2; fail=1; }
exit $fail
