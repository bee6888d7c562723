#!/bin/sh
# eval refuses bad input before any model work, with a message that names
# the file, line, episode and field, exit status 2, and no output file (an
# existing one is left as it was).
#   bad_input.sh MEMDECAY_CALIBRATE EXPECT_SH WORK_DIR
set -u
bin=$1
expect=$2
work=$3
root=${MD_SOURCE_ROOT:?}
model=$root/data/models/qwen2-tiny
config=$root/data/golden/qwen2-tiny-agent-450.json
rm -rf "$work" && mkdir -p "$work" || exit 99
out=$work/results.json
failed=0

# A small valid episode, and variants of it that are each wrong in one way.
episode() { # id probes-json [region-of-the-user-text]
  printf '{"id": "%s", "messages": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": [{"region": "%s", "text": "My booking code is KQ7Z. Please hold it."}]}], "continuation": {"region": "scratchpad", "text": "The code is noted."}%s}\n' "$1" "${3:-user}" "$2"
}
probe='{"region": "user", "question": "What is the booking code?", "answer": "KQ7Z"}'
episode ok ", \"probes\": [$probe]" > "$work/ok.jsonl"
{ episode ok ", \"probes\": [$probe]"; episode bare ""; } > "$work/no_probes.jsonl"
episode absent ", \"probes\": [{\"region\": \"retrieval\", \"question\": \"Which doc?\", \"answer\": \"KQ7Z\"}]" > "$work/absent_region.jsonl"
episode unlisted ", \"probes\": [{\"region\": \"notes\", \"question\": \"Code?\", \"answer\": \"KQ7Z\"}]" notes > "$work/unlisted_region.jsonl"
sed 's/"kappa": [0-9.e+-]*/"kappa": "high"/' "$config" > "$work/bad_config.json" || exit 99
# Values outside their domains: a base priority of 5; lambda x100 with the
# half-life unchanged.
python3 - "$config" "$work" <<'PY' || exit 99
import json, sys
config, work = sys.argv[1], sys.argv[2]
c = json.load(open(config))
c["regions"]["plan"]["base_priority"] = 5
json.dump(c, open(work + "/priority_5.json", "w"))
c = json.load(open(config))
c["regions"]["user"]["lambda"] *= 100
json.dump(c, open(work + "/lambda_x100.json", "w"))
c = json.load(open(config))
c.pop("pooled", None)
json.dump(c, open(work + "/no_pooled.json", "w"))
PY

