#!/bin/sh
# The bound on OpenMP's spinning (memdecay-calibrate(1), ENVIRONMENT), seen
# through `devices`: with none of OMP_WAIT_POLICY, GOMP_SPINCOUNT and
# KMP_BLOCKTIME set, the program sets GOMP_SPINCOUNT=1000 and
# KMP_BLOCKTIME=1 and executes itself again (the line can only say "set by"
# from the second process); a user's setting is kept as it is; the marker
# MD_OMP_WAIT_FROM alone stops a second execution.
#   omp_wait_cli.sh PROGRAM
set -u
program=$1
failed=0
check() {  # PATTERN ENV...
  pattern=$1
  shift
  line=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u KMP_BLOCKTIME -u MD_OMP_WAIT_FROM "$@" \
         "$program" devices | grep '^openmp: ')
  echo "$*: $line"
  printf '%s\n' "$line" | grep -Eq "$pattern" || { echo "FAIL: $*: expected /$pattern/" >&2; failed=1; }
}
check '^openmp: waiting threads spin 1000 rounds .*1 ms .*\(set by memdecay-calibrate: OMP_WAIT_POLICY, GOMP_SPINCOUNT and KMP_BLOCKTIME were unset\)$'
check '^openmp: waiting as the environment says \(OMP_WAIT_POLICY=passive\)$' OMP_WAIT_POLICY=passive
check '^openmp: waiting as the environment says \(GOMP_SPINCOUNT=7\)$' GOMP_SPINCOUNT=7
check '^openmp: waiting as the environment says \(OMP_WAIT_POLICY=active, KMP_BLOCKTIME=0\)$' \
  OMP_WAIT_POLICY=active KMP_BLOCKTIME=0
check "^openmp: the runtime's default waiting" MD_OMP_WAIT_FROM=someone
exit $failed
