#!/bin/sh
# eval --resume: killed (kill -9) after two finished episodes, an eval
# continued with --resume writes the bytes an uninterrupted --reproducible
# eval writes, and removes its record; a record whose last line a kill cut
# short is read without that line; an existing record without --resume,
# and a resume with other settings, are refused (exit 2) and keep it.
#
#   resume.sh PROGRAM MODEL TRACES CONFIG WORK
set -u
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
program=$(absolute "$1") model=$(absolute "$2") traces=$(absolute "$3") config=$(absolute "$4")
work=$5
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 99
# eval_ ARGS: the evaluation (exec_eval: the same, replacing the shell, so
# that a background one's $! is the program's own pid).
exec_eval() {
  exec "$program" eval --model "$model" --traces "$traces" --config "$config" --max-episodes 4 \
    --policies full,memdecay,h2o --budget 0.25 --threads 2 --reproducible -q "$@"
}
eval_() { (exec_eval "$@"); }
eval_ -o reference.json || fail "the uninterrupted eval failed"
[ ! -e reference.json.record ] || fail "a finished eval left its record"

# Killed once two episodes are in the record (its header is line 1).
(exec_eval -o resumed.json) &
pid=$!
i=0
until [ -s resumed.json.record ] && [ "$(wc -l <resumed.json.record)" -ge 3 ]; do
  kill -0 "$pid" 2>/dev/null || fail "the eval ended before two episodes were recorded"
  i=$((i + 1)); [ "$i" -lt 6000 ] || fail "no episode recorded in 300 s"
  sleep 0.05
done
kill -9 "$pid"
wait "$pid" 2>/dev/null
[ ! -e resumed.json ] || fail "a killed eval wrote its results"
cp resumed.json.record saved.record || exit 99

eval_ -o resumed.json >out.txt 2>err.txt
[ $? = 2 ] && grep -q 'add --resume to continue it' err.txt || fail "no --resume: not refused ($(cat err.txt))"
eval_ -o resumed.json --resume --seed 7 >out.txt 2>err.txt
[ $? = 2 ] && grep -q 'had other inputs or settings' err.txt || fail "other settings: not refused ($(cat err.txt))"
cmp -s resumed.json.record saved.record || fail "a refused eval changed the record"

eval_ -o resumed.json --resume || fail "the resumed eval failed"
cmp reference.json resumed.json || fail "resumed results differ from uninterrupted ones"
[ ! -e resumed.json.record ] || fail "the resumed eval left its record"

# A last line cut by the kill: dropped, the episode run again.
cp saved.record cut.json.record && printf '{"episode": 2, "id": "x", "ru' >>cut.json.record || exit 99
eval_ -o cut.json --resume || fail "resuming a cut record failed"
cmp reference.json cut.json || fail "results after a cut record differ"
echo "resume: killed and resumed, byte-identical results"
