#!/bin/sh
# Pinning user in fit but not in extract: a warning, and alpha from this
# config's unpinned regions: median(retrieval 1, scratchpad 1/3) = 2/3.
#   fit_calibration_pinning_differs.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK - [EXTRACT OPTIONS...]
set -eu
p=$1 run=$2 o=$3 jc=$4
shift 5
"$p" extract "$run" -o "$o/fp.csv" -q "$@"
"$p" fit "$o/fp.csv" --calibration "$o/fp.calibration.json" --pin user -q -o "$o/fp.json"
"$jc" "$o/fp.json" policy.alpha=0.66666666666666663 regions.user.base_priority_source=\"pinned\" \
  "warnings[*]=\"policy: attention_norm.kappa was measured with region 'user' unpinned, but this config pins it: run extract with the same pinning to measure kappa for this config\""
