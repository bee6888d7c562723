#!/bin/sh
# The CUDA back end on a machine with an NVIDIA GPU, in one run: builds,
# checks every kernel against the CPU back end, checks the forward pass
# against HF transformers (the committed fixtures) and against the CPU back
# end (a random checkpoint with Qwen2.5-1.5B's shapes), measures speed
# against the GPU's own bandwidth and against HF transformers, and prints a
# PASS/FAIL line per target. Everything goes to one log.
#
#   tests/gpu/check.sh [--out DIR] [--work DIR] [--build-dir DIR] [--no-build]
#                      [--bundle DIR] [--device N] [--no-hf] [--full-suite]
#
#   --out DIR        where check.log and summary.txt go (default: $OUT when
#                    set, else build-gpu/out)
#   --work DIR       where the 3.1 GB checkpoint is written (default:
#                    build-gpu/work; kept for later runs)
#   --build-dir DIR  the build directory (default build-gpu; configured with
#                    -Dcuda=enabled -Dbuildtype=release)
#   --no-build       use the build directory as it is
#   --bundle DIR     run the programs of an archive made by tests/gpu/bundle.sh
#                    (unpacked: DIR/build, DIR/lib, DIR/tests.json, DIR/src):
#                    no meson, apt-get or compiler needed; the device suite
#                    runs from DIR/tests.json, and the data the check reads
#                    (fixtures, the demo checkpoint) from DIR/src when the
#                    archive has it
#   --full-suite     run all of `meson test` with the GPU present (default:
#                    only the device tests, which open the GPU; the rest is
#                    the CPU suite, a few more minutes)
#   --no-hf          skip the HF transformers comparison
#
# Needs: an NVIDIA GPU of compute capability >= 8.0 and its driver; nvcc
# and cuBLAS (CUDA >= 11.8; the driver must support the toolkit's version);
# meson >= 1.0, ninja, a C compiler and the libraries of .ci/install-deps
# (GSL, OpenBLAS, jansson, PCRE2, utf8proc, libcsv, cairo, nettle: the
# script installs them with apt-get when it can, and otherwise stops and
# names the missing ones); python3 (the summary). The HF comparison also
# needs python3 with torch (a CUDA build), transformers and numpy; without
# them that target reads NOT MEASURED. No network access is needed.
#
# Targets (the summary):
#   kernels    every check of cuda_kernels_check passes (each op against the
#              CPU back end; tolerances in tests/gpu/cuda_kernels_check.c)
#   faults     a kernel fault is reported, naming the kernel
#   fixtures   gpu_parity fixtures passes (vs HF; tests/gpu/gpu_parity.c)
#   model      gpu_parity model passes (1.5B shapes vs the CPU back end)
#   decode     greedy decode tokens/s >= 50% of the bandwidth limit
#              (copy bandwidth / weight bytes read per token), batch 1,
#              decode steps fused and replayed as CUDA graphs (the default)
#   step-kernels  kernels in a recorded decode step <= 6 a layer (+ the
#              embedding and the LM head)
#   decode-launched, decode-no-pdl, decode-gemv-rows  INFO: the same
#              launched kernel by kernel (--no-graphs: unfused), without
#              programmatic launches, and with the warp-per-row products
#   capture    decode with capture as the collector runs it <= 5% slower
#              than without
#   hf         prompt + decode with capture >= 20x faster than HF eager
#              with output_attentions=True (bf16, same GPU)
#   batch      batched decode steps (matmul_rows, logits_rows, views) give
#              each sequence the bits of its steps alone (gpu_batch:
#              tests/model/test_qwen2_batch.c on the GPU), and collect
#              --batch 8 and eval's runs stepped together write the bytes of
#              one at a time (6 demo episodes on the GPU)
#   batch-speed  batched greedy decode with capture on the 1.5B-shaped
#              checkpoint (gpu_bench batch): batch 64 >= 20x the tokens/s of
#              batch 1 (batch 8 printed too)
#   evict      eval (KV eviction by every policy, probes asked after a
#              rollback) on the shipped checkpoint and 6 episodes of
#              agent-450 with --device cuda against the same on the CPU:
#              check --probes 1 --retention 0.05 passes
#   suite      meson test (the device suite, or all with --full-suite)
#              passes on this machine
# A run from a bundle takes about a minute and a half on an H200
# (tests/gpu/README.md has the steps' times); a build adds 1-2 min.
set -u
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-$root/build-gpu/out}
work=$root/build-gpu/work
build=$root/build-gpu
do_build=1 do_hf=1 full_suite=0 device=0 bundle=
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle=$(cd "$2" && pwd) || exit 2; build=$bundle/build; do_build=0; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --no-hf) do_hf=0; shift ;;
    --full-suite) full_suite=1; shift ;;
    --device) device=$2; shift 2 ;;
    *) echo "check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" "$work" || exit 2
