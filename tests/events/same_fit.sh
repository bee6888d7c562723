#!/bin/sh
# Two events files that hold the same rows must give the same fit: the same
# KM CSV byte for byte, and the same config apart from the source name.
#   same_fit.sh MEMDECAY_CALIBRATE A.csv B.csv OUT_PREFIX
set -u
program=$1
a=$2
b=$3
out=$4
"$program" fit --quiet --reproducible "$a" -o "$out-a.json" --km-csv "$out-a-km.csv" || exit 1
"$program" fit --quiet --reproducible "$b" -o "$out-b.json" --km-csv "$out-b-km.csv" || exit 1
fail=0
cmp "$out-a-km.csv" "$out-b-km.csv" || fail=1
grep -v "$(basename "$a")" "$out-a.json" >"$out-a.strip"
grep -v "$(basename "$b")" "$out-b.json" >"$out-b.strip"
cmp "$out-a.strip" "$out-b.strip" || { diff "$out-a.strip" "$out-b.strip" >&2; fail=1; }
exit $fail
