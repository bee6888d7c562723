#!/bin/sh
# No output may destroy an input (io/files/output_guard.h): each command
# given an output that is one of its inputs (by name, through a symbolic
# link, as a hard link), inside an input directory (a run, the model), or
# the same file as another output, exits 2 before any work with a message
# naming both, and every input is byte-identical afterwards. An output in a
# missing directory is refused before any episode runs.
#
#   output_guard.sh PROGRAM MODEL TRACES WORK
. "$(dirname "$0")/setup.sh"
cp "$traces" tr.jsonl || exit 99

# A small run directory, events and a config to feed the commands.
"$program" run --model "$model" --traces tr.jsonl --max-episodes 2 --workdir wd -o cfg.json \
  --reproducible -q 2>/dev/null || fail "the setup run failed"
cp wd/events.csv ev.csv && cp wd/events.calibration.json ev.calibration.json || exit 99
find . -type f | sort | xargs sha256sum >"$work.sums" || exit 99

# refused CASE PATTERN COMMAND...: exit 2, the message matches, and the
# command took under 20 s (refused before any model work).
refused() {
  name=$1 pattern=$2
  shift 2
  start=$(date +%s)
  "$@" >out.txt 2>err.txt
  status=$?
  took=$(( $(date +%s) - start ))
  [ "$status" = 2 ] || { cat err.txt >&2; fail "$name: exit $status, expected 2"; }
  grep -Eq -e "$pattern" err.txt || { cat err.txt >&2; fail "$name: message"; }
  [ "$took" -lt 20 ] || fail "$name: refused only after ${took}s"
  echo "ok $name: $(cat err.txt)"
}
same='is the same file as the input'
inside='is inside the input'

refused run-o-traces "^memdecay-calibrate: -o tr.jsonl $same --traces tr.jsonl" \
  "$program" run --model "$model" --traces tr.jsonl -o tr.jsonl
refused run-workdir-in-model "^memdecay-calibrate: --workdir .* $inside --model" \
  "$program" run --model "$model" --traces tr.jsonl -o x.json --workdir "$model/wd"
refused eval-o-config "^memdecay-calibrate: -o cfg.json $same --config cfg.json" \
  "$program" eval --model "$model" --traces tr.jsonl --config cfg.json -o cfg.json
ln -s cfg.json link.json || exit 99
refused eval-o-config-symlink "^memdecay-calibrate: -o cfg.json $same --config link.json" \
  "$program" eval --model "$model" --traces tr.jsonl --config link.json -o cfg.json
ln cfg.json hard.json || exit 99
refused eval-o-config-hardlink "^memdecay-calibrate: -o hard.json $same --config cfg.json" \
  "$program" eval --model "$model" --traces tr.jsonl --config cfg.json -o hard.json
refused eval-o-missing-dir "^memdecay-calibrate: -o missing/e.json: its directory does not exist" \
  "$program" eval --model "$model" --traces tr.jsonl --config cfg.json -o missing/e.json
refused eval-o-is-dir "^memdecay-calibrate: -o wd is a directory" \
  "$program" eval --model "$model" --traces tr.jsonl --config cfg.json -o wd
refused fit-o-events "^memdecay-calibrate: -o ev.csv $same events ev.csv" \
  "$program" fit ev.csv -o ev.csv
refused fit-o-calibration "^memdecay-calibrate: -o ev.calibration.json $same --calibration" \
  "$program" fit ev.csv --calibration ev.calibration.json -o ev.calibration.json
refused fit-two-outputs "^memdecay-calibrate: -o c.json and --km-csv c.json are the same file" \
  "$program" fit ev.csv -o c.json --km-csv c.json
refused extract-o-manifest "^memdecay-calibrate: -o wd/run/manifest.csv $inside run directory wd/run" \
  "$program" extract wd/run -o wd/run/manifest.csv
refused extract-calibration-run-json "^memdecay-calibrate: --calibration wd/run/run.json $inside" \
  "$program" extract wd/run -o e.csv --calibration wd/run/run.json
rm -f hard.json link.json
find . -type f ! -name out.txt ! -name err.txt | sort | xargs sha256sum | cmp -s - "$work.sums" ||
  fail "an input changed"

# Standard output and a fresh file beside the inputs are fine.
"$program" fit ev.csv -o - >/dev/null 2>&1 || fail "fit -o - refused"
"$program" fit ev.csv -o fresh.json 2>/dev/null || fail "fit -o fresh.json refused"
echo "output_guard: all passed"
