#!/bin/sh
# Runs two commands, the second only when the first succeeded:
#   then.sh COMMAND1 [ARGS...] ';' COMMAND2 [ARGS...]
set -u
first_len=0
for arg in "$@"; do
  [ "$arg" = ";" ] && break
  first_len=$((first_len + 1))
done
[ "$first_len" -lt $# ] || { echo "then.sh: no ';' separator" >&2; exit 99; }
(
  i=0
  for arg in "$@"; do
    i=$((i + 1))
    [ $i -eq 1 ] && set --
    [ $i -le "$first_len" ] && set -- "$@" "$arg"
  done
  exec "$@"
) || exit 1
shift $((first_len + 1))
exec "$@"