# Where the check's data are read: the bundle's copy when it has one.
data=$root
[ -n "$bundle" ] && [ -d "$bundle/src" ] && data=$bundle/src
log=$out/check.log
summary=$out/summary.txt
: >"$log"
: >"$summary"
start=$(date +%s)

say() { echo "$*" | tee -a "$log" >&2; }
target() { echo "$1 $2 $3" >>"$summary"; say "== $1: $2 ($3)"; }
# Runs a step with a time limit, its output into the log; returns its status.
step() {
  name=$1 limit=$2
  shift 2
  say "---- $name: $* (limit ${limit}s, at $(($(date +%s) - start))s)"
  timeout "$limit" "$@" >>"$log" 2>&1
  status=$?
  [ "$status" = 124 ] && say "$name: TIMED OUT after ${limit}s"
  say "---- $name: exit $status"
  return "$status"
}
finish() {
  say ""
  say "summary ($(($(date +%s) - start)) s; log: $log):"
  cat "$summary" | tee -a "$log"
  if grep -q ' FAIL ' "$summary"; then exit 1; fi
  exit 0
}

say "memdecay-calibrate GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), source $root"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || echo "nvidia-smi: not found"
  nvcc --version 2>&1 | tail -1 || echo "nvcc: not found"
  meson --version 2>&1 | sed 's/^/meson /'
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "transformers", transformers.__version__)' 2>&1 | tail -1
} >>"$log"
tail -n 5 "$log" >&2

# ---- prerequisites and build ---------------------------------------------------
if [ "$do_build" = 1 ]; then
  missing=
  for module in gsl openblas jansson libpcre2-8 libutf8proc cairo nettle; do
    pkg-config --exists "$module" 2>/dev/null || missing="$missing $module"
  done
  [ -f /usr/include/csv.h ] || missing="$missing libcsv(csv.h)"
  command -v nvcc >/dev/null || missing="$missing nvcc"
  command -v meson >/dev/null && command -v ninja >/dev/null || missing="$missing meson/ninja"
  if [ -n "$missing" ]; then
    say "missing:$missing; trying .ci/install-deps (apt-get)"
    step install-deps 600 .ci/install-deps || true
  fi
  if [ ! -f "$build/build.ninja" ]; then
    step configure 300 meson setup "$build" -Dcuda=enabled -Dbuildtype=release ||
      { target build FAIL "meson setup failed (missing:${missing:- none}); see the log"; finish; }
  fi
  step build 900 ninja -C "$build" || { target build FAIL "ninja failed; see the log"; finish; }
  target build PASS "$build"
fi
if [ -n "$bundle" ]; then
  # The CUDA libraries are the machine's: when the loader does not find
  # them, look where CUDA installs put them.
  if ldd "$build/calib/memdecay-calibrate" 2>/dev/null | grep -q 'not found'; then
    for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
               $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null); do
      [ -d "$dir" ] && LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir
    done
    export LD_LIBRARY_PATH
  fi
  say "bundle $bundle (commit $(cat "$bundle/commit" 2>/dev/null || echo unknown)); data from $data"
  ldd "$build/calib/memdecay-calibrate" | grep -E 'not found|cuda|cublas' >>"$log" 2>&1
  if ldd "$build/calib/memdecay-calibrate" | grep -q 'not found'; then
    target build FAIL "libraries not found: $(ldd "$build/calib/memdecay-calibrate" | grep 'not found' | tr '\n' ' ')"
    finish
  fi
fi
bin=$build/tests/gpu
for program in cuda_kernels_check gpu_parity gpu_bench make_checkpoint; do
  [ -x "$bin/$program" ] || { target build FAIL "$bin/$program missing: is the build made with -Dcuda=enabled?"; finish; }
done

# ---- correctness ------------------------------------------------------------------
if step kernels 600 "$bin/cuda_kernels_check" --device "$device"; then
  target kernels PASS "$(grep -c '^PASS' "$log") checks"
else
  target kernels FAIL "$(grep '^FAIL' "$log" | head -3 | tr '\n' ';')"
fi
faults=PASS
step fault 120 "$bin/cuda_kernels_check" --device "$device" fault || faults=FAIL
step fault-sync 120 "$bin/cuda_kernels_check" --device "$device" fault --sync || faults=FAIL
target faults "$faults" "$(grep '^reported:' "$log" | head -2 | cut -c1-200 | tr '\n' ';')"

