#!/bin/sh
# A priors file wins over the measured share, and alpha follows it:
# scratchpad 0.2 (tests/config/data/priors_good.json): median(user 1,
# retrieval 1, 0.2) = 1.
#   fit_calibration_priors.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK PRIORS.json [EXTRACT OPTIONS...]
set -eu
p=$1 run=$2 o=$3 jc=$4 f=$5
shift 5
"$p" extract "$run" -o "$o/fq.csv" -q "$@"
"$p" fit "$o/fq.csv" --calibration "$o/fq.calibration.json" --priors "$f" -q -o "$o/fq.json"
"$jc" "$o/fq.json" regions.scratchpad.base_priority=0.2 regions.scratchpad.base_priority_source=\"priors-file\" \
  regions.user.base_priority_source=\"measured\" policy.alpha=1
