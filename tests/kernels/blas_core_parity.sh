#!/bin/sh
# The forward pass matches HF transformers, within the parity test's own
# tolerances, on every OpenBLAS core this CPU can run: the start-up switch
# (MEMDECAY_BLAS_CORE in memdecay-calibrate(1)) may pick any of them. The
# cores come from /proc/cpuinfo's flags, never from a guess: AVX-512
# kernels on a CPU without AVX-512 would stop on an illegal instruction.
#   blas_core_parity.sh TEST_BLAS_CORE TEST_QWEN2_FORWARD [ARGS...]
set -u
helper=$1
shift
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
unset MEMDECAY_BLAS_CORE MD_BLAS_CORE_FROM
if [ ! -r /proc/cpuinfo ] || ! grep -q '^flags' /proc/cpuinfo; then
  echo "no /proc/cpuinfo flags: cannot tell which cores this CPU runs"
  exit 77
fi
flags=" $(grep -m1 '^flags' /proc/cpuinfo | sed 's/^[^:]*://') "
has() {
  for f in "$@"; do
    case "$flags" in *" $f "*) ;; *) return 1 ;; esac
  done
}
case "$(uname -m)" in x86_64|i?86) ;; *) echo "not x86: OpenBLAS's x86 cores do not apply"; exit 77 ;; esac
cores=Prescott
has avx && cores="$cores Sandybridge"
has avx2 fma && cores="$cores Haswell Zen"
has avx512f avx512bw avx512vl avx512dq avx512cd && cores="$cores SkylakeX"
echo "cores this CPU runs: $cores"
failed=0
for core in $cores; do
  running=$(OPENBLAS_CORETYPE=$core "$helper" --current-core) || exit 99
  if [ "$(echo "$running" | tr A-Z a-z)" != "$(echo "$core" | tr A-Z a-z)" ]; then
    # A library built without those kernels runs others: nothing new to test.
    echo "$core: this OpenBLAS runs $running instead; skipped"
    continue
  fi
  if OPENBLAS_CORETYPE=$core "$@" >"$tmp/out" 2>&1; then
    echo "$core: $(tail -n 1 "$tmp/out")"
  else
    echo "FAIL: $core: the forward parity test failed:" >&2
    cat "$tmp/out" >&2
    failed=1
  fi
done
exit $failed
