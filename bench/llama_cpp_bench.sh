#!/bin/sh
# Our forward pass and llama.cpp side by side on this machine, in one run,
# with the same threads, alternating: prefill of a 1,700-token prompt and
# greedy decode from an empty cache and after 1,700 tokens, on a random
# checkpoint with Qwen2.5-0.5B's (or, --shapes 1.5b, Qwen2.5-1.5B's) exact
# shapes, BF16 and F32. Prints each figure, each ratio and the targets:
#   prefill, capture on:  >= 1.5 x llama.cpp  and >= 0.6 of the FMA peak
#   decode, capture on:   >= 1.0 x llama.cpp's better setting (flash
#                         attention on or off) from an empty cache and
#                         after 1,700 tokens, and >= 0.85 of the bandwidth
#                         limit (weights + KV cache read per step), twice:
#                         against the best bandwidth reading of the whole
#                         run, and each step against a read stream of its
#                         bytes run just before it (a run of ours of its
#                         own, inference_bench depth --paired; the median
#                         over the steps, per round and over the rounds),
#                         which a host whose speed moves within seconds
#                         does not blur
# The limits are this machine's, measured by bench/inference_bench before
# and after the runs and the bandwidth again before each decode pair, the
# best reading taken (an FMA loop at the widest vector width on all
# threads; the best of a STREAM triad, a read-only stream on all threads
# and an f32 GEMV); the CPU model and flags are printed with them. Both
# engines are timed warm: llama-bench runs an untimed prompt and
# generation first, and inference_bench is given --warmup to do the same.
# The two engines' runs of one measurement go back to back (decode one
# context depth at a time), ours first in odd rounds and llama.cpp first in
# even ones. Each ratio is the best of each engine over the rounds (the
# verdict) and, on the line below it, each round's own ratio and their
# median: on a shared machine whose speed drifts, the two disagree, and the
# rounds say by how much.
#
# On a CPU with AVX-512 BF16 the BF16 prefill is also run with --bf16-gemm
# (the prompt's products with vdpbf16ps, activations rounded to BF16, as
# llama.cpp multiplies there), reported against llama.cpp and against the
# BF16 dot-product peak beside the default float32 one. On a CPU whose
# kernel path is avx512 the prefill is also run with the prompt GEMM that
# is not the default there (MEMDECAY_CPU_GEMM=own, our AVX-512
# micro-kernel, on an Intel CPU or an AMD Zen 4; =blas, OpenBLAS, on an AMD
# Zen 5 or later) and reported beside the default, so that one run tells
# which should be it.
#
# llama.cpp comes from a registry package: PyPI's llama-cpp-python sdist
# (pinned, its sha256 checked against PyPI's) carries the llama.cpp tree in
# vendor/llama.cpp; it is built here with native CPU flags (GGML_NATIVE,
# its default CPU back end, no BLAS), and its convert_hf_to_gguf.py turns
# the checkpoint into GGUF (BF16 and F32). Nothing of it is committed:
# everything goes under the work directory (default build/bench-work).
#
#   bench/llama_cpp_bench.sh [--threads N] [--prompt 1700] [--decode 64]
#                            [--rounds 2] [--dtypes "bf16 f32"]
#                            [--shapes 0.5b|1.5b] [--llama-cpp-python 0.3.36]
#                            [--work DIR] [--no-build]
#
# --no-build uses the build in $MD_BUILD_DIR (default build) as it is. A
# llama.cpp tree already in WORK/llama-cpp-python-VERSION/vendor/llama.cpp
# (the sdist, extracted) is built without fetching it.
#
# Needs cmake, a C++ compiler, network access to PyPI on the first run, and
# python3 with torch, transformers, safetensors, numpy and sentencepiece (the
# checkpoint and the conversion; the converter imports sentencepiece even
# for a BPE tokenizer). Run it on a quiet machine. The first run builds
# llama.cpp (minutes on two cores) and writes the checkpoints (0.5B: 1 GB
# BF16, 2 GB F32, and the same again as GGUF).
set -eu
cd "$(dirname "$0")/.."
threads=$(nproc)
prompt=1700
decode=64
rounds=2
dtypes="bf16 f32"
shapes=0.5b
llama_version=0.3.36
work=build/bench-work
build_first=1
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --decode) decode=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --llama-cpp-python) llama_version=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --no-build) build_first=0; shift ;;
    -h|--help) sed -n '2,/^set -eu$/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "llama_cpp_bench.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
