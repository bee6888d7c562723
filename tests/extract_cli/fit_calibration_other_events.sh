#!/bin/sh
# fit --calibration with events that are not the calibration's (EVENTS.csv,
# not the small run's): refused, which the test checks from fit's exit
# status and stderr.
#   fit_calibration_other_events.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK EVENTS.csv
set -eu
p=$1 run=$2 o=$3 f=$5
shift 5
# last-use at tau 1: the sidecar's row counts the expected message names
"$p" extract "$run" -o "$o/oe.csv" -q --estimand last-use --tau 1
exec "$p" fit "$f" --calibration "$o/oe.calibration.json" -o "$o/oe.json"
