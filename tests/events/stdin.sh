#!/bin/sh
# fit reads the events from standard input when given "-" (the test checks
# the config on stdout).
#   stdin.sh MEMDECAY_CALIBRATE EVENTS.csv
set -eu
p=$1 events=$2
"$p" fit --quiet --reproducible - < "$events"
