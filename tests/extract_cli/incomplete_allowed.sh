#!/bin/sh
# An unfinished collection used with --allow-incomplete: extract succeeds
# and the sidecar says the run was not complete.
#   incomplete_allowed.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK -
set -eu
p=$1 run=$2 o=$3 jc=$4
shift 5
"$p" extract "$run" -o "$o/inc2.csv" -q --allow-incomplete
"$jc" "$o/inc2.calibration.json" run.complete=false "warnings[*]=\"run: the collection is not complete: 2 episodes done\""
