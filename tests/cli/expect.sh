#!/bin/sh
# Runs a command and checks how it ended. Used by the CLI tests in meson.
#
#   expect.sh [--exit N] [--stderr REGEX] [--stdout REGEX] [--absent FILE]...
#             [--unchanged FILE]... [--no-temp DIR]... [--remove FILE]...
#             [--copy SRC DST]... [--cd DIR] -- COMMAND [ARGS...]
#
# --exit N        required exit status (default 0)
# --stderr REGEX  extended regex that stderr must match
# --stdout REGEX  extended regex that stdout must match
# --absent FILE   FILE must not exist afterwards (no partial output)
# --unchanged F   F's bytes must be the same before and after (no damage)
# --no-temp DIR   DIR must hold no leftover temporary ".name.XXXXXX" files
# --remove FILE   delete FILE before running (a fresh start for --absent)
# --copy SRC DST  copy SRC to DST before running (an existing output that
#                 --unchanged DST then guards); both happen before --unchanged
#                 takes its snapshot
set -u
want_exit=0
stderr_re=
stdout_re=
absent=
unchanged=
notemp=
while [ $# -gt 0 ]; do
  case "$1" in
    --exit) want_exit=$2; shift 2 ;;
    --stderr) stderr_re=$2; shift 2 ;;
    --stdout) stdout_re=$2; shift 2 ;;
    --absent) absent="$absent
$2"; shift 2 ;;
    --unchanged) unchanged="$unchanged
$2"; shift 2 ;;
    --no-temp) notemp="$notemp
$2"; shift 2 ;;
    --remove) rm -f "$2" || exit 99; shift 2 ;;
    --copy) cp "$2" "$3" || exit 99; chmod u+w "$3" || exit 99; shift 3 ;;
    --cd) cd "$2" || exit 99; shift 2 ;;
    --) shift; break ;;
    *) echo "expect.sh: unknown option $1" >&2; exit 99 ;;
  esac
done
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
echo "$unchanged" | while IFS= read -r f; do
  [ -n "$f" ] && cp "$f" "$tmp/$(echo "$f" | tr / _).before"
done
"$@" >"$tmp/out" 2>"$tmp/err"
got_exit=$?
fail=0
if [ "$got_exit" != "$want_exit" ]; then
  echo "FAIL: exit status $got_exit, expected $want_exit" >&2
  fail=1
fi
if [ -n "$stderr_re" ] && ! grep -Eq -- "$stderr_re" "$tmp/err"; then
  echo "FAIL: stderr does not match /$stderr_re/" >&2
  fail=1
fi
if [ -n "$stdout_re" ] && ! grep -Eq -- "$stdout_re" "$tmp/out"; then
  echo "FAIL: stdout does not match /$stdout_re/" >&2
  fail=1
fi
for f in $absent; do
  if [ -e "$f" ]; then echo "FAIL: $f exists" >&2; fail=1; fi
done
for f in $unchanged; do
  if ! cmp -s "$f" "$tmp/$(echo "$f" | tr / _).before"; then
    echo "FAIL: $f was modified" >&2
    fail=1
  fi
done
for d in $notemp; do
  if ls -a "$d" | grep -Eq '^\..+\.[A-Za-z0-9]{6}$'; then
    echo "FAIL: temporary file left in $d" >&2
    fail=1
  fi
done
if [ $fail -ne 0 ]; then
  echo "--- command: $*" >&2
  echo "--- stdout:" >&2; cat "$tmp/out" >&2
  echo "--- stderr:" >&2; cat "$tmp/err" >&2
fi
exit $fail
