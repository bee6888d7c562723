#!/bin/sh
# Measures the forward pass against this machine's own limits and against HF
# transformers, in one run, and prints the ratios with their targets:
#   decode tokens/s   vs  bandwidth / bytes read per token     (>= 0.85)
#   prefill tokens/s  vs  FMA peak / flops per token           (>= 0.60)
#                     and vs the best BLAS kernel's sgemm rate (reported)
#   decode speed at context depths 0, 1k, 4k, 16k: against the bandwidth
#                     limit with the KV cache read, each step against a
#                     read stream of its bytes run just before it, and the
#                     share of the step that grows with depth (the attention)
#   speed vs HF (eager, output_attentions=True, same threads)  (>= 3x)
#   peak RSS vs HF                                             (<= 0.5x)
#   peak RSS vs 1.3 x (weight bytes + KV cache bytes)          (<= 1)
#   decode tokens/s with the attention capture on vs off      (>= 0.95)
#   where the prompt's and the decode steps' time goes, operation by
#                     operation, each product against the FMA peak
#                     (inference_bench ops; --no-ops leaves it out)
# and the collector end to end (memdecay-calibrate collect on a few episodes
# of data/traces/agent-1700.jsonl, teacher-forced): prefill and decode
# tokens/s, and its decode rate against the forward pass's own.
# The model is a random BF16 checkpoint with Qwen2.5-0.5B's exact shapes,
# built once under the work directory (about 1 GB; not committed). The
# limits are this machine's, read before and after the runs and the
# bandwidth again before the decode runs (the best reading is used): the
# bandwidth the best of a STREAM triad, a read-only stream on every thread
# and an f32 GEMV; the compute peak is an FMA loop at the widest
# vector width the CPU runs, on every thread, not a library's rate; OpenBLAS
# runs the core memdecay-calibrate would choose (bench/common.sh). The CPU
# model and flags are printed with the figures. llama.cpp side by side:
# bench/llama_cpp_bench.sh.
#
#   bench/inference_bench.sh [--threads N] [--prompt 1700] [--decode 256]
#                            [--hf-decode N] [--no-hf] [--work DIR]
#                            [--capture-steps N] [--collect-episodes 2]
#                            [--collect-steps 64] [--no-collect]
#                            [--depths 0,1024,4096,16384] [--depth-steps 32]
#                            [--no-depth] [--no-ops] [--no-build]
#
# --no-build uses the build in $MD_BUILD_DIR (default build) as it is.
#
# Needs python3 with torch, transformers, safetensors and numpy (for the
# checkpoint and the HF side). Timings on a busy machine are noisy: run it on
# a quiet one. OMP_WAIT_POLICY is passed through as set: unset (libgomp's
# default, threads spin a while before sleeping) or active suits a dedicated
# machine; on one shared with other busy processes, spinning threads wait for
# each other's time slices and decode slows down many times over: there, set
# OMP_WAIT_POLICY=passive.
set -eu
cd "$(dirname "$0")/.."
threads=$(nproc)
prompt=1700
decode=256
hf_decode=
run_hf=1
work=build/bench-work
capture_steps=
collect_episodes=2
collect_steps=64
run_collect=1
depths=0,1024,4096,16384
depth_steps=32
run_depth=1
run_ops=1
build_first=1
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --decode) decode=$2; shift 2 ;;
    --hf-decode) hf_decode=$2; shift 2 ;;
    --no-hf) run_hf=0; shift ;;
    --capture-steps) capture_steps=$2; shift 2 ;;
    --collect-episodes) collect_episodes=$2; shift 2 ;;
    --collect-steps) collect_steps=$2; shift 2 ;;
    --no-collect) run_collect=0; shift ;;
    --depths) depths=$2; shift 2 ;;
    --depth-steps) depth_steps=$2; shift 2 ;;
    --no-depth) run_depth=0; shift ;;
    --no-ops) run_ops=0; shift ;;
    --no-build) build_first=0; shift ;;
    --work) work=$2; shift 2 ;;
    *) echo "inference_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
: "${hf_decode:=$decode}"
: "${capture_steps:=$decode}"

