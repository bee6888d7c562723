#!/bin/sh
# eval of the shipped checkpoint with the default products against
# the golden results (made with float32 ones): on a CPU where BF16 products
# are the default (AMD Zen 4 and 5, `devices` says so), every cell (region,
# policy, budget) of all 24 episodes recalls within one probe of the golden
# one; elsewhere the default is float32, and the same holds on the first 6
# episodes against their golden results (the full eval regression already
# runs the 24 in float32; one probe allows for another CPU's float32
# arithmetic).
#
#   bf16_default.sh PROGRAM MODEL TRACES CONFIG GOLDEN_EVAL GOLDEN_FIRST6 WORK
set -u
program=$1 model=$2 traces=$3 config=$4 golden=$5 first6=$6 work=$7
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$work" && mkdir -p "$work" || exit 99
if "$program" devices --device cpu | grep -q '^products of a BF16 checkpoint (prompt and decode): bf16'; then
  allowed=1 products=bf16 episodes=24
else
  allowed=1 products=fp32 episodes=6 golden=$first6
fi
"$program" eval --model "$model" --traces "$traces" --config "$config" -o "$work/default.json" \
  --max-episodes "$episodes" --reproducible -q || fail "eval failed"
python3 - "$golden" "$work/default.json" "$allowed" "$products" <<'PY' || fail "recall moved"
import json, sys
golden, new = (json.load(open(p)) for p in sys.argv[1:3])
allowed, products = int(sys.argv[3]), sys.argv[4]

def cells(results):
    out = {}
    for run in results["summary"]:
        for region, cell in run["regions"].items():
            out[(run["policy"], run["budget"], region)] = cell["recalled"]
    return out

want, got = cells(golden), cells(new)
assert want.keys() == got.keys(), "the results have other cells"
moved = {k: got[k] - want[k] for k in want if got[k] != want[k]}
worst = max((abs(d) for d in moved.values()), default=0)
print(f"products {products}: {len(moved)} of {len(want)} cells moved, by at most {worst} "
      f"(allowed {allowed})")
for k, d in sorted(moved.items()):
    print(f"  {k[0]} at {k[1]}, {k[2]}: {d:+d}")
sys.exit(worst > allowed)
PY
