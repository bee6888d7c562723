#!/bin/sh
# Makes WRONG.calibration.json from SOURCE.json by one sed expression (which
# must change something), then runs fit --calibration on it; the test
# checks that the field of the wrong kind is refused by name.
#   fit_calibration_wrong_type.sh MEMDECAY_CALIBRATE SED_EXPRESSION SOURCE.json WRONG.calibration.json EVENTS.csv OUT.json
set -eu
p=$1 expr=$2 src=$3 wrong=$4 events=$5 out=$6
sed "$expr" "$src" > "$wrong"
if cmp -s "$src" "$wrong"; then
  echo "fit_calibration_wrong_type.sh: the sed expression changed nothing in $src" >&2
  exit 1
fi
exec "$p" fit "$events" --calibration "$wrong" -o "$out"
