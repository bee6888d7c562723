#!/bin/sh
# Extract twice on the same run with the same options: byte-identical
# events and sidecar (the summary of the first run is on stderr, which the
# test checks).
#   reproducible.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK - [EXTRACT OPTIONS...]
set -eu
p=$1 run=$2 o=$3
shift 5
"$p" extract "$run" -o "$o/r.csv" --reproducible "$@"
cp "$o/r.csv" "$o/r1.csv"
cp "$o/r.calibration.json" "$o/r1.json"
"$p" extract "$run" -o "$o/r.csv" --reproducible -q "$@"
cmp "$o/r.csv" "$o/r1.csv"
cmp "$o/r.calibration.json" "$o/r1.json"
