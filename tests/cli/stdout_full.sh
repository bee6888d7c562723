#!/bin/sh
# Standard output that cannot be written (/dev/full) fails the run with
# exit 3 and a message, whatever the command's own verdict: check (which
# would exit 0), devices, tokenize and --help.
#
#   stdout_full.sh PROGRAM CONFIG MODEL
set -u
program=$1 config=$2 model=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -w /dev/full ] || fail "needs /dev/full"
err=$(mktemp) || exit 99
trap 'rm -f "$err"' EXIT
full() {
  name=$1
  shift
  "$program" "$@" >/dev/full 2>"$err"
  status=$?
  [ "$status" = 3 ] || { cat "$err" >&2; fail "$name: exit $status, expected 3"; }
  grep -q 'cannot write standard output' "$err" || { cat "$err" >&2; fail "$name: message"; }
  echo "ok $name"
}
full check check "$config" --golden "$config"
full devices devices --device cpu
echo 'hello' | full tokenize tokenize --model "$model"
full help --help
echo "stdout_full: all passed"
