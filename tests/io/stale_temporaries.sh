#!/bin/sh
# A command killed with SIGKILL leaves its output's temporary; the next
# command that writes that output in that directory removes it, and keeps
# a live writer's (io/files/atomic_file.h; memdecay-calibrate(1), SIGNALS).
#
#   stale_temporaries.sh PROGRAM MAKE_RUN_DIR ATOMIC_WRITER WORK
#
# The command is `extract RUN -o WORK/out/events.csv`; the writers are
# ATOMIC_WRITER processes writing WORK/out/events.csv: one killed with -9
# before the extract, one alive during it.
set -u
program=$1 make_run_dir=$2 writer=$3 work=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work/out" || exit 99
out=$work/out/events.csv

# 1. kill -9 mid-write leaves the temporary.
"$writer" "$out" >"$work/dead.path" &
dead_pid=$!
i=0
while [ ! -s "$work/dead.path" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
dead=$(cat "$work/dead.path")
[ -n "$dead" ] || fail "the writer reported no temporary"
kill -9 "$dead_pid"
wait "$dead_pid" 2>/dev/null
[ -f "$dead" ] || fail "kill -9 left no temporary ($dead)"
echo "left by kill -9: $dead"

# 2. A live writer of the same output, and files that are not ours.
"$writer" "$out" >"$work/live.path" &
live_pid=$!
i=0
while [ ! -s "$work/live.path" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
live=$(cat "$work/live.path")
[ -f "$live" ] || { kill -9 "$live_pid"; fail "the live writer's temporary is missing"; }
echo "a live writer's: $live"
: >"$work/out/.events.csv.not-ours" && : >"$work/out/.other.csv.ABCDEF" || exit 99

# 3. The next command writing there.
"$make_run_dir" "$work/run" small -- "$program" extract "$work/run" -o "$out" -q \
  >"$work/extract.log" 2>&1
rc=$?
kill -9 "$live_pid"
wait "$live_pid" 2>/dev/null
[ $rc -eq 0 ] || { cat "$work/extract.log" >&2; fail "extract exited $rc"; }
[ -f "$out" ] || fail "extract wrote no $out"
[ ! -e "$dead" ] || fail "the dead writer's temporary $dead is still there"
[ -f "$live" ] || fail "the live writer's temporary $live was removed"
[ -f "$work/out/.events.csv.not-ours" ] && [ -f "$work/out/.other.csv.ABCDEF" ] ||
  fail "a file that is not a temporary of events.csv was removed"
echo "removed the dead writer's, kept the live writer's and the others"
