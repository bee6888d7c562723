#!/bin/sh
# check --quiet prints no row that is ok (a config checked against itself
# has only ok rows).
#   quiet_hides_ok_rows.sh MEMDECAY_CALIBRATE GOLDEN.json
set -eu
p=$1 golden=$2
if "$p" check --quiet "$golden" --golden "$golden" | grep -q " ok"; then
  echo "quiet_hides_ok_rows.sh: check --quiet printed an ok row" >&2
  exit 1
fi