. bench/common.sh
bench_build "$build_first" inference_bench.sh bench/inference_bench calib/memdecay-calibrate
bench=${MD_BUILD_DIR:-build}/bench/inference_bench
bench_blas_core "${MD_BUILD_DIR:-build}"
mkdir -p "$work"
ckpt=$work/qwen05-shapes-bf16
if [ ! -f "$ckpt/model.safetensors" ] || [ "$(($(wc -c <"$ckpt/prompt.i32") / 4))" != "$prompt" ]; then
  echo "building the random checkpoint in $ckpt ..." >&2
  python3 bench/make_bench_checkpoint.py "$ckpt" "$prompt"
fi

echo "measuring limits ..." >&2
rm -f "$work"/bandwidth-*.txt
"$bench" limits --threads "$threads" >"$work/limits.txt"
echo "running ours: $prompt-token prompt + $decode decode steps ..." >&2
"$bench" bandwidth --threads "$threads" >"$work/bandwidth-run.txt"
"$bench" run "$ckpt" "$ckpt/prompt.i32" --decode "$decode" --threads "$threads" \
  --capture-steps "$capture_steps" >"$work/ours.txt"
: >"$work/hf.txt"
if [ "$run_hf" = 1 ]; then
  echo "running HF transformers: same prompt + $hf_decode decode steps ..." >&2
  python3 bench/hf_bench.py "$ckpt" "$ckpt/prompt.i32" "$hf_decode" "$threads" \
    2>"$work/hf.err" >"$work/hf.txt" || { cat "$work/hf.err" >&2; exit 1; }
fi

# Decode against context depth: the cache filled to each depth (untimed),
# then steps alternating capture off and on, each after a read stream of
# as many bytes (--paired: the step against the memory's rate of that
# moment; a step's 1 GB of weights leaves nothing of the stream's in the
# caches, nor of the step before).
: >"$work/depth.txt"
if [ "$run_depth" = 1 ]; then
  echo "decode at depths $depths ($depth_steps steps each; filling 16k tokens takes minutes) ..." >&2
  "$bench" bandwidth --threads "$threads" >"$work/bandwidth-depth.txt"
  "$bench" depth "$ckpt" --depths "$depths" --steps "$depth_steps" --threads "$threads" \
    --paired >"$work/depth.txt"
fi

# The collector end to end: the checkpoint with the Qwen tokenizer beside it
# (same BPE as Qwen2.5; the random weights make the text meaningless, not the
# work), teacher-forced windows of at most --collect-steps steps.
: >"$work/collect.txt"
if [ "$run_collect" = 1 ]; then
  [ -f "$ckpt/tokenizer.json" ] || cp data/tokenizer/qwen/tokenizer.json "$ckpt/tokenizer.json"
  echo "running the collector: $collect_episodes episodes of agent-1700, <= $collect_steps steps each ..." >&2
  rm -rf "$work/collect-run"
  "${MD_BUILD_DIR:-build}/calib/memdecay-calibrate" collect --model "$ckpt" \
    --traces data/traces/agent-1700.jsonl --out "$work/collect-run" --threads "$threads" \
    --max-episodes "$collect_episodes" --max-steps "$collect_steps" 2>"$work/collect.err" ||
    { cat "$work/collect.err" >&2; exit 1; }
  python3 - "$work/collect-run/run.json" "$work/collect.err" >"$work/collect.txt" <<'PY'
import json, re, sys
run = json.load(open(sys.argv[1]))
done = [l for l in open(sys.argv[2]) if "done:" in l][-1]
m = re.search(r"prefill ([0-9.]+) tok/s, decode ([0-9.]+) tok/s", done)
print("episodes", len(run["episodes"]))
print("prompt_tokens", sum(e["prompt_tokens"] for e in run["episodes"]))
print("decode_steps", sum(e["decode_steps"] for e in run["episodes"]))
print("prefill_tps", m.group(1))
print("decode_tps", m.group(2))
PY
fi

# Where the time goes, op by op: the prompt with the capture on, as the
# collector runs it, and 32 decode steps (printed after the summary).
: >"$work/ops.txt"
if [ "$run_ops" = 1 ]; then
  echo "timing the forward pass op by op ..." >&2
  "$bench" ops "$ckpt" "$ckpt/prompt.i32" --prefill-capture --decode 32 --threads "$threads" \
    >"$work/ops.txt"