before=$(grep -c '^FAIL' "$log")
if step fixtures 600 env MD_SOURCE_ROOT="$data" "$bin/gpu_parity" fixtures --device "$device"; then
  target fixtures PASS "committed checkpoints vs HF, exact and fast GEMM"
else
  target fixtures FAIL "$(grep '^FAIL' "$log" | tail -n +$((before + 1)) | head -3 | tr '\n' ';')"
fi

ckpt=$work/qwen15-shapes-bf16
if [ ! -f "$ckpt/model.safetensors" ] || [ ! -f "$ckpt/prompt.i32" ]; then
  step checkpoint 600 "$bin/make_checkpoint" "$ckpt" --prompt 2048 ||
    { target model FAIL "could not write the checkpoint"; finish; }
fi
before=$(grep -c '^FAIL' "$log")
if step model 900 "$bin/gpu_parity" model "$ckpt" --prompt 600 --steps 16 --device "$device"; then
  target model PASS "1.5B shapes, 600-token prompt, 16 steps, vs the CPU back end"
else
  target model FAIL "$(grep '^FAIL' "$log" | tail -n +$((before + 1)) | head -3 | tr '\n' ';')"
fi

# The runtime on the GPU: eviction (kv_compact), rollback and probes, end to
# end against the CPU back end.
evict_args="--model $data/data/models/qwen2-tiny --traces $data/data/traces/agent-450.jsonl \
  --config $data/data/golden/qwen2-tiny-agent-450.json --max-episodes 6 --reproducible -q"
# shellcheck disable=SC2086
# (The CPU side on 4 threads: a 4-layer model's steps are too small to
# share among more.)
if step evict-cpu 600 "$build/calib/memdecay-calibrate" eval $evict_args --threads 4 -o "$out/eval-cpu.json" &&
   step evict-cuda 600 "$build/calib/memdecay-calibrate" eval $evict_args --device "cuda:$device" \
     -o "$out/eval-cuda.json" &&
   step evict-check 60 "$build/calib/memdecay-calibrate" check "$out/eval-cuda.json" \
     --golden "$out/eval-cpu.json" --probes 1 --retention 0.05; then
  target evict PASS "eval of 6 episodes, every policy at 25% and 50%, cuda vs cpu within 1 probe and 0.05 retention"
else
  target evict FAIL "eval on cuda differs from cpu or failed; see the log (evict-*)"
fi

# Batches on the GPU: batched steps give each sequence its own bits, and
# collect and eval with the sequences stepped together write the bytes of
# one at a time.
batch_args="--model $data/data/models/qwen2-tiny --traces $data/data/traces/agent-450.jsonl \
  --max-episodes 6 --reproducible -q --device cuda:$device"
rm -rf "$out/batch-1" "$out/batch-8"
# shellcheck disable=SC2086
if step batch-steps 300 env MD_SOURCE_ROOT="$data" "$bin/gpu_batch" &&
   step batch-collect-1 300 "$build/calib/memdecay-calibrate" collect $batch_args --batch 1 \
     --out "$out/batch-1" &&
   step batch-collect-8 300 "$build/calib/memdecay-calibrate" collect $batch_args --batch 8 \
     --out "$out/batch-8" &&
   step batch-collect-diff 60 diff -r "$out/batch-1" "$out/batch-8" &&
   step batch-eval-1 600 "$build/calib/memdecay-calibrate" eval $batch_args --batch 1 \
     --config "$data/data/golden/qwen2-tiny-agent-450.json" -o "$out/batch-eval-1.json" &&
   step batch-eval-all 600 "$build/calib/memdecay-calibrate" eval $batch_args \
     --config "$data/data/golden/qwen2-tiny-agent-450.json" -o "$out/batch-eval-all.json" &&
   step batch-eval-cmp 60 cmp "$out/batch-eval-1.json" "$out/batch-eval-all.json"; then
  target batch PASS "batched steps on cuda give the bits of steps alone; collect --batch 8 and eval's runs stepped together: the bytes of one at a time"
else
  target batch FAIL "batched collect or eval on cuda failed or differs from one at a time; see the log (batch-*)"
fi

