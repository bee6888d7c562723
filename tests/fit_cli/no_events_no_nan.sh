#!/bin/sh
# A region without events: the config written to stdout holds no NaN or
# Inf anywhere (the estimates are null instead).
#   no_events_no_nan.sh MEMDECAY_CALIBRATE EVENTS.csv
set -eu
p=$1 events=$2
"$p" fit --quiet --reproducible "$events" | grep -Eiq "nan|inf" && exit 1 || exit 0