fi

# The limits once more: the better of the two readings is used (on a shared
# or virtual machine one reading can catch a slow moment).
"$bench" limits --threads "$threads" >"$work/limits-after.txt"
bench_cpu_line
python3 - "$work/limits.txt" "$work/ours.txt" "$work/hf.txt" "$hf_decode" "$work/collect.txt" "$work/depth.txt" "$work/limits-after.txt" <<'PY'
import glob, os, sys

sys.path.insert(0, "bench")
from bench_output import bandwidth, better_limits, depth_rows, keyvals as read

lim = better_limits(sys.argv[1], sys.argv[7],
                    *sorted(glob.glob(os.path.join(os.path.dirname(sys.argv[1]), "bandwidth-*.txt"))))
ours, hf = read(sys.argv[2]), read(sys.argv[3])
coll = read(sys.argv[5])
num = lambda d, k: float(d[k])
bw = bandwidth(lim)
n, steps = num(ours, "prompt_tokens"), num(ours, "decode_steps")
verdict = lambda ok: "ok" if ok else "BELOW TARGET"
print(f"threads {ours['threads'].strip()}, kernels {ours['isa'].strip()}, "
      f"prompt gemm {ours.get('prompt_gemm', '?').strip()}, weights {ours['dtype'].strip()}, "
      f"OMP_WAIT_POLICY {__import__('os').environ.get('OMP_WAIT_POLICY', 'unset')}")
peak = num(lim, "fma_peak_gflops")
print(f"bandwidth: triad {num(lim, 'triad_gbs'):.1f} GB/s, read {num(lim, 'read_gbs'):.1f} GB/s, "
      f"f32 sgemv {num(lim, 'sgemv_gbs'):.1f} GB/s -> limit uses {bw:.1f} GB/s")
print(f"compute peak: {peak:.1f} GFLOP/s (FMA loop, {lim['fma_isa'].strip()}, all threads)")
print(f"sgemm: {num(lim, 'sgemm_gflops'):.1f} GFLOP/s (1700 x 4864 x 896) on OpenBLAS {lim['blas_core'].strip()} "
      f"= {num(lim, 'sgemm_gflops') / peak:.2f} of the FMA peak")

read_bytes = num(ours, "decode_read_bytes")
dec_tps = steps / num(ours, "decode_s")
dec_limit = bw * 1e9 / read_bytes
r = dec_tps / dec_limit
print(f"decode: {dec_tps:.2f} tok/s; limit {dec_limit:.2f} tok/s ({read_bytes / 1e6:.0f} MB of weights per token) "
      f"-> ratio {r:.3f} (target >= 0.85: {verdict(r >= 0.85)})")
best = 1.0 / num(ours, "decode_best_step_s") / dec_limit
print(f"        fastest single step: {1.0 / num(ours, 'decode_best_step_s'):.2f} tok/s -> ratio {best:.2f} "
      f"(a shared machine's noise shows as a gap between the two ratios)")


def bandwidth_before(name):
    """The best of the bandwidth figures read just before a run (GB/s), or None."""
    path = os.path.join(os.path.dirname(sys.argv[1]), f"bandwidth-{name}.txt")
    if not os.path.exists(path):
        return None
    return bandwidth(read(path))


near = bandwidth_before("run")
if near:
    print(f"        against the bandwidth read just before the run ({near:.1f} GB/s): ratio "
          f"{dec_tps * read_bytes / 1e9 / near:.3f}")

flops = 2 * num(ours, "layer_params") + num(ours, "attn_flops_prefill") / n
pre_tps = n / num(ours, "prefill_s")
pre_limit = peak * 1e9 / flops
r = pre_tps / pre_limit
print(f"prefill: {pre_tps:.1f} tok/s ({num(ours, 'prefill_s'):.2f} s); limit {pre_limit:.1f} tok/s at the FMA peak "
      f"({flops / 1e6:.0f} MFLOP per token) -> ratio {r:.3f} (target >= 0.60: {verdict(r >= 0.60)}); "
      f"{pre_tps * flops / 1e9 / num(lim, 'sgemm_gflops'):.2f} of the best BLAS kernel's sgemm")

