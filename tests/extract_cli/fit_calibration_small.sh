#!/bin/sh
# extract, then fit --calibration, on the small run: every field of the
# config as EXPECTED (data/small-config.txt) says, within 1e-15.
#   fit_calibration_small.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK EXPECTED [EXTRACT OPTIONS...]
set -eu
p=$1 run=$2 o=$3 jc=$4 f=$5
shift 5
"$p" extract "$run" -o "$o/fc.csv" -q --reproducible "$@"
"$p" fit "$o/fc.csv" --calibration "$o/fc.calibration.json" -q --reproducible -o "$o/fc.json"
"$jc" --rtol 1e-15 "$o/fc.json" "@$f"
