#!/bin/sh
# A second events file disappears while the first is still being read: the
# run must fail cleanly (exit 2, the file named) and create no output.
#   vanish.sh MEMDECAY_CALIBRATE GOOD.csv
set -u
program=$1
good=$2
dir=$(mktemp -d) || exit 99
trap 'rm -rf "$dir"' EXIT
mkfifo "$dir/first.csv" || exit 99
cp "$good" "$dir/second.csv" || exit 99
# The writer holds the FIFO open until the second file is gone, so the
# reader cannot reach it before then.
( exec 3>"$dir/first.csv"; cat "$good" >&3; rm -f "$dir/second.csv"; exec 3>&- ) &
"$program" fit --quiet "$dir/first.csv" "$dir/second.csv" -o "$dir/out.json" 2>"$dir/err"
status=$?
wait
fail=0
if [ $status -ne 2 ]; then echo "FAIL: exit status $status, expected 2" >&2; fail=1; fi
if ! grep -q 'second\.csv: cannot open: No such file or directory' "$dir/err"; then
  echo "FAIL: stderr does not name the vanished file" >&2; fail=1
fi
if [ -e "$dir/out.json" ]; then echo "FAIL: out.json was created" >&2; fail=1; fi
if ls -a "$dir" | grep -Eq '^\.out\.json\.'; then echo "FAIL: temporary file left" >&2; fail=1; fi
[ $fail -ne 0 ] && cat "$dir/err" >&2
exit $fail
