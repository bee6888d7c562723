#!/bin/sh
# A sharded calibration merges into exactly the unsharded one: on the
# shipped checkpoint and traces, `run` on one machine, then for N = 1, 2, 3
# and 4 the N shards (`run --shard K/N`, given in a scrambled order) and
# `run --merge-shards`, with the same work directory path each time (the
# config records its events file's path). memdecay.json and events.csv must
# be byte-identical, and the calibration sidecar too but for the run
# directories it names. Then what a merge refuses or reports: shards of
# other traces than --traces names, a missing
# shard (and --allow-partial with its warning), a repeated one through
# `extract`, a resume as another shard, a shard of another plan; and shards
# edited not to be their plan's (swapped indices, an emptied shard, an
# episode moved into another shard's block, attention rows summing to 0 or
# 2: tamper_shards.py).
#
#   shard_merge.sh PROGRAM MODEL TRACES WORK [EPISODES]
#
# With EPISODES (more than 3), the traces are the first EPISODES episodes of
# TRACES (one a line), written to WORK/traces.jsonl.
set -u
program=$1 model=$2 traces=$3 work=$4 first=${5:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$work" && mkdir -p "$work" || exit 99
if [ -n "$first" ]; then
  head -n "$first" "$traces" >"$work/traces.jsonl" && traces=$work/traces.jsonl || exit 99
fi
total=$(grep -c . "$traces") || exit 99
# Another plan of the same traces: a sixth fewer episodes (--max-episodes).
fewer=$((total - total / 6))
w=$work/calibration   # the work directory, the same path for every run

# The sidecar without the lines that name run directories.
sidecar() {
  sed '/"paths": \[/,/\]/d' "$1" | grep -v "\"path\": \"$w/\(run\|shards/[^\"]*\)\""
}

"$program" run --model "$model" --traces "$traces" --workdir "$w" -o "$work/single.json" \
  --reproducible -q || fail "the unsharded run failed"
cp "$w/events.csv" "$work/single.csv" && sidecar "$w/events.calibration.json" >"$work/single.cal" ||
  exit 99

for n in 1 2 3 4; do
  rm -rf "$w"
  # Shards in a scrambled order: the last first, then the others.
  k=$((n - 1))
  order="$k $(seq 0 $((n - 2)) 2>/dev/null)"
  for k in $order; do
    "$program" run --model "$model" --traces "$traces" --workdir "$w" --shard "$k/$n" \
      --reproducible -q || fail "shard $k/$n failed"
  done
  "$program" run --workdir "$w" -o "$work/merged-$n.json" --merge-shards --reproducible -q ||
    fail "the merge of $n shards failed"
  cmp "$work/single.json" "$work/merged-$n.json" || fail "$n shards: memdecay.json differs"
  cmp "$work/single.csv" "$w/events.csv" || fail "$n shards: events.csv differs"
  sidecar "$w/events.calibration.json" >"$work/merged-$n.cal"
  cmp "$work/single.cal" "$work/merged-$n.cal" || fail "$n shards: the sidecar differs"
  episodes=$(awk '/^  "shard": \{/ { inside = 1 }
    inside && /^    "episodes": [0-9]/ { gsub(/[^0-9]/, ""); s += $0; inside = 0 }
    END { print s }' "$w"/shards/*/run.json)
  [ "$episodes" = "$total" ] || fail "$n shards hold $episodes episodes, not $total"
  echo "$n shards: memdecay.json, events.csv and the sidecar identical to the unsharded run's"
done
# extract puts shards in their order whatever the order given.
"$program" extract "$w/shards/3-of-4" "$w/shards/1-of-4" "$w/shards/0-of-4" "$w/shards/2-of-4" \
  -o "$work/backwards.csv" --reproducible -q || fail "extract of the shards given backwards failed"
cmp "$work/single.csv" "$work/backwards.csv" || fail "shards given out of order: events.csv differs"

# --model and --traces on the merge: each shard must be of them.
"$program" run --workdir "$w" -o "$work/named.json" --merge-shards --model "$model" \
  --traces "$traces" --reproducible -q || fail "the merge with --model and --traces failed"
cmp "$work/single.json" "$work/named.json" || fail "the merge with --model and --traces differs"
other_traces=$work/other.jsonl
head -n 3 "$traces" >"$other_traces" || exit 99
"$program" run --workdir "$w" -o "$work/wrong.json" --merge-shards --traces "$other_traces" -q \
  2>"$work/wrong.err"
[ $? -eq 2 ] && grep -q "was collected over a trace file with sha256 .*, not the given traces'" "$work/wrong.err" ||
  fail "shards of other traces were not refused: $(cat "$work/wrong.err")"
[ ! -e "$work/wrong.json" ] || fail "a refused merge wrote its output"

# Shards that are not the plan they state, each edited copy readable on its
# own (tamper_shards.py): refused with exit 2, naming the run.json (or the
# attn file and row), nothing written.
tamper=$(dirname "$0")/tamper_shards.py
refused() { # LABEL REGEX DIR...
  label=$1 regex=$2
  shift 2
  rm -f "$work/tampered.csv"
  "$program" extract "$@" -o "$work/tampered.csv" -q 2>"$work/tampered.err"
  rc=$?
  [ $rc -eq 2 ] || fail "$label: extract exited $rc, not 2: $(cat "$work/tampered.err")"
  grep -Eq "$regex" "$work/tampered.err" || fail "$label: not refused as such: $(cat "$work/tampered.err")"
  [ ! -e "$work/tampered.csv" ] || fail "$label: a refused merge wrote its output"
}
copy_shards() { rm -rf "$work/t" && mkdir -p "$work/t" && cp -r "$w/shards/"* "$work/t/" || exit 99; }
all_shards() { echo "$work/t/0-of-4" "$work/t/1-of-4" "$work/t/2-of-4" "$work/t/3-of-4"; }
copy_shards
python3 "$tamper" swap "$work/t/0-of-4" "$work/t/1-of-4" || exit 99
refused "swapped indices" "t/0-of-4/run.json: shard 1/4 lists episode .* after episode" $(all_shards)
copy_shards
python3 "$tamper" empty "$work/t/3-of-4" || exit 99
refused "the last shard emptied" "a shard lacks episodes of its block .*t/3-of-4/run.json \\(shard 3/4: 0 episodes\\)" $(all_shards)
copy_shards
python3 "$tamper" empty "$work/t/1-of-4" || exit 99
refused "a shard emptied" "t/2-of-4/run.json: episode .* belongs to shard 1/4 by the plan's split" $(all_shards)
copy_shards
python3 "$tamper" move "$work/t/2-of-4" "$work/t/1-of-4" || exit 99
refused "an episode of another block" "t/1-of-4/run.json: episode .* belongs to shard 2/4 by the plan's split" $(all_shards)
copy_shards
python3 "$tamper" attn "$work/t/2-of-4" 0 || exit 99
refused "an all-zero attention matrix" "t/2-of-4/attn/.*\\.npy: row 0 \\(decode step 0\\) sums to 0:" $(all_shards)
copy_shards
python3 "$tamper" attn "$work/t/0-of-4" 2 || exit 99
# (twice a row that sums to 1 in float32 prints as 2, 2.0000001 or 1.99999997)
refused "rows that sum to 2" "t/0-of-4/attn/.*\\.npy: row 0 \\(decode step 0\\) sums to (2|2\\.0000[0-9]*|1\\.9999[0-9]*):" $(all_shards)
rm -rf "$work/t"
echo "refusals: swapped indices, an emptied shard, an episode of another block, attention rows of 0 and 2"

# A missing shard: refused, then --allow-partial with a warning in the config.
rm -rf "$w/shards/2-of-4"
"$program" run --workdir "$w" -o "$work/partial.json" --merge-shards -q 2>"$work/partial.err"
[ $? -eq 2 ] || fail "a missing shard was not refused with exit 2"
grep -q "1 of the 4 shards of its collection .* is missing (shard 2/4)" "$work/partial.err" ||
  fail "the missing shard is not named: $(cat "$work/partial.err")"
[ ! -e "$work/partial.json" ] || fail "a refused merge wrote its output"
"$program" run --workdir "$w" -o "$work/partial.json" --merge-shards --allow-partial -q ||
  fail "--allow-partial did not merge"
grep -q '"run: 1 shard of the collection is missing (shard 2/4)' "$work/partial.json" ||
  fail "the partial config does not say what is missing"

# The same shard twice, through extract.
"$program" extract "$w/shards/0-of-4" "$w/shards/1-of-4" "$w/shards/0-of-4" -o "$work/twice.csv" \
  --allow-partial -q 2>"$work/twice.err"
[ $? -eq 2 ] && grep -q "are both shard 0/4 of the same collection" "$work/twice.err" ||
  fail "a repeated shard was not refused: $(cat "$work/twice.err")"

# A resume must be the same shard of the same plan: another --max-episodes
# is another plan.
"$program" run --model "$model" --traces "$traces" --workdir "$w" --shard 1/4 --resume \
  --max-episodes "$fewer" -q 2>"$work/resume.err"
[ $? -eq 2 ] && grep -q "this run was collected as shard 1/4 of the plan .*, this run is shard 1/4 of the plan" "$work/resume.err" ||
  fail "a resume with another plan was not refused: $(cat "$work/resume.err")"
# A shard of another plan among them: its own collection, which lacks shards.
"$program" run --model "$model" --traces "$traces" --workdir "$work/other" --shard 0/4 \
  --max-episodes "$fewer" -q || fail "the other plan's shard failed"
"$program" extract "$w/shards/0-of-4" "$w/shards/1-of-4" "$w/shards/3-of-4" "$work/other/shards/0-of-4" \
  -o "$work/mixed.csv" --allow-partial -q 2>"$work/mixed.err"
[ $? -eq 2 ] && grep -q 'episode ".*" is in .* and in .*other/shards/0-of-4' "$work/mixed.err" ||
  fail "overlapping plans were not refused: $(cat "$work/mixed.err")"
echo "refusals: a missing shard, a repeated shard, a resume of another plan, overlapping plans"
