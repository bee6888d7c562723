#!/bin/sh
# --kappa-memory 0: extract takes a second pass over the attention, which
# gives the same kappa (the exact quantile).
#   two_passes.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK - [EXTRACT OPTIONS...]
set -eu
p=$1 run=$2 o=$3 jc=$4
shift 5
"$p" extract "$run" -o "$o/p.csv" -q --kappa-memory 0 "$@"
"$jc" --rtol 1e-15 "$o/p.calibration.json" policy.attention_norm.kappa=0.75 policy.attention_norm.passes=2
