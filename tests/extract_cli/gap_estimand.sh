#!/bin/sh
# The gap estimand on the small run (refresh steps in tests/run_dir/README.md):
# e1 tok0 (steps 0, 2): gap 2, then 3 - 2 = 1 censored; tok1 (0): 3
# censored; tok2 (1): 2 censored; tok3 (1): 2 censored; e2 tok0 (0, 1): 1,
# then 1 censored; tok1 (1): 1 censored. Checks region, time and event of
# every row.
#   gap_estimand.sh MEMDECAY_CALIBRATE RUN_DIR OUT_DIR JSON_CHECK - [EXTRACT OPTIONS...]
set -eu
p=$1 run=$2 o=$3
shift 5
"$p" extract "$run" -o "$o/gap.csv" -q "$@" --estimand gap
test "$(cut -d, -f1-3 "$o/gap.csv" | tr "\n" " ")" = "region,time,event system,2,1 system,1,0 user,3,0 user,2,0 scratchpad,2,0 system,1,1 system,1,0 retrieval,1,0 "
