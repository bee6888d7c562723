#!/bin/sh
# Throughput of many sequences per forward pass and of the thread counts,
# side by side in one run, with the CPU model and flags:
#
#   threads    the demo's `run` and default `eval` of agent-450 with 1, 2
#              and 16 threads (more threads than cores must cost at most
#              1.3x the cores' count)
#   eval       the demo's default eval (every policy at both budgets)
#              against `eval --policies full`, --batch 1 and batched
#              (target: at most 5x full on the demo)
#   real       with the real Qwen2.5-Coder-0.5B (data/models/fetch_qwen25.py
#              fetches it; skipped without it): eval of the first
#              --episodes of agent-450, full against every policy (target:
#              at most 3x), and collect's decode rate with --batch 1 and 8
#              (target: 4x) beside the compute bound of a batched step: the
#              peak of the products the step runs (inference_bench limits:
#              vdpbf16ps's with BF16 products, `devices` says which, else the
#              float32 FMA's) over the 0.988 GFLOP a token of the 0.5B costs
#              in its matrix products
#
#   bench/batch_bench.sh [--threads N] [--episodes N] [--no-build] [--no-real]
#
# Rounds alternate the variants compared. OMP_WAIT_POLICY is passed through
# as set.
set -eu
cd "$(dirname "$0")/.."
threads=$(nproc)
episodes=2
build_first=1
real=1
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --episodes) episodes=$2; shift 2 ;;
    --no-build) build_first=0; shift ;;
    --no-real) real=0; shift ;;
    *) echo "batch_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
. bench/common.sh
bench_build "$build_first" batch_bench.sh calib/memdecay-calibrate bench/inference_bench
bin=${MD_BUILD_DIR:-build}/calib/memdecay-calibrate
work=${MD_BUILD_DIR:-build}/bench-work/batch
rm -rf "$work" && mkdir -p "$work"
bench_cpu_line
echo "threads: $threads; OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; $(date -u +%Y-%m-%d)"
demo=data/models/qwen2-tiny
traces=data/traces/agent-450.jsonl
config=data/golden/qwen2-tiny-agent-450.json

# seconds COMMAND...: the wall time of a command, its output discarded.
seconds() {
  _t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  printf '%.2f\n' "$(echo "$(date +%s.%N) - $_t0" | bc)"
}

echo "== threads (demo run, then demo eval; seconds)"
for round in 1 2; do
  for t in 1 2 16; do
    rm -rf "$work/run"
    r=$(seconds "$bin" run --model "$demo" --traces "$traces" -o "$work/m.json" \
      --workdir "$work/run" --threads "$t" -q)
    e=$(seconds "$bin" eval --model "$demo" --traces "$traces" --config "$config" \
      -o "$work/e.json" --threads "$t" --reproducible -q)
    echo "round $round, --threads $t: run $r s, eval $e s"
  done
done

echo "== eval on the demo (agent-450, 24 episodes; seconds)"
for round in 1 2; do
  f=$(seconds "$bin" eval --model "$demo" --traces "$traces" --config "$config" -o "$work/f.json" \
    --threads "$threads" --policies full --reproducible -q)
  one=$(seconds "$bin" eval --model "$demo" --traces "$traces" --config "$config" \
    -o "$work/one.json" --threads "$threads" --batch 1 --reproducible -q)
  all=$(seconds "$bin" eval --model "$demo" --traces "$traces" --config "$config" \
    -o "$work/all.json" --threads "$threads" --reproducible -q)
  cmp -s "$work/one.json" "$work/all.json" || { echo "batched results differ!" >&2; exit 1; }
  echo "round $round: full $f s; all policies --batch 1 $one s ($(echo "scale=2; $one / $f" | bc)x), batched $all s ($(echo "scale=2; $all / $f" | bc)x)"
done

model=${MEMDECAY_MODEL_CACHE:-$HOME/.cache/memdecay-calibrate/models}/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
if [ "$real" = 0 ] || [ ! -f "$model" ]; then
  echo "== real model: skipped (python3 data/models/fetch_qwen25.py fetches it)"
  exit 0
fi
echo "== real Qwen2.5-Coder-0.5B Q4_K_M, first $episodes episodes of agent-450"
# rate LOG WHAT: the "prefill|decode N tok/s" figure of a progress log's done line.
rate() { tr '\r' '\n' <"$1" | sed -n "s/.*done:.*$2 \([0-9.]*\) tok\/s.*/\1/p" | tail -1; }
f=$(seconds "$bin" eval --model "$model" --traces "$traces" --config "$config" -o "$work/rf.json" \
  --threads "$threads" --policies full --max-episodes "$episodes" --reproducible -q)
all=$(seconds "$bin" eval --model "$model" --traces "$traces" --config "$config" \
  -o "$work/ra.json" --threads "$threads" --max-episodes "$episodes" --reproducible -q)
echo "eval: full $f s; every policy, both budgets $all s ($(echo "scale=2; $all / $f" | bc)x)"
for b in 1 8; do
  rm -rf "$work/c$b"
  "$bin" collect --model "$model" --traces "$traces" --out "$work/c$b" --threads "$threads" \
    --max-episodes 8 --batch "$b" --reproducible 2>"$work/c$b.log"
  echo "collect --batch $b (8 episodes): decode $(rate "$work/c$b.log" decode) tok/s, prefill $(rate "$work/c$b.log" prefill) tok/s"
done
diff -r "$work/c1" "$work/c8" >/dev/null || { echo "batched run directory differs!" >&2; exit 1; }
# The bound: Qwen2.5-0.5B's multiply-adds per token, 24 layers x 896 x
# (896 + 128 + 128 + 896 + 3 x 4864) plus the LM head 151936 x 896.
# With BF16 products (the default on AMD Zen 4/5) the bound is vdpbf16ps's
# peak, else the float32 FMA's.
limits=$("${MD_BUILD_DIR:-build}/bench/inference_bench" limits --threads "$threads")
if "$bin" devices --device cpu | grep -q '^products of a BF16 checkpoint (prompt and decode): bf16'; then
  products=bf16 peak=$(echo "$limits" | sed -n 's/^bf16_dot_peak_gflops //p')
else
  products=fp32 peak=$(echo "$limits" | sed -n 's/^fma_peak_gflops //p')
fi
one=$(rate "$work/c1.log" decode) eight=$(rate "$work/c8.log" decode)
python3 - "$peak" "$one" "$eight" "$products" <<'PY'
import sys
peak, one, eight = (float(v) for v in sys.argv[1:4])
products = sys.argv[4]
flop = 2.0 * (24 * 896 * (896 + 128 + 128 + 896 + 3 * 4864) + 151936 * 896) / 1e9
bound = peak / flop
print(f"collect --batch 8 over --batch 1: {eight / one:.2f}x (target 4x); the compute bound of a batched "
      f"step ({products} products): peak {peak:.1f} GFLOP/s / {flop:.3f} GFLOP a token = {bound:.0f} tok/s = {bound / one:.2f}x "
      f"--batch 1; --batch 8 runs at {eight / bound:.2f} of it")
PY
