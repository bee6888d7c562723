#!/bin/sh
# Makes a model directory for the collect tests: the checkpoint files of
# tests/model/fixtures/CHECKPOINT linked, and a tokenizer.json (the tiny
# tokenizer of tests/collect/fixtures, or TOKENIZER, or none), then runs
# the command. SCRATCH is emptied first; the model lands in SCRATCH/model.
#   with_model.sh CHECKPOINT SCRATCH [--tokenizer FILE | --no-tokenizer]
#                 [--weights-of CHECKPOINT2] -- COMMAND [ARGS...]
# --weights-of links model.safetensors of another checkpoint (weights that
# disagree with config.json).
set -u
root=${MD_SOURCE_ROOT:?}
checkpoint=$1
scratch=$2
shift 2
tokenizer=$root/tests/collect/fixtures/tokenizer.json
weights=$checkpoint
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --tokenizer) tokenizer=$2; shift 2 ;;
    --no-tokenizer) tokenizer=; shift ;;
    --weights-of) weights=$2; shift 2 ;;
    *) echo "with_model.sh: unknown option $1" >&2; exit 99 ;;
  esac
done
[ $# -gt 0 ] && shift
rm -rf "$scratch"
mkdir -p "$scratch/model" || exit 99
ln -s "$root/tests/model/fixtures/$checkpoint/config.json" "$scratch/model/config.json" || exit 99
ln -s "$root/tests/model/fixtures/$weights/model.safetensors" "$scratch/model/model.safetensors" || exit 99
if [ -n "$tokenizer" ]; then cp "$tokenizer" "$scratch/model/tokenizer.json" || exit 99; fi
exec "$@"
