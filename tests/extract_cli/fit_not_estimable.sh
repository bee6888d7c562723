#!/bin/sh
# Nothing to normalise (every region pinned by the options): kappa and
# alpha are null in the sidecar and in the config that fit --calibration
# writes, each with its warning.
#   fit_not_estimable.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK - [PIN OPTIONS...]
set -eu
p=$1 run=$2 o=$3 jc=$4
shift 5
"$p" extract "$run" -o "$o/pin.csv" -q "$@"
"$jc" "$o/pin.calibration.json" policy.alpha=null policy.attention_norm.kappa=null \
  "warnings[*]=\"policy: alpha cannot be estimated: no unpinned region has an observed token\""
"$p" fit "$o/pin.csv" --calibration "$o/pin.calibration.json" -q --reproducible -o "$o/pin.json" "$@"
"$jc" "$o/pin.json" policy.alpha=null policy.attention_norm.kappa=null \
  "warnings[*]=\"policy: written as null (not estimable from these data): alpha, attention_norm.kappa\""
grep -q "policy: attention_norm.kappa cannot be estimated" "$o/pin.json"