case $shapes in 0.5b|1.5b) ;; *) echo "llama_cpp_bench.sh: --shapes is 0.5b or 1.5b" >&2; exit 2 ;; esac
for d in $dtypes; do
  case $d in bf16|f32) ;; *) echo "llama_cpp_bench.sh: --dtypes takes bf16 and f32" >&2; exit 2 ;; esac
done
if [ "$decode" -lt 2 ] || [ "$rounds" -lt 1 ]; then
  echo "llama_cpp_bench.sh: --decode must be >= 2 and --rounds >= 1" >&2
  exit 2
fi

missing=$(python3 -c '
import importlib.util
names = ["torch", "transformers", "safetensors", "numpy", "sentencepiece"]
print(" ".join(n for n in names if importlib.util.find_spec(n) is None))')
if [ -n "$missing" ]; then
  echo "llama_cpp_bench.sh: python3 lacks $missing (pip install $missing)" >&2
  exit 1
fi
command -v cmake >/dev/null || { echo "llama_cpp_bench.sh: needs cmake" >&2; exit 1; }

. bench/common.sh
bench_build "$build_first" llama_cpp_bench.sh bench/inference_bench calib/memdecay-calibrate
build=${MD_BUILD_DIR:-build}
bench=$build/bench/inference_bench
mkdir -p "$work"
out=$work/llama-vs-ours-$shapes
rm -rf "$out"
mkdir -p "$out"

bench_blas_core "$build"

# ---- llama.cpp from PyPI's llama-cpp-python sdist ---------------------------------
src=$work/llama-cpp-python-$llama_version
llama_build=$src/build-native
if [ ! -x "$llama_build/bin/llama-bench" ]; then
  if [ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]; then
    echo "fetching llama-cpp-python $llama_version (sdist) from PyPI ..." >&2
    python3 - "$llama_version" "$work" <<'PY'
import hashlib, json, sys, tarfile, urllib.parse, urllib.request
version, work = sys.argv[1], sys.argv[2]
index = "https://pypi.org/pypi/llama-cpp-python/json"
meta = json.load(urllib.request.urlopen(index, timeout=120))
files = meta["releases"].get(version)
if not files:
    sys.exit(f"llama-cpp-python {version} is not on PyPI")
sdist = [u for u in files if u["packagetype"] == "sdist"][0]
data = urllib.request.urlopen(urllib.parse.urljoin(index, sdist["url"]), timeout=900).read()
if hashlib.sha256(data).hexdigest() != sdist["digests"]["sha256"]:
    sys.exit(f"{sdist['filename']}: sha256 differs from PyPI's")
path = f"{work}/{sdist['filename']}"
open(path, "wb").write(data)
with tarfile.open(path) as tar:
    top = tar.getnames()[0].split("/")[0]
    try:
        tar.extractall(work, filter="data")
    except TypeError:  # a Python without extraction filters (before 3.11.4)
        tar.extractall(work)
import os
os.replace(f"{work}/{top}", f"{work}/llama-cpp-python-{version}")
os.remove(path)
PY
  fi
  echo "building llama.cpp (native CPU flags, llama-bench only) ..." >&2
  cmake -S "$src/vendor/llama.cpp" -B "$llama_build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF >"$work/llama-cmake.log" 2>&1 ||
    { tail -20 "$work/llama-cmake.log" >&2; exit 1; }
  cmake --build "$llama_build" --target llama-bench -j "$(nproc)" >"$work/llama-build.log" 2>&1 ||
    { tail -20 "$work/llama-build.log" >&2; exit 1; }
fi
llama_bench=$llama_build/bin/llama-bench
llama_commit=$(sed -n 's/.*LLAMA_COMMIT = "\(.*\)".*/\1/p' "$llama_build/common/build-info.cpp" 2>/dev/null | head -1)

# ---- checkpoints: ours (safetensors) and the same as GGUF -------------------------
tag=$(echo "$shapes" | tr -d .b)
for d in $dtypes; do
  ckpt=$work/qwen$tag-shapes-$d
  if [ ! -f "$ckpt/model.safetensors" ] || [ "$(($(wc -c <"$ckpt/prompt.i32") / 4))" != "$prompt" ]; then
    echo "building the random $d checkpoint in $ckpt ..." >&2
    python3 bench/make_bench_checkpoint.py "$ckpt" "$prompt" --dtype "$d" --shapes "$shapes"
    rm -f "$ckpt/model.gguf"
  fi
  # The conversion reads the tokenizer (the Qwen2 BPE the checkpoint's
  # vocabulary is sized for); llama-bench never tokenizes text.
  cp data/tokenizer/qwen/tokenizer.json data/tokenizer/qwen/tokenizer_config.json "$ckpt/"
  if [ ! -f "$ckpt/model.gguf" ]; then
    echo "converting $ckpt to GGUF ($d) ..." >&2
    python3 "$src/vendor/llama.cpp/convert_hf_to_gguf.py" "$ckpt" --outtype "$d" \
      --outfile "$ckpt/model.gguf.tmp" >"$work/convert-$d.log" 2>&1 ||
      { tail -20 "$work/convert-$d.log" >&2; exit 1; }
    mv "$ckpt/model.gguf.tmp" "$ckpt/model.gguf"
  fi
done

# ---- the runs -----------------------------------------------------------------------
echo "measuring limits ..." >&2
"$bench" limits --threads "$threads" >"$out/limits.txt"
# One engine's run, then the other's at once (decode: one context depth at
# a time), ours first in odd rounds and llama.cpp first in even ones, so
# that each pair is seconds apart and neither engine always goes first.
ours_prefill() {
  echo "round $r/$rounds, $d: ours, prefill ..." >&2
  "$bench" run "$ckpt" "$ckpt/prompt.i32" --decode 0 --capture-steps 0 --prefill-capture \
    --warmup --threads "$threads" >"$out/ours-prefill-$d-$r.txt"
}
llama_prefill() {
  echo "round $r/$rounds, $d: llama.cpp, prefill ..." >&2
  "$llama_bench" -m "$ckpt/model.gguf" -t "$threads" -p "$prompt" -n 0 -fa 0,1 -r 1 -o jsonl \
    >"$out/llama-prefill-$d-$r.jsonl" 2>>"$out/llama.err"
}
ours_decode() {
  echo "round $r/$rounds, $d: ours, decode at depth $depth ..." >&2
  "$bench" depth "$ckpt" --depths "$depth" --steps "$decode" --warmup --threads "$threads" \
    >"$out/ours-decode-$d-$r-$depth.txt" 2>/dev/null
}
# Ours again with a read stream of a step's bytes just before each step
# (depth --paired): each step against the memory's rate of that moment.
# A run of its own, so that the pair above is the engines' plain decode.
ours_paired() {
  echo "round $r/$rounds, $d: ours, decode at depth $depth paired with a read stream ..." >&2
  "$bench" depth "$ckpt" --depths "$depth" --steps "$decode" --warmup --threads "$threads" \
    --paired >"$out/ours-paired-$d-$r-$depth.txt" 2>/dev/null
}
llama_decode() {
  echo "round $r/$rounds, $d: llama.cpp, decode at depth $depth ..." >&2
  "$llama_bench" -m "$ckpt/model.gguf" -t "$threads" -p 0 -n "$decode" -d "$depth" -fa 0,1 \
    -r 1 -o jsonl >"$out/llama-decode-$d-$r-$depth.jsonl" 2>>"$out/llama.err"
}
: >"$out/llama.err"
r=1
while [ "$r" -le "$rounds" ]; do
  for d in $dtypes; do
    ckpt=$work/qwen$tag-shapes-$d
    if [ $((r % 2)) -eq 1 ]; then ours_prefill; llama_prefill; else llama_prefill; ours_prefill; fi
    if grep -q '^isa avx512' "$out/ours-prefill-$d-$r.txt"; then
      other=own
      grep -q '^prompt_gemm own' "$out/ours-prefill-$d-$r.txt" && other=blas
      echo "round $r/$rounds, $d: ours with MEMDECAY_CPU_GEMM=$other ..." >&2
      MEMDECAY_CPU_GEMM=$other "$bench" run "$ckpt" "$ckpt/prompt.i32" --decode 0 --capture-steps 0 \
        --prefill-capture --warmup --threads "$threads" >"$out/ours-othergemm-$d-$r.txt"
    fi
    if [ "$d" = bf16 ] && grep -q '^bf16_dot_peak_gflops' "$out/limits.txt"; then
      echo "round $r/$rounds, $d: ours with --bf16-gemm ..." >&2
      "$bench" run "$ckpt" "$ckpt/prompt.i32" --decode 0 --capture-steps 0 --prefill-capture \
        --warmup --bf16-gemm --threads "$threads" >"$out/ours-bf16gemm-$d-$r.txt"
    fi
    for depth in 0 "$prompt"; do
      "$bench" bandwidth --threads "$threads" >"$out/bandwidth-$d-$r-$depth.txt"
      if [ $((r % 2)) -eq 1 ]; then ours_decode; llama_decode; else llama_decode; ours_decode; fi
      ours_paired
    done
  done
  r=$((r + 1))
done
"$bench" limits --threads "$threads" >"$out/limits-after.txt"

bench_cpu_line
python3 - "$out" "$rounds" "$dtypes" "$prompt" "$shapes" "$llama_version" "$llama_commit" <<'PY'
import glob, json, os, statistics, sys

out, rounds, dtypes, prompt, shapes, version, commit = sys.argv[1:8]
rounds, prompt, dtypes = int(rounds), int(prompt), dtypes.split()

sys.path.insert(0, "bench")
from bench_output import bandwidth, better_limits, depth_rows, keyvals

lim = better_limits(f"{out}/limits.txt", f"{out}/limits-after.txt",
                    *sorted(glob.glob(f"{out}/bandwidth-*.txt")))
peak = float(lim["fma_peak_gflops"])
bw = bandwidth(lim)
print(f"llama.cpp: llama-cpp-python {version} sdist" + (f", llama.cpp {commit}" if commit else "") +
      f", GGML_NATIVE; OpenBLAS core {lim['blas_core']}; threads {lim['threads']}; "
      f"OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}")
print(f"limits: FMA peak {peak:.1f} GFLOP/s ({lim['fma_isa']}, all threads); bandwidth {bw:.1f} GB/s "
      f"(triad {float(lim['triad_gbs']):.1f}, read {float(lim['read_gbs']):.1f}, "
      f"f32 sgemv {float(lim['sgemv_gbs']):.1f}); "
      f"sgemm {float(lim['sgemm_gflops']):.1f} GFLOP/s on OpenBLAS {lim['blas_core']}")
print(f"shapes: Qwen2.5-{shapes.upper()}; {rounds} rounds alternating ours and llama.cpp, best of each "
      f"(the verdicts); 'rounds:' each round's own ratio, its two engines' runs back to back, ours first "
      f"in odd rounds (a median far from the best-of ratio says the machine's speed moved)")
verdict = lambda ok: "met" if ok else "MISSED"

def llama_best(path_glob, select):
    best = {}
    for path in glob.glob(path_glob):
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            key = select(row)
            if key is None:
                continue
            fa = int(row.get("flash_attn", 0))
            ts = float(row["avg_ts"])
            if ts > best.get(key, {}).get(fa, 0.0):
                best.setdefault(key, {})[fa] = ts
    return best

def llama_round(path, select):
    """The better fa setting's rate per key, in one round's file."""
    got = llama_best(path, select)
    return {key: max(by_fa.values()) for key, by_fa in got.items()}

def rounds_text(ratios):
    """'rounds: 1.021x 0.987x (median 1.004x)' for the per-round ratios."""
    ratios = [x for x in ratios if x == x]  # rounds with both engines' figures
    if not ratios:
        return "rounds: -"
    return ("rounds: " + " ".join(f"{x:.3f}x" for x in ratios)
            + f" (median {statistics.median(ratios):.3f}x)")

pp = lambda row: "pp" if int(row["n_prompt"]) > 0 else None
tg = lambda row: int(row.get("n_depth", 0)) if int(row["n_gen"]) > 0 else None

for d in dtypes:
    print(f"\n{d.upper()}:")
    # prefill
    runs = [keyvals(p) for p in sorted(glob.glob(f"{out}/ours-prefill-{d}-*.txt"))]
    ours = max(float(r["prompt_tokens"]) / float(r["prefill_s"]) for r in runs)
    r0 = runs[0]
    flops = 2 * float(r0["layer_params"]) + float(r0["attn_flops_prefill"]) / float(r0["prompt_tokens"])
    ll = llama_best(f"{out}/llama-prefill-{d}-*.jsonl", pp).get("pp", {})
    llb = max(ll.values()) if ll else float("nan")
    fa_text = ", ".join(f"fa {k}: {v:.1f}" for k, v in sorted(ll.items()))
    ratio = ours / llb
    share = ours * flops / 1e9 / peak
    print(f"  prefill {prompt} tokens, capture on: ours {ours:.1f} tok/s, llama.cpp {llb:.1f} tok/s ({fa_text}) "
          f"-> {ratio:.3f}x (target >= 1.5: {verdict(ratio >= 1.5)}); kernels {r0['isa']}, "
          f"prompt gemm {r0.get('prompt_gemm', '?')}")
    per_round = []
    for r in range(1, rounds + 1):
        mine = keyvals(f"{out}/ours-prefill-{d}-{r}.txt")
        theirs = llama_round(f"{out}/llama-prefill-{d}-{r}.jsonl", pp).get("pp", float("nan"))
        per_round.append(float(mine["prompt_tokens"]) / float(mine["prefill_s"]) / theirs)
    print(f"    {rounds_text(per_round)}")
    print(f"    {ours * flops / 1e9:.1f} GFLOP/s ({flops / 1e6:.0f} MFLOP per token) = {share:.3f} of the FMA peak "
          f"(target >= 0.6: {verdict(share >= 0.6)}); {ours * flops / 1e9 / float(lim['sgemm_gflops']):.2f} of sgemm")
    other_runs = [keyvals(p) for p in sorted(glob.glob(f"{out}/ours-othergemm-{d}-*.txt"))]
    if other_runs:
        other = max(float(r["prompt_tokens"]) / float(r["prefill_s"]) for r in other_runs)
        name = other_runs[0].get("prompt_gemm", "?").strip()
        who = {"own": "our GEMM", "blas": "OpenBLAS"}
        default = r0.get("prompt_gemm", "?").strip()
        print(f"  prefill with {who.get(name, name)} on the avx512 path (MEMDECAY_CPU_GEMM={name}): "
              f"ours {other:.1f} tok/s -> {other / llb:.3f}x llama.cpp (target >= 1.5: "
              f"{verdict(other / llb >= 1.5)}); {other * flops / 1e9 / peak:.3f} of the FMA peak; "
              f"{other / ours:.3f}x the default ({who.get(default, default)})")
    fast_runs = [keyvals(p) for p in sorted(glob.glob(f"{out}/ours-bf16gemm-{d}-*.txt"))]
    if fast_runs:
        fast = max(float(r["prompt_tokens"]) / float(r["prefill_s"]) for r in fast_runs)
        dot = float(lim["bf16_dot_peak_gflops"])
        print(f"  prefill with --bf16-gemm (activations rounded to BF16): ours {fast:.1f} tok/s -> "
              f"{fast / llb:.3f}x llama.cpp (target >= 1.5: {verdict(fast / llb >= 1.5)})")
        print(f"    {fast * flops / 1e9:.1f} GFLOP/s = {fast * flops / 1e9 / dot:.3f} of the BF16 dot-product "
              f"peak {dot:.1f} (vdpbf16ps), {fast * flops / 1e9 / peak:.3f} of the FMA peak; "
              f"the product alone {float(lim['bf16_gemm_gflops']):.1f} GFLOP/s")
    # decode
    # One dict per round: depth -> its row.
    rows = [{depth: depth_rows(f"{out}/ours-decode-{d}-{r}-{depth}.txt")[0] for depth in (0, prompt)}
            for r in range(1, rounds + 1)]
    read_bytes = float(keyvals(glob.glob(f"{out}/ours-prefill-{d}-*.txt")[0])["decode_read_bytes"])
    ll = llama_best(f"{out}/llama-decode-{d}-*.jsonl", tg)
    for depth in (0, prompt):
        best_on = max((r[depth]["steps"] / 2) / r[depth]["on_s"] for r in rows)
        best_off = max((r[depth]["steps"] / 2) / r[depth]["off_s"] for r in rows)
        kv = rows[0][depth]["kv_read_bytes"]
        limit = bw * 1e9 / (read_bytes + kv)
        lld = ll.get(depth, {})
        llb = max(lld.values()) if lld else float("nan")
        fa_text = ", ".join(f"fa {k}: {v:.2f}" for k, v in sorted(lld.items()))
        ratio = best_on / llb
        where = "from an empty cache" if depth == 0 else f"after {depth} tokens"
        print(f"  decode {where}, capture on: ours {best_on:.2f} tok/s (off {best_off:.2f}), llama.cpp "
              f"{llb:.2f} tok/s ({fa_text}) -> {ratio:.3f}x (target >= 1.0: {verdict(ratio >= 1.0)})")
        per_round, of_near = [], []
        for r in range(1, rounds + 1):
            mine = rows[r - 1][depth]
            theirs = llama_round(f"{out}/llama-decode-{d}-{r}-{depth}.jsonl", tg).get(depth, float("nan"))
            per_round.append((mine["steps"] / 2) / mine["on_s"] / theirs)
            near_bw = bandwidth(keyvals(f"{out}/bandwidth-{d}-{r}-{depth}.txt"))
            of_near.append((mine["steps"] / 2) / mine["on_s"] * (read_bytes + kv) / 1e9 / near_bw)
        print(f"    {rounds_text(per_round)}")
        print(f"    limit {limit:.2f} tok/s ({(read_bytes + kv) / 1e6:.0f} MB read per step) -> "
              f"{best_on / limit:.3f} of the bandwidth limit (target >= 0.85: {verdict(best_on / limit >= 0.85)})")
        print("    rounds against the bandwidth read just before each: " + " ".join(f"{x:.3f}" for x in of_near))
        paired = [depth_rows(f"{out}/ours-paired-{d}-{r}-{depth}.txt")[0]["paired_on"]
                  for r in range(1, rounds + 1)]
        mid = statistics.median(paired)
        print(f"    each step against a read stream of its bytes just before it (median over the steps): "
              f"rounds {' '.join(f'{x:.3f}' for x in paired)}; median {mid:.3f} (target >= 0.85: "
              f"{verdict(mid >= 0.85)})")
PY
