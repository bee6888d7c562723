#!/bin/sh
# SIGTERM (what scancel sends) while an output is being written: the
# process dies of the signal and leaves no temporary ".NAME.XXXXXX" beside
# the output, and no output. `extract` holds its events file's temporary
# for its whole pass over the run; the signal is sent once that temporary
# is seen (up to 5 tries, should a pass end before it is seen).
#
#   sigterm.sh PROGRAM MODEL TRACES WORK
. "$(dirname "$0")/setup.sh"
"$program" collect --model "$model" --traces "$traces" --out run -q --reproducible ||
  fail "the setup collection failed"
caught=0 try=0
while [ "$caught" = 0 ] && [ "$try" -lt 5 ]; do
  try=$((try + 1))
  rm -f e.csv e.calibration.json .e.csv.* .e.calibration.json.*
  "$program" extract run -o e.csv -q 2>/dev/null &
  pid=$!
  i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 2000 ]; do
    if ls .e.csv.* >/dev/null 2>&1; then
      kill -TERM "$pid" && caught=1
      break
    fi
    i=$((i + 1))
  done
  wait "$pid"
  status=$?
done
[ "$caught" = 1 ] || fail "the temporary was never seen in 5 passes"
[ "$status" = 143 ] || fail "exit status $status, expected 143 (killed by SIGTERM)"
leftovers=$(ls -A | grep '^\.e\.' || true)
[ -z "$leftovers" ] || fail "temporaries left behind: $leftovers"
[ ! -e e.csv ] || fail "a partial e.csv was written"
echo "sigterm: killed after $try pass(es), nothing left behind"
