#!/bin/sh
# Collects a first, short run into SCRATCH/run (with the model that
# with_model.sh put in SCRATCH/model), then runs the check command: the
# test refuses a second collect into the same directory and checks that
# run.json and manifest.csv are unchanged.
#   existing_run.sh MEMDECAY_CALIBRATE SCRATCH TRACES.jsonl CHECK_COMMAND [ARGS...]
set -eu
p=$1 scratch=$2 traces=$3
shift 3
"$p" collect --quiet --model "$scratch/model" --traces "$traces" --out "$scratch/run" --max-steps 2 --max-episodes 1
exec "$@"
