#!/bin/sh
# collect --bf16-gemm on the BF16 checkpoint: on a CPU with AVX-512 BF16 it
# runs and run.json records blas.prompt_products "bf16"; on any other CPU it
# exits 2 (an unavailable device, as the manual's EXIT STATUS has it for
# collect) naming the missing feature and writes no run directory. Which of
# the two must happen is read from /proc/cpuinfo (the kernel's list of the
# CPU's flags, independent of the program's CPUID code).
#   with_model.sh qwen05_heads_bf16 SCRATCH -- bf16_gemm.sh PROGRAM SCRATCH
# (with_model.sh makes SCRATCH/model).
set -u
program=$1
scratch=$2
root=${MD_SOURCE_ROOT:?}
"$program" collect --model "$scratch/model" --traces "$root/tests/collect/data/episodes.jsonl" \
  --out "$scratch/run" --max-steps 4 --bf16-gemm >"$scratch/stdout" 2>"$scratch/stderr"
code=$?
if grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null; then
  if [ $code -ne 0 ]; then
    echo "FAIL: this CPU has avx512_bf16, collect --bf16-gemm exited with $code" >&2
    cat "$scratch/stderr" >&2
    exit 1
  fi
  if ! grep -q '"prompt_products": "bf16"' "$scratch/run/run.json"; then
    echo "FAIL: run.json does not record blas.prompt_products \"bf16\"" >&2
    exit 1
  fi
  echo "collect --bf16-gemm ran; run.json records prompt_products bf16"
else
  if [ $code -ne 2 ] || ! grep -q 'need AVX-512 BF16, which this CPU does not have' "$scratch/stderr"; then
    echo "FAIL: without avx512_bf16, expected exit 2 and the missing feature named; got $code:" >&2
    cat "$scratch/stderr" >&2
    exit 1
  fi
  if [ -e "$scratch/run" ]; then
    echo "FAIL: the refused run left $scratch/run behind" >&2
    exit 1
  fi
  echo "collect --bf16-gemm refused on a CPU without AVX-512 BF16"
fi
