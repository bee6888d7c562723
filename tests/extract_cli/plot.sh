#!/bin/sh
# extract --plot writes the figure (survival panel and attention panel) as
# an SVG.
#   plot.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK -
set -eu
p=$1 run=$2 o=$3
shift 5
"$p" extract "$run" -o "$o/plot.csv" -q --plot "$o/small.svg"
grep -q "<svg" "$o/small.svg"