run() { # name exit stderr-regex -- eval arguments...
  name=$1 code=$2 pattern=$3
  shift 4
  if ! "$expect" --exit "$code" --stderr "$pattern" --absent "$out" --no-temp "$work" -- \
      "$bin" eval "$@" >"$work/$name.log" 2>&1; then
    echo "FAIL: $name"; cat "$work/$name.log"; failed=1
  else
    echo "ok: $name"
  fi
}
base="--model $model --config $config -o $out --threads 1"
# shellcheck disable=SC2086
{
run no_probes 2 'no_probes\.jsonl:2: episode "bare": no probes' -- $base --traces "$work/no_probes.jsonl"
run absent_region 2 'absent_region\.jsonl:1: episode "absent": probes\[0\]\.region: region "retrieval" does not occur in the episode' -- $base --traces "$work/absent_region.jsonl"
run unlisted_region 2 'episode "unlisted": region "notes" is not in .*qwen2-tiny-agent-450\.json' -- $base --traces "$work/unlisted_region.jsonl"
run budget_zero 2 'eval: --budget: .0. is not a fraction in \(0, 1\]' -- $base --traces "$work/ok.jsonl" --budget 0
run budget_big 2 'eval: --budget: .1\.5. is not a fraction in \(0, 1\]' -- $base --traces "$work/ok.jsonl" --budget 0.25,1.5
run budget_text 2 'eval: --budget: .half. is not a fraction' -- $base --traces "$work/ok.jsonl" --budget half
run policy 2 "eval: unknown policy 'lru'" -- $base --traces "$work/ok.jsonl" --policies memdecay,lru
run policy_twice 2 "eval: policy 'h2o' is listed twice" -- $base --traces "$work/ok.jsonl" --policies h2o,h2o
# A policy the config cannot serve (memdecay-shared, and a config written
# before the fit computed its pooled fit) is refused before any model work:
# the model given does not even exist.
run policy_needs_pooled 2 'no_pooled\.json: policy memdecay-shared: pooled\.lambda: the config has no pooled fit' -- --model "$work/no-model" --config "$work/no_pooled.json" -o "$out" --traces "$work/ok.jsonl" --policies memdecay,memdecay-shared
# "all" names the opt-in policies too: memdecay-shared among them.
run policy_all 2 'policy memdecay-shared: pooled\.lambda: the config has no pooled fit' -- --model "$work/no-model" --config "$work/no_pooled.json" -o "$out" --traces "$work/ok.jsonl" --policies all
run policy_all_listed 2 "eval: --policies all names every policy: list nothing with it" -- $base --traces "$work/ok.jsonl" --policies memdecay,all
run plot 2 'eval\.jpg.*unsupported' -- $base --traces "$work/ok.jsonl" --plot "$work/eval.jpg"
run missing_config 2 'no-such\.json' -- --model "$model" --config "$work/no-such.json" -o "$out" --traces "$work/ok.jsonl"
run bad_config 2 'bad_config\.json: policy\.attention_norm\.kappa: ' -- --model "$model" --config "$work/bad_config.json" -o "$out" --traces "$work/ok.jsonl"
run priority_5 2 'priority_5\.json: regions\.plan\.base_priority: 5 is not a number in \[0, 1\]' -- --model "$model" --config "$work/priority_5.json" -o "$out" --traces "$work/ok.jsonl"
run lambda_x100 2 'lambda_x100\.json: regions\.user\.lambda: [0-9.]* contradicts its half_life [0-9.]*' -- --model "$model" --config "$work/lambda_x100.json" -o "$out" --traces "$work/ok.jsonl"
run missing_model 2 "model directory '.*no-model' does not exist" -- --model "$work/no-model" --config "$config" -o "$out" --traces "$work/ok.jsonl"
run required 2 'eval: --model, --traces, --config and -o are required' -- --model "$model" --traces "$work/ok.jsonl" -o "$out"
}
# An existing results file survives a refused run unchanged.
printf 'keep me\n' > "$out"
if ! "$expect" --exit 2 --unchanged "$out" -- "$bin" eval $base --traces "$work/no_probes.jsonl" \
    >"$work/unchanged.log" 2>&1; then
  echo "FAIL: unchanged"; cat "$work/unchanged.log"; failed=1
else
  echo "ok: unchanged"
fi
rm -f "$out"
# The valid episode runs, its results pass the results reader (check against
# itself), and its figure is a PNG of 1400 x 830 pixels (a title and two
# budget panels of 380).
if "$bin" eval $base --traces "$work/ok.jsonl" -q --reproducible --plot "$work/eval.png" &&
   "$bin" check "$out" --golden "$out" -q >"$work/self_check.log"; then
  echo "ok: valid episode"
else
  echo "FAIL: valid episode"; failed=1
fi
size=$(od -An -tx1 -j16 -N8 "$work/eval.png" 2>/dev/null | tr -d ' \n')
if [ "$(od -An -c -j1 -N3 "$work/eval.png" | tr -d ' ')" = PNG ] && [ "$size" = 000005780000033e ]; then
  echo "ok: figure"
else
  echo "FAIL: figure (IHDR size bytes $size)"; failed=1
fi
# --skip-invalid: the episode without probes is skipped with a warning and
# counted; the valid one is evaluated.
rm -f "$out"
if "$bin" eval $base --traces "$work/no_probes.jsonl" --skip-invalid --reproducible \
    2>"$work/skip.log" &&
   grep -q 'warning: .*episode "bare": no probes' "$work/skip.log" &&
   grep -q '"episodes_evaluated": 1,' "$out" && grep -q '"episodes_skipped": 1,' "$out"; then
  echo "ok: skip-invalid"
else
  echo "FAIL: skip-invalid"; cat "$work/skip.log"; failed=1
fi
exit $failed
