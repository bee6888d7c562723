#!/bin/sh
# Formats a man page with GROFF (-man -ww -z -Tutf8) and fails on a
# non-zero exit or any output (a warning).
#   manpage_clean.sh GROFF PAGE
set -eu
groff=$1 page=$2
out=$("$groff" -man -ww -z -Tutf8 "$page" 2>&1) && [ -z "$out" ] || { echo "$out"; exit 1; }
