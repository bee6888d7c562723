#!/bin/sh
# Feeds INPUT (one or more lines) to memdecay-calibrate tokenize on
# standard input, with the given options; the test checks exit status and
# output.
#   tokenize_stdin.sh MEMDECAY_CALIBRATE INPUT [TOKENIZE OPTIONS...]
set -eu
p=$1 input=$2
shift 2
printf "%s\n" "$input" | "$p" tokenize "$@"