rss = num(ours, "peak_rss_kb") * 1024
budget = 1.3 * (num(ours, "weight_bytes") + num(ours, "kv_bytes"))
print(f"peak RSS: {rss / 1e6:.0f} MB; 1.3 x (weights {num(ours, 'weight_bytes') / 1e6:.0f} MB + KV "
      f"{num(ours, 'kv_bytes') / 1e6:.0f} MB) = {budget / 1e6:.0f} MB -> {verdict(rss <= budget)}")

if num(ours, "capture_steps") > 0:
    # Steps alternate off/on, so both halves see the same positions and noise.
    off, on = num(ours, "capture_off_s"), num(ours, "capture_on_s")
    r = off / on
    rb = num(ours, "capture_off_best_s") / num(ours, "capture_on_best_s")
    half = num(ours, "capture_steps") / 2
    print(f"capture: decode {half / off:.2f} tok/s off, {half / on:.2f} tok/s on -> ratio {r:.3f} "
          f"(target >= 0.95: {verdict(r >= 0.95)}); fastest steps {rb:.3f}")

if coll:
    print(f"collector end to end ({coll['episodes'].strip()} episodes of agent-1700, "
          f"{coll['prompt_tokens'].strip()} prompt tokens, {coll['decode_steps'].strip()} teacher-forced steps): "
          f"prefill {num(coll, 'prefill_tps'):.1f} tok/s, decode {num(coll, 'decode_tps'):.2f} tok/s "
          f"-> {num(coll, 'decode_tps') / dec_tps:.2f} x the greedy decode rate above "
          f"(teacher forcing skips the LM head)")

depth_rows = depth_rows(sys.argv[6])
if depth_rows:
    near = bandwidth_before("depth")
    print("decode against context depth (capture off / on; limit: bandwidth over weights + KV read"
          + (f"; in brackets against the {near:.1f} GB/s read just before these runs" if near else "")
          + "; 'paired': each step against a read stream of its bytes run just before it, the median):")
    base = None
    for row in depth_rows:
        half = row["steps"] / 2
        off, on = half / row["off_s"], half / row["on_s"]
        limit = bw * 1e9 / (read_bytes + row["kv_read_bytes"])
        step_off = row["off_s"] / half
        if base is None:
            base = step_off
        share = max(0.0, 1.0 - base / step_off)
        print(f"  depth {int(row['depth']):>6}: {off:6.2f} / {on:6.2f} tok/s; limit {limit:6.2f} tok/s "
              f"({(read_bytes + row['kv_read_bytes']) / 1e6:.0f} MB) -> {on / limit:.2f}"
              + (f" [{on / limit * bw / near:.2f}]" if near else "")
              + (f", paired {row['paired_on']:.2f} ({row['paired_read_gbs']:.1f} GB/s)" if "paired_on" in row else "")
              + "; "
              f"attention share of the step {share:.2f} (its growth over depth {int(depth_rows[0]['depth'])})")

if hf:
    sp_pre = num(hf, "hf_prefill_s") / num(ours, "prefill_s")
    hf_decode = float(sys.argv[4])
    hf_dec_tps = hf_decode / num(hf, "hf_decode_s") if hf_decode > 0 else float("nan")
    sp_dec = dec_tps / hf_dec_tps
    ours_total = num(ours, "prefill_s") + num(ours, "decode_s")
    hf_total = num(hf, "hf_prefill_s") + steps / hf_dec_tps  # decode rate x our step count
    sp_total = hf_total / ours_total
    hf_rss = num(hf, "hf_peak_rss_kb") * 1024
    print(f"HF transformers: prefill {num(hf, 'hf_prefill_s'):.2f} s, decode {hf_dec_tps:.2f} tok/s, peak RSS {hf_rss / 1e6:.0f} MB")
    print(f"speed vs HF: prefill {sp_pre:.1f}x, decode {sp_dec:.1f}x, whole run {sp_total:.1f}x "
          f"(target >= 3: {verdict(min(sp_pre, sp_dec) >= 3)})")
    print(f"peak RSS vs HF: {rss / hf_rss:.2f} (target <= 0.50: {verdict(rss / hf_rss <= 0.5)})")
PY
if [ -s "$work/ops.txt" ]; then
  echo "where the time goes (inference_bench ops):"
  cat "$work/ops.txt"
fi
