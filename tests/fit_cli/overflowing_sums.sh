#!/bin/sh
# Finite times whose sums overflow (two of 1e308; the fit used to loop for
# ever in the Weibull Newton step): fit exits 0 and writes the region's
# estimates as null (the test checks the warning on stderr and the time).
#   overflowing_sums.sh MEMDECAY_CALIBRATE OUT_DIR JSON_CHECK
set -eu
p=$1 dir=$2 jc=$3
printf "region,time,event\nuser,1e308,1\nuser,4.9e-324,1\nuser,1e308,0\n" > "$dir/o.csv"
"$p" fit "$dir/o.csv" --reproducible -o "$dir/o.json"
"$jc" "$dir/o.json" regions.user.lambda=null regions.user.half_life=null regions.user.fit.weibull.shape=null
