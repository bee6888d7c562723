#!/bin/sh
# fit --km-csv: the header, and one row per region and distinct time, in
# order.
#   km_csv.sh MEMDECAY_CALIBRATE EVENTS.csv KM.csv
set -eu
p=$1 events=$2 km=$3
"$p" fit --quiet "$events" -o /dev/null --km-csv "$km"
head -1 "$km" | grep -qx "region,time,n_risk,n_event,n_censor,surv,std_err,lower,upper"
test "$(cut -d, -f1,2 "$km" | tail -n +2 | tr "\n" " ")" = "system,7.5 system,12 system,30 plan,4 plan,9 scratchpad,2 "