# ---- speed --------------------------------------------------------------------------
step limits 300 sh -c "\"$bin/gpu_bench\" limits --device $device >\"$out/limits.txt\"" || true
step bench 600 sh -c "\"$bin/gpu_bench\" run \"$ckpt\" --prompt 2048 --decode 128 --device $device >\"$out/ours.txt\"" || true
step bench-launched 600 sh -c "\"$bin/gpu_bench\" run \"$ckpt\" --prompt 2048 --decode 64 --no-graphs --device $device >\"$out/ours_launched.txt\"" || true
step bench-gemv-rows 600 sh -c "MD_CUDA_GEMV=rows \"$bin/gpu_bench\" run \"$ckpt\" --prompt 2048 --decode 128 --device $device >\"$out/ours_gemv_rows.txt\"" || true
step bench-no-pdl 600 sh -c "MD_CUDA_PDL=0 \"$bin/gpu_bench\" run \"$ckpt\" --prompt 2048 --decode 128 --device $device >\"$out/ours_no_pdl.txt\"" || true
step bench-batch 600 sh -c "\"$bin/gpu_bench\" batch \"$ckpt\" --device $device >\"$out/ours_batch.txt\"" || true
step bench-exact 600 sh -c "\"$bin/gpu_bench\" run \"$ckpt\" --prompt 2048 --decode 32 --gemm exact --device $device >\"$out/ours_exact.txt\"" || true
: >"$out/hf.txt"
if [ "$do_hf" = 1 ]; then
  step hf 900 sh -c "python3 \"$root/tests/gpu/hf_gpu_bench.py\" \"$ckpt\" \"$ckpt/prompt.i32\" 2048 32 >\"$out/hf.txt\"" || : >"$out/hf.txt"
fi
cat "$out/limits.txt" "$out/ours.txt" "$out/ours_launched.txt" "$out/ours_gemv_rows.txt" "$out/ours_no_pdl.txt" "$out/ours_exact.txt" "$out/ours_batch.txt" "$out/hf.txt" >>"$log" 2>/dev/null

python3 - "$out/limits.txt" "$out/ours.txt" "$out/ours_exact.txt" "$out/hf.txt" "$out/ours_launched.txt" "$out/ours_no_pdl.txt" "$out/ours_gemv_rows.txt" "$out/ours_batch.txt" >>"$summary" 2>>"$log" <<'PY'
import sys

def read(path):
    try:
        with open(path) as f:
            return {k: v.strip() for k, v in (l.split(None, 1) for l in f if l.strip())}
    except OSError:
        return {}

lim, ours, exact, hf, launched, no_pdl, gemv_rows, batch = (read(p) for p in sys.argv[1:9])
num = lambda d, k: float(d[k])
verdict = lambda ok: "PASS" if ok else "FAIL"
if not lim or not ours:
    print("decode FAIL the benchmark did not run (see the log)")
    sys.exit(0)
bw = num(lim, "copy_gbs") * 1e9
read_bytes = num(ours, "decode_read_bytes")
steps, n = num(ours, "decode_steps"), num(ours, "prompt_tokens")
limit = bw / read_bytes
tps = steps / num(ours, "decode_s")
best = 1.0 / num(ours, "decode_best_step_s")
print(f"decode {verdict(tps >= 0.5 * limit)} {tps:.0f} tok/s greedy at batch 1 = {tps / limit:.2f} of the "
      f"bandwidth limit {limit:.0f} tok/s ({bw / 1e12:.2f} TB/s copy, {read_bytes / 1e9:.2f} GB per token; "
      f"fastest step {best / limit:.2f}; graphs, {ours['launches_per_step']} launches per step; "
      f"launch {lim.get('launch_host_us', '?')} us host)")
layers, kernels = num(ours, "layers"), num(ours, "kernels_per_step")
print(f"step-kernels {verdict(0 < kernels <= 6 * layers + 2)} {kernels:.0f} kernels in a recorded decode step of "
      f"{layers:.0f} layers ({(kernels - 2) / layers:.2f} a layer plus the embedding and the LM head)")
cap = num(ours, "decode_capture_s") / num(ours, "decode_s") - 1.0
for name, run, what in (("decode-launched", launched, "launched kernel by kernel, unfused (--no-graphs)"),
                        ("decode-no-pdl", no_pdl, "graphs without programmatic launches (MD_CUDA_PDL=0)"),
                        ("decode-gemv-rows", gemv_rows, "graphs, products a warp a row (MD_CUDA_GEMV=rows)")):
    if run:
        r_tps = num(run, "decode_steps") / num(run, "decode_s")
        r_cap = num(run, "decode_capture_s") / num(run, "decode_s") - 1.0
        print(f"{name} INFO {r_tps:.0f} tok/s {what} = {r_tps / limit:.2f} of the limit "
              f"({run['kernels_per_step']} kernels per step; capture {100 * r_cap:+.1f}%)")
    else:
        print(f"{name} INFO did not run (see the log)")
