#!/bin/sh
# memdecay-calibrate export from the command line: every format on the
# shipped agent-450 with the shipped golden config and checkpoint, checked
# against its stack's rules (validate.py) and byte for byte against the
# golden files of data/golden/export; OpenAI requests (developer role, text
# parts, tool calls, a retrieval tool, an explicit region, a request
# without id); the summary; and the refusals, each with exit status 2, a
# message naming the file and line (or the field) and nothing written:
# requests without messages, an unknown role, a region the config lacks,
# malformed JSON, a part that is not text, a duplicate id, block sizes 0,
# negative, huge and (trtllm) not a power of two, --step-ms 0, NaN and
# missing, a config without a field, an output that is an input.
#
#   cli.sh PROGRAM EXPECT_SH WORK
set -u
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
program=$(absolute "$1") expect=$(absolute "$2") work=$3
root=${MD_SOURCE_ROOT:?}
here=$root/tests/export
traces=$root/data/traces/agent-450.jsonl
model=$root/data/models/qwen2-tiny
config=$root/data/golden/qwen2-tiny-agent-450.json
golden=$root/data/golden/export
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 99
failed=0
fail() { echo "FAIL: $*"; failed=1; }

run() { # name -- expect.sh arguments...
  name=$1
  shift 2
  if "$expect" "$@" >"$name.log" 2>&1; then
    echo "ok: $name"
  else
    fail "$name"
    cat "$name.log"
  fi
}

common="--config $config --model $model"
for format in trtllm vllm sglang dynamo; do
  run "golden_$format" -- --no-temp . -- "$program" export "$traces" $common --format "$format" \
    --step-ms 25 --runs -q -o "$format.jsonl"
  python3 "$here/validate.py" "$format" "$format.jsonl" "$config" --requests 24 ||
    fail "$format: the stack's rules"
  python3 "$here/validate.py" "$format" "$golden/agent-450.$format.jsonl" "$config" --requests 24 ||
    fail "$format: the golden file against the stack's rules"
  cmp -s "$format.jsonl" "$golden/agent-450.$format.jsonl" ||
    fail "$format: differs from data/golden/export/agent-450.$format.jsonl"
done

# The clamp is warned about, naming request, region, tokens and priorities.
run vllm_warns -- --stderr 'warning: request "ep450-000-travel": region [a-z_]+, tokens \[[0-9]+, [0-9]+\): priority [0-9]+ lowered to [0-9]+ \(vLLM requires priorities non-increasing with position\)' \
  -- "$program" export "$traces" $common --format vllm --step-ms 25 -q -o warned.jsonl

# The summary: per region its setting, counts and identification; the
# approximations as text.
run summary -- --stdout '^export: 24 requests \(traces\), [0-9]+ prompt tokens, format trtllm, block size 32$' \
  -- "$program" export "$traces" $common --format trtllm --step-ms 25 -o s.jsonl --summary summary.json
python3 - summary.json "$config" <<'PY' || fail "summary"
import json, math, sys
s = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
assert s["format"] == "trtllm" and s["block_size"] == 32 and s["requests"] == 24
assert list(s["regions"]) == list(c["regions"])
for name, r in s["regions"].items():
    cr = c["regions"][name]
    want = 100 if cr["pinned"] else 1 + math.floor(98 * cr["base_priority"] + 0.5)
    assert r["priority"] == want, name
    if cr["pinned"] or cr["half_life"] is None:
        assert r["duration_ms"] is None, name
    else:
        assert r["duration_ms"] == max(1, math.floor(cr["half_life"] * 25 + 0.5)), name
    assert r["identification"] == cr["identification"], name
    assert r["labelled_tokens"] > 0 and r["ranges"] > 0
assert sum(r["tokens"] for r in s["regions"].values()) == s["prompt_tokens"]
assert any("not a pin" in a for a in s["approximations"])
PY

# OpenAI requests, detected by their "model" member.
run openai -- --stdout '^export: 2 requests \(openai\)' -- "$program" export "$here/data/openai.jsonl" \
  $common --format vllm --step-ms 25 --runs --retrieval-tool search_docs -o openai.jsonl
python3 "$here/validate.py" vllm openai.jsonl "$config" --requests 2 || fail "openai: the stack's rules"
python3 - openai.jsonl <<'PY' || fail "openai regions"
import json, sys
a, b = [json.loads(l) for l in open(sys.argv[1])]
assert a["id"] == "chat-1" and b["id"] == "request-3", (a["id"], b["id"])
regions = [r["region"] for r in a["runs"]]
# developer -> system; text parts -> user; calls -> tool_in; search_docs's
# result -> retrieval, book's -> tool_out; the explicit plan; decode scratchpad
for want in ("system", "user", "tool_in", "retrieval", "tool_out", "plan", "scratchpad"):
    assert want in regions, (want, regions)
