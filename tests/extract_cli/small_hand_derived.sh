#!/bin/sh
# Every number of the hand derivation of tests/run_dir/README.md: extract
# on the small run writes the events byte for byte as EXPECTED_EVENTS.csv,
# and the sidecar field by field as data/small-calibration.txt says.
#   small_hand_derived.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK EXPECTED_EVENTS.csv [EXTRACT OPTIONS...]
set -eu
p=$1 run=$2 o=$3 jc=$4 f=$5
shift 5
data=$(dirname "$0")/data
"$p" extract "$run" -o "$o/hand.csv" --reproducible --quiet "$@"
cmp "$o/hand.csv" "$f"
"$jc" --rtol 1e-15 "$o/hand.calibration.json" "@$data/small-calibration.txt"
