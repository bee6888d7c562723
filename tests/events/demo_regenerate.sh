#!/bin/sh
# The shipped demo events (data/events/demo-events.csv) are byte for byte
# what their committed generator (data/events/gen_events.c) makes with the
# options recorded here.
#   demo_regenerate.sh GEN_EVENTS DEMO_EVENTS.csv
set -eu
gen=$1 demo=$2
"$gen" --episodes 24 --tokens 300 --seed 20240611 | cmp - "$demo"
