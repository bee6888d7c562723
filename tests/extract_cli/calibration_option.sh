#!/bin/sh
# extract --calibration FILE writes the sidecar there, and not beside the
# events.
#   calibration_option.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK -
set -eu
p=$1 run=$2 o=$3
shift 5
"$p" extract "$run" -o "$o/named.csv" --calibration "$o/named.json" -q
test -f "$o/named.json"
test ! -e "$o/named.calibration.json"
