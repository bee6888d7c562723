#!/bin/sh
# MEMDECAY_CPU_KERNELS against what this CPU runs: every path up to the best
# one `devices` reports opens and is the one reported; the paths beyond it
# fail with exit 3 and a message naming the path and the best one.
# Usage: cpu_kernels_cli.sh MEMDECAY_CALIBRATE
set -u
bin=$1
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "cpu_kernels_cli: $*" >&2; exit 1; }
"$bin" devices --device cpu >"$tmp/best" 2>&1 || fail "devices --device cpu failed: $(cat "$tmp/best")"
best=$(sed -n 's/^cpu: \([a-z0-9]*\) kernels, .*/\1/p' "$tmp/best")
[ -n "$best" ] || fail "no kernel path in: $(cat "$tmp/best")"
beyond=false
for path in portable avx2 avx512; do
  MEMDECAY_CPU_KERNELS=$path "$bin" devices --device cpu >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if $beyond; then
    [ "$rc" -eq 3 ] || fail "$path on a CPU whose best is $best: exit $rc, want 3"
    grep -q "cannot run the $path kernels (best here: $best)" "$tmp/err" ||
      fail "$path: message: $(cat "$tmp/err")"
    echo "$path: refused (best here: $best)"
  else
    [ "$rc" -eq 0 ] || fail "$path (best $best): exit $rc: $(cat "$tmp/err")"
    grep -q "^cpu: $path kernels, all cores$" "$tmp/out" || fail "$path: $(cat "$tmp/out")"
    echo "$path: opens"
  fi
  [ "$path" = "$best" ] && beyond=true
done
$beyond || fail "best path '$best' is none of portable, avx2, avx512"
exit 0
