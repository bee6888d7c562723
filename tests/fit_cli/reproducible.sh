#!/bin/sh
# --reproducible output is byte-identical across runs (config and KM CSV);
# without it the config carries a 'created' timestamp.
#   reproducible.sh MEMDECAY_CALIBRATE EVENTS.csv OUT_PREFIX
set -u
program=$1
events=$2
out=$3
rm -f "$out"-*
for run in 1 2; do
  "$program" fit --quiet --reproducible "$events" -o "$out-$run.json" \
    --km-csv "$out-$run-km.csv" || exit 1
done
fail=0
cmp "$out-1.json" "$out-2.json" || fail=1
cmp "$out-1-km.csv" "$out-2-km.csv" || fail=1
if grep -q '"created"' "$out-1.json"; then echo "FAIL: created with --reproducible" >&2; fail=1; fi
"$program" fit --quiet "$events" -o "$out-stamped.json" || exit 1
if ! grep -Eq '"created": "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"' "$out-stamped.json"; then
  echo "FAIL: no created timestamp without --reproducible" >&2; fail=1
fi
exit $fail