forced = num(ours, "decode_forced_capture_s")
print(f"capture {verdict(cap <= 0.05)} {100 * cap:+.1f}% decode time with capture and overlapped reads "
      f"(teacher-forced with capture: {steps / forced:.0f} tok/s, {100 * num(ours, 'decode_forced_enqueue_s') / forced:.0f}% "
      f"of it spent queuing kernels: near 100% means launch-bound)")
pre = n / num(ours, "prefill_s")
pre_cap = n / num(ours, "prefill_capture_s")
line = (f"prefill INFO {pre:.0f} tok/s ({n:.0f} tokens, fast GEMM), {pre_cap:.0f} tok/s with capture")
if exact:
    line += f"; exact GEMM {num(exact, 'prompt_tokens') / num(exact, 'prefill_capture_s'):.0f} tok/s with capture"
print(line)
if batch:
    b1, b8, b64 = (num(batch, f"batch_{b}_tokens_s") for b in (1, 8, 64))
    print(f"batch-speed {verdict(b64 >= 20 * b1)} batched greedy decode with capture: batch 64 "
          f"{b64:.0f} tok/s = {b64 / b1:.1f}x batch 1 ({b1:.0f} tok/s); batch 8 {b8:.0f} = {b8 / b1:.1f}x "
          f"(prompt {num(batch, 'prompt_tokens'):.0f}, {num(batch, 'decode_steps'):.0f} steps)")
else:
    print("batch-speed FAIL gpu_bench batch did not run (see the log)")
gemv = ", ".join(f"{k[9:]} {float(v):.0f} (cuBLAS {float(lim.get('cublas_' + k, 'nan')):.0f})"
                 for k, v in lim.items() if k.startswith("gemv_gbs_"))
print(f"gemv INFO our BF16 GEMV GB/s against cuBLAS n=1 (BF16 x BF16): {gemv}")
if hf:
    hf_step = num(hf, "hf_decode_s") / num(hf, "hf_decode_steps")
    ours_total = num(ours, "prefill_capture_s") + num(ours, "decode_capture_s")
    hf_total = num(hf, "hf_prefill_s") + steps * hf_step
    ratio = hf_total / ours_total
    print(f"hf {verdict(ratio >= 20)} {ratio:.1f}x faster than HF eager + output_attentions "
          f"(prompt {n:.0f} + {steps:.0f} steps: ours {ours_total:.2f} s, HF {hf_total:.2f} s; "
          f"HF prefill {num(hf, 'hf_prefill_s'):.3f} s, decode {1 / hf_step:.1f} tok/s; {hf.get('hf_versions', '')})")
else:
    print("hf NOT-MEASURED python3 with torch (CUDA) and transformers was not available, or --no-hf")
PY

if [ -n "$bundle" ]; then
  # The device suite as plain commands (bundle.sh wrote them from meson).
  if step suite 300 python3 - "$bundle/tests.json" "$build" "$root" <<'PY'
import json, os, subprocess, sys
tests, build, source = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
fix = lambda s: s.replace("@BUILD@", build).replace("@SOURCE@", source)
passed = failed = 0
for t in tests:
    env = dict(os.environ, **{k: fix(v) for k, v in t["env"].items()})
    try:
        r = subprocess.run([fix(c) for c in t["cmd"]], cwd=build, env=env, capture_output=True,
                           text=True, timeout=t["timeout"] or 300)
        ok = r.returncode == 0
        detail = (r.stdout + r.stderr).strip().splitlines()[-3:]
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, detail = False, [str(e)]
    passed, failed = passed + ok, failed + (not ok)
    print(("ok   " if ok else "FAIL ") + t["name"] + ("" if ok else ": " + " | ".join(detail)))
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
  then target suite PASS "the device suite from $bundle/tests.json ($(grep -c '^ok   ' "$log") tests)"
  else target suite FAIL "the device suite: $(grep '^FAIL ' "$log" | head -3 | tr '\n' ';')"; fi
else
  suite_args="--suite device"
  [ "$full_suite" = 1 ] && suite_args=
  # shellcheck disable=SC2086
  if step suite 900 meson test -C "$build" --print-errorlogs $suite_args; then target suite PASS "meson test $suite_args"
  else target suite FAIL "meson test $suite_args: $(grep -E '^ *[0-9]+/[0-9]+ .* FAIL' "$log" | head -3 | tr '\n' ';')"; fi
fi
finish
