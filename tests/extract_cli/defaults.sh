#!/bin/sh
# Extract with its defaults (gap, tau 3, guard 16, beta 0.9, quantile
# 0.95): the sidecar beside the events, a timestamp without --reproducible,
# nothing on stdout or stderr with --quiet.
#   defaults.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK -
set -eu
p=$1 run=$2 o=$3 jc=$4
shift 5
test -z "$("$p" extract "$run" -o "$o/d.csv" --quiet 2>&1)"
"$jc" "$o/d.calibration.json" workload.estimand=\"gap\" workload.tau=3 workload.guard=16 \
  policy.ewma_beta=0.9 policy.attention_norm.quantile=0.95 run.path=\""$run"\" events.path=\""$o/d.csv"\"
grep -q "\"created\": \"20[0-9][0-9]-" "$o/d.calibration.json"
