#!/bin/sh
# fit --plot FIGURE.svg (with --plot-log-time) writes an SVG.
#   plot_svg.sh MEMDECAY_CALIBRATE EVENTS.csv FIGURE.svg
set -eu
p=$1 events=$2 svg=$3
"$p" fit --quiet "$events" -o /dev/null --plot "$svg" --plot-log-time
grep -q "<svg" "$svg"
