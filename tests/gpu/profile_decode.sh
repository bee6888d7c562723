#!/bin/sh
# Where a decode step's GPU time goes: Nsight Compute (ncu) times every
# kernel of a few recorded decode steps (graph nodes profiled one by one)
# of gpu_bench on the 1.5B-shaped checkpoint, and this prints the time per
# kernel name summed over one step, with the bytes a step must read per
# kernel kind where that is known (the weights). Needs ncu with access to
# the GPU's counters (not available under every container runtime).
#
#   tests/gpu/profile_decode.sh BUILD_DIR CHECKPOINT_DIR [OUT_DIR]
#
# BUILD_DIR holds tests/gpu/gpu_bench (a build or an unpacked bundle's
# build/); CHECKPOINT_DIR is make_checkpoint's (check.sh's work directory
# has one); OUT_DIR (default .) receives ncu.csv and profile.txt.
set -eu
build=$1 ckpt=$2 out=${3:-.}
command -v ncu >/dev/null || { echo "profile_decode.sh: ncu not found" >&2; exit 1; }
steps=3
# --decode S runs S greedy, S captured and S teacher-forced steps after
# prefills; the kernels named below are those of decode steps (and the
# prefills' last-row logits, a few GEMVs, which the per-step average
# divides away). --clock-control none: the GPU's clocks as it runs.
ncu --clock-control none --graph-profiling node --metrics gpu__time_duration.sum --csv \
  -k 'regex:gemv|attn_decode|argmax|embed' \
  "$build/tests/gpu/gpu_bench" run "$ckpt" --prompt 2048 --decode "$steps" >"$out/ncu.csv" 2>"$out/ncu.err" || {
  tail -5 "$out/ncu.err" >&2
  exit 1
}
python3 - "$out/ncu.csv" "$steps" <<'PY' | tee "$out/profile.txt"
import csv, io, sys
from collections import defaultdict
text = open(sys.argv[1]).read()
start = text.find('"ID"')
rows = list(csv.DictReader(io.StringIO(text[start:])))
total, count = defaultdict(float), defaultdict(int)
for r in rows:
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    value = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "ns")
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[unit]
    name = f'{r["Kernel Name"].split("(")[0]} grid {r.get("Grid Size", "?")}'

    total[name] += value * scale
    count[name] += 1
steps = 3 * int(sys.argv[2])  # greedy, captured and teacher-forced steps
print(f"kernel time per decode step (ncu, {len(rows)} kernels profiled, averaged over {steps} steps):")
for name in sorted(total, key=total.get, reverse=True):
    print(f"  {name:56s} {total[name] / steps:9.1f} us  ({count[name] / steps:.1f} launches a step, "
          f"{total[name] / max(count[name], 1):.2f} us each)")
print(f"  {'sum':56s} {sum(total.values()) / steps:9.1f} us")
print("(ncu runs each kernel alone with its caches flushed: times are upper bounds of the kernels "
      "in a replayed step)")
PY