assert regions.index("retrieval") < regions.index("tool_out"), regions
assert a["decode_region"] == "scratchpad"
PY
# Without --retrieval-tool the tool results are tool_out.
"$program" export "$here/data/openai.jsonl" $common --format sglang --runs -q -o plain.jsonl || fail "openai plain"
grep -q '"retrieval"' plain.jsonl && fail "a retrieval run without --retrieval-tool"

refuse() { # name stderr-regex -- export arguments...
  name=$1 re=$2
  shift 3
  run "$name" -- --exit 2 --stderr "$re" --absent out.jsonl --absent sum.json --no-temp . \
    -- "$program" export "$@"
}
refuse no_messages 'nomessages.jsonl:1: request "no-messages": messages: missing' -- \
  "$here/data/nomessages.jsonl" $common --format sglang -o out.jsonl --summary sum.json
refuse unknown_role 'badrole.jsonl:2: request "bot": messages\[0\].role: unknown role "bot"' -- \
  "$here/data/badrole.jsonl" $common --format sglang -o out.jsonl --summary sum.json
refuse bad_json 'badjson.jsonl:1:[0-9]+: invalid JSON' -- \
  "$here/data/badjson.jsonl" $common --format sglang --input-format openai -o out.jsonl
refuse image_part 'imagepart.jsonl:1: request "request-1": messages\[0\].content\[0\].type: only "text" parts' -- \
  "$here/data/imagepart.jsonl" $common --format dynamo -o out.jsonl
refuse duplicate_id 'duplicate.jsonl:2: episode "same": id: the same as line 1' -- \
  "$here/data/duplicate.jsonl" $common --format dynamo -o out.jsonl
refuse unknown_region 'unknownregion.jsonl:1: episode "notes-1": region "notes" \(prompt token [0-9]+\) is not in the config' -- \
  "$here/data/unknownregion.jsonl" $common --format vllm --step-ms 25 -o out.jsonl
refuse block_zero '--block-size must be a whole number from 1 to 65536' -- \
  "$traces" $common --format vllm --step-ms 25 --block-size 0 -o out.jsonl
refuse block_negative '--block-size must be a whole number from 1 to 65536' -- \
  "$traces" $common --format vllm --step-ms 25 --block-size -16 -o out.jsonl
refuse block_huge '--block-size must be a whole number from 1 to 65536' -- \
  "$traces" $common --format vllm --step-ms 25 --block-size 1000000 -o out.jsonl
refuse block_not_pow2 'the block size must be a power of two of at least 2' -- \
  "$traces" $common --format trtllm --step-ms 25 --block-size 24 -o out.jsonl
refuse block_sglang 'format sglang: one priority per request, no blocks' -- \
  "$traces" $common --format sglang --block-size 16 -o out.jsonl
refuse step_zero '--step-ms must be a number > 0' -- \
  "$traces" $common --format vllm --step-ms 0 -o out.jsonl
refuse step_nan '--step-ms must be a number > 0' -- \
  "$traces" $common --format vllm --step-ms nan -o out.jsonl
refuse step_missing '--format trtllm emits durations: --step-ms X' -- \
  "$traces" $common --format trtllm -o out.jsonl
refuse format_unknown "--format: unknown format 'tensorrt' \(formats: trtllm, vllm, sglang, dynamo\)" -- \
  "$traces" $common --format tensorrt -o out.jsonl
python3 - "$config" nohalflife.json <<'PY' || exit 99
import json, sys
c = json.load(open(sys.argv[1]))
del c["regions"]["plan"]["half_life"]
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
refuse config_field 'nohalflife.json: regions.plan.half_life: missing' -- \
  "$traces" --config nohalflife.json --model "$model" --format trtllm --step-ms 25 -o out.jsonl
cp "$traces" input.jsonl || exit 99
run output_is_input -- --exit 2 --stderr 'input.jsonl' --unchanged input.jsonl -- "$program" export \
  input.jsonl $common --format vllm --step-ms 25 -o input.jsonl
run summary_is_config -- --exit 2 --absent out.jsonl --stderr 'summary' -- "$program" export \
  "$traces" $common --format vllm --step-ms 25 -o out.jsonl --summary "$config"
exit $failed
