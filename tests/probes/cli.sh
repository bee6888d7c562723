#!/bin/sh
# memdecay-calibrate probes from the command line: the shipped agent-450
# with its probes stripped is planted (the summary on standard output, the
# input untouched, the same seed the same bytes, another seed others), the
# planted file runs through eval on the shipped checkpoint (2 episodes, one
# policy, one budget) and every probe is asked and found in its region; and
# the refusals: the output is the input (also through a symbolic link), a
# missing input, an input with probes without --replace, bad JSON, bad
# --regions, a missing -o, each with exit status 2 and nothing written.
#
#   cli.sh PROGRAM EXPECT_SH WORK
set -u
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
program=$(absolute "$1") expect=$(absolute "$2") work=$3
root=${MD_SOURCE_ROOT:?}
traces=$root/data/traces/agent-450.jsonl
model=$root/data/models/qwen2-tiny
config=$root/data/golden/qwen2-tiny-agent-450.json
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 99
failed=0
fail() { echo "FAIL: $*"; failed=1; }

python3 - "$traces" stripped.jsonl <<'PY' || exit 99
import json, sys
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as out:
    for line in src:
        episode = json.loads(line)
        episode.pop("probes", None)
        out.write(json.dumps(episode, ensure_ascii=False) + "\n")
PY
cp stripped.jsonl stripped.before || exit 99

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

run plant -- --stdout '^probes: 24 episodes, 168 probes planted \(seed 0\)$' \
  --stdout '^tool_in +24 +24 +0$' --no-temp . -- "$program" probes stripped.jsonl -o planted.jsonl
cmp -s stripped.jsonl stripped.before || fail "the input changed"
"$program" probes stripped.jsonl -o again.jsonl -q || fail "second run"
cmp -s planted.jsonl again.jsonl || fail "the same seed gave other bytes"
"$program" probes stripped.jsonl -o other.jsonl --seed 1 -q || fail "--seed 1"
cmp -s planted.jsonl other.jsonl && fail "--seed 1 gave the same bytes"

# Every planted answer once in its episode's lines and in the probes.
python3 - stripped.jsonl planted.jsonl <<'PY' || fail "planted file"
import json, sys
before = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
after = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
assert len(before) == len(after) == 24
for b, a in zip(before, after):
    probes = a.pop("probes")
    assert [p["region"] for p in probes] == ["system", "plan", "user", "tool_in", "tool_out",
                                             "retrieval", "scratchpad"], probes
    assert list(a) == list(b), (list(a), list(b))
    text = json.dumps(a, ensure_ascii=False)
    for p in probes:
        assert text.count(p["answer"]) == 1, (a["id"], p)
        assert json.dumps(b, ensure_ascii=False).lower().count(p["answer"].lower()) == 0
    assert len({p["question"] for p in probes}) == 7
PY

# eval on the planted traces: every probe asked, its answer in its region.
run eval -- --stderr 'eval: 2 episodes in' -- "$program" eval --model "$model" \
  --traces planted.jsonl --config "$config" -o eval.json --max-episodes 2 --policies memdecay \
  --budget 0.5 --threads 1 --reproducible
python3 - eval.json planted.jsonl <<'PY' || fail "eval results"
import json, sys
results = json.load(open(sys.argv[1]))
planted = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")][:2]
assert results["episodes_evaluated"] == 2, results["episodes_evaluated"]
for episode, trace in zip(results["episodes"], planted):
    assert episode["id"] == trace["id"]
    assert [p["answer"] for p in episode["probes"]] == [p["answer"] for p in trace["probes"]]
    for run in episode["runs"]:
        assert len(run["probes"]) == 7
        for outcome in run["probes"]:
            assert outcome["answer_in_region"], (episode["id"], outcome)
            assert outcome["answer_tokens"] > 0, (episode["id"], outcome)
PY

cp "$traces" shipped.jsonl || exit 99
ln -s stripped.jsonl link.jsonl || exit 99
printf '{"id": "a", "messages": [{"role": "user", "content": "Hi."}]}\n{"id": "b", "messages": [}\n' >bad.jsonl
run same_file -- --exit 2 --stderr 'stripped\.jsonl is the same file as the input' \
  --unchanged stripped.jsonl -- "$program" probes stripped.jsonl -o stripped.jsonl
run same_file_link -- --exit 2 --stderr 'link\.jsonl is the same file as the input' \
  --unchanged stripped.jsonl -- "$program" probes stripped.jsonl -o link.jsonl
run missing -- --exit 2 --stderr 'cannot open missing\.jsonl' --absent out.jsonl -- \
  "$program" probes missing.jsonl -o out.jsonl
run has_probes -- --exit 2 \
  --stderr 'shipped\.jsonl:1: episode "ep450-000-travel": has 7 probes already \(--replace' \
  --absent out.jsonl --no-temp . -- "$program" probes shipped.jsonl -o out.jsonl
run replace -- --stdout "dropped the input's 168 probes" --unchanged shipped.jsonl -- \
  "$program" probes shipped.jsonl -o replaced.jsonl --replace
run bad_json -- --exit 2 --stderr 'bad\.jsonl:2:[0-9]+: invalid JSON' --absent out.jsonl \
  --no-temp . -- "$program" probes bad.jsonl -o out.jsonl
run bad_region -- --exit 2 --stderr "probes: --regions: invalid region name 'Tool'" \
  --absent out.jsonl -- "$program" probes stripped.jsonl -o out.jsonl --regions user,Tool
run region_twice -- --exit 2 --stderr "probes: --regions: region 'user' is listed twice" \
  --absent out.jsonl -- "$program" probes stripped.jsonl -o out.jsonl --regions user,user
run no_output -- --exit 2 --stderr 'probes: -o OUT.jsonl is required' -- \
  "$program" probes stripped.jsonl
run regions -- --stdout '^probes: 24 episodes, 24 probes planted' --stdout '^notes +0 +0 +24$' \
  -- "$program" probes stripped.jsonl -o some.jsonl --regions notes,user

[ "$failed" = 0 ] && echo "probes cli: all passed"
exit "$failed"
