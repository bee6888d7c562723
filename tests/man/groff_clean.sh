#!/bin/sh
# Renders a man page with groff's warnings on and fails on any diagnostic.
#   groff_clean.sh PAGE
set -u
out=$(groff -man -ww -z "$1" 2>&1)
status=$?
if [ $status -ne 0 ] || [ -n "$out" ]; then
  echo "FAIL: groff -man -ww -z $1 (exit $status):" >&2
  echo "$out" >&2
  exit 1
fi
