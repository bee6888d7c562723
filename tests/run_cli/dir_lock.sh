#!/bin/sh
# One writer per run or work directory (io/files/dir_lock.h), and a work
# directory that is not ours is never written into:
#   - while another process holds a run directory's lock (held here with
#     flock(1) on its .memdecay.lock, as collect holds it), `collect
#     --resume` and `run --resume` are refused at once (exit 2) naming the
#     holder, and the run is unchanged; once it is released they go on;
#   - a finished command leaves no lock file behind;
#   - `run --workdir DIR` refuses a non-empty DIR that is not a work
#     directory of run, and a DIR/run that is not a run directory, writing
#     nothing.
#
#   dir_lock.sh PROGRAM MODEL TRACES WORK
. "$(dirname "$0")/setup.sh"
command -v flock >/dev/null || fail "needs flock(1) (util-linux)"

"$program" run --model "$model" --traces "$traces" --max-episodes 1 --workdir wd -o cfg.json \
  --reproducible -q 2>/dev/null || fail "the setup run failed"
[ ! -e wd/.memdecay.lock ] && [ ! -e wd/run/.memdecay.lock ] || fail "a finished run left its lock"
[ -e wd/.memdecay-workdir ] || fail "the work directory has no marker"
snapshot() { find wd -type f | sort | xargs sha256sum; }
snapshot >before.sums || exit 99

# hold DIR: DIR's lock is held (by this shell, on a file description of
# its own, as another process's would be) until release DIR.
hold() {
  exec 9>"$1/.memdecay.lock" || exit 99
  printf 'process 4242 on testhost\n' >&9
  flock -n 9 || fail "could not take $1's lock"
}
release() { exec 9>&-; rm -f "$1/.memdecay.lock"; }

# refused CASE PATTERN COMMAND...
refused() {
  name=$1 pattern=$2
  shift 2
  "$@" >out.txt 2>err.txt
  status=$?
  [ "$status" = 2 ] || { cat err.txt >&2; fail "$name: exit $status, expected 2"; }
  grep -Eq -e "$pattern" err.txt || { cat err.txt >&2; fail "$name: message"; }
  echo "ok $name: $(cat err.txt)"
}

hold wd/run
refused collect-resume-locked \
  "wd/run is in use by another process \(process 4242 on testhost; its lock wd/run/\.memdecay\.lock\)" \
  "$program" collect --model "$model" --traces "$traces" --max-episodes 1 --out wd/run --resume
release wd/run
hold wd
refused run-resume-locked "wd is in use by another process \(process 4242 on testhost" \
  "$program" run --model "$model" --traces "$traces" --max-episodes 1 --workdir wd -o cfg.json \
  --reproducible --resume
release wd
snapshot | cmp -s - before.sums || fail "a refused writer changed the run"

# Released: the same resume goes on, and leaves no lock behind.
"$program" collect --model "$model" --traces "$traces" --max-episodes 1 --out wd/run --resume \
  -q 2>err.txt || { cat err.txt >&2; fail "collect --resume after the release"; }
[ ! -e wd/run/.memdecay.lock ] || fail "collect --resume left its lock"

# Work directories that are not ours.
mkdir user && echo "the user's own" >user/events.csv || exit 99
refused workdir-not-ours "--workdir user is not empty and is not a work directory of run" \
  "$program" run --model "$model" --traces "$traces" --max-episodes 1 --workdir user -o u.json
[ "$(cat user/events.csv)" = "the user's own" ] && [ "$(ls -A user)" = events.csv ] ||
  fail "the user's directory was written"
mkdir -p ours/run && touch ours/.memdecay-workdir || exit 99
refused workdir-run-not-a-run "ours/run exists and is not a run directory \(no run.json\)" \
  "$program" run --model "$model" --traces "$traces" --max-episodes 1 --workdir ours -o o.json
[ -z "$(ls -A ours/run)" ] || fail "ours/run was written"
echo "dir_lock: all passed"
