#!/bin/sh
# Runs fit, then checks values in the config it wrote with json_check.
#   fit_then_check.sh MEMDECAY_CALIBRATE JSON_CHECK OUT.json [FIT ARGS...] -- [CHECK ARGS...]
set -u
program=$1
json_check=$2
out=$3
shift 3
fit_args=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  fit_args="$fit_args $(printf '%s' "$1" | sed "s/'/'\\\\''/g; s/^/'/; s/\$/'/")"
  shift
done
[ $# -gt 0 ] && shift
rm -f "$out"
eval "\"\$program\" fit --reproducible $fit_args -o \"\$out\"" || exit 1
"$json_check" "$out" "$@"
