#!/bin/sh
# fit --quiet prints nothing on stderr (stdout, the config, is discarded).
#   quiet_prints_nothing.sh MEMDECAY_CALIBRATE EVENTS.csv
set -eu
p=$1 events=$2
test -z "$("$p" fit --quiet "$events" 2>&1 >/dev/null)"
