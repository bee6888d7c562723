#!/bin/sh
# The shipped Slurm recipe (calib/slurm) on a one-node cluster started for
# the test (cluster.sh), against the single-machine `run`:
#
#   test_recipe.sh [--munged P] [--slurmctld P] [--slurmd P]
#                  PROGRAM MODEL TRACES WORK
#
# 1. `run` on MODEL and TRACES in one process, work directory WORK/W.
# 2. W removed, submit.sh: 4 shard tasks and the merge after them; the
#    merged config must be byte-identical to the single-machine one (same
#    work directory path, which the config names as its source).
# 3. A longer collection (TRACES six times over, the ids renamed, 2 shards):
#    shard 1 cancelled part way (some episodes complete, one in progress),
#    which leaves the merge unsatisfiable and a merge by hand refused; then
#    that index submitted again on its own, as calib/slurm/README.md says
#    (--resume continues it), and the merge again: byte-identical to the
#    single-machine run of the same traces.
# The programs are the installed Slurm and munge (or those given); the
# cluster is stopped on every exit. Cannot start the cluster: a failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=${MD_SOURCE_ROOT:?}
recipe=$root/calib/slurm
while [ $# -gt 0 ]; do
  case "$1" in
    --munged) MUNGED=$2; export MUNGED; shift 2 ;;
    --slurmctld) SLURMCTLD=$2; export SLURMCTLD; shift 2 ;;
    --slurmd) SLURMD=$2; export SLURMD; shift 2 ;;
    -*) echo "test_recipe.sh: unknown option $1" >&2; exit 99 ;;
    *) break ;;
  esac
done
[ $# -eq 4 ] || { echo "usage: test_recipe.sh [OPTIONS] PROGRAM MODEL TRACES WORK" >&2; exit 99; }
program=$1 model=$2 traces=$3 work=$4
# Absolute: the jobs and the single-machine runs start in WORK.
for v in program model traces work; do
  eval "case \$$v in /*) ;; *) $v=\$PWD/\$$v ;; esac"
done
W=$work/W
start=$(date +%s)
elapsed() { echo "$(( $(date +%s) - start )) s"; }

# The cluster lives in /tmp: a short path, for its Unix sockets, that
# munged accepts (every directory above its socket searchable by all).
tmp=$(mktemp -d /tmp/md-slurm.XXXXXX) || exit 99
chmod 755 "$tmp" || exit 99
cluster=$tmp/c
trap '"$here/cluster.sh" stop "$cluster"; rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/logs/*; do
    [ -f "$f" ] && { echo "--- job log ${f##*/}:" >&2; tail -n 20 "$f" >&2; }
  done
  "$here/cluster.sh" logs "$cluster" >&2
  exit 1
}

# job_states JOB: the state of each of JOB's records (its array tasks), one
# a line; NEVER for one pending on a dependency that can never be met.
job_states() {
  timeout 10 scontrol -o show job "$1" 2>/dev/null |
    sed -n 's/.*JobState=\([A-Z_]*\) Reason=\([A-Za-z_]*\).*/\1:\2/p' |
    sed -e 's/^PENDING:DependencyNeverSatisfied$/NEVER/' -e 's/:.*//'
}

# wait_job JOB WANT SECONDS: waits until no record of JOB is pending or
# running, then requires each to be in state WANT.
wait_job() {
  i=0
  while :; do
    states=$(job_states "$1")
    [ -n "$states" ] || fail "job $1: unknown to scontrol"
    echo "$states" | grep -Eqx 'PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED|RESIZING' || break
    [ $i -lt $(($3 * 10)) ] || fail "job $1 not finished in $3 s: $(echo "$states" | tr "\n" " ")"
    sleep 0.1
    i=$((i + 1))
  done
  echo "$states" | grep -qvx "$2" && fail "job $1 ended $(echo "$states" | tr "\n" " "), expected $2"
  return 0
}

# submitted KEY: the job id submit.sh printed as KEY=ID.
submitted() { sed -n "s/^$1=\([0-9][0-9]*\)$/\1/p" "$work/submit.out"; }

rm -rf "$work" && mkdir -p "$work/logs" || exit 99
"$here/cluster.sh" start "$cluster" || fail "cannot start the one-node Slurm cluster"
SLURM_CONF=$cluster/slurm.conf
export SLURM_CONF
cd "$work" || exit 99

# The recipe's settings, as a user would set them in submit.sh's
# environment; one CPU and one thread per shard on this small node, and
# one thread for the single-machine runs too (the attention sums' order
# depends on the thread count).
MEMDECAY=$program MODEL=$model TRACES=$traces WORKDIR=$W OUTPUT=$work/merged.json
COLLECT_OPTIONS=--reproducible MERGE_OPTIONS=--reproducible
export MEMDECAY MODEL TRACES WORKDIR OUTPUT COLLECT_OPTIONS MERGE_OPTIONS
unset SHARDS THREADS DEVICE

echo "== 1. single machine: run on ${traces##*/} into W"
timeout 300 "$program" run --model "$model" --traces "$traces" --workdir "$W" -o "$work/single.json" \
  --reproducible --threads 1 -q || fail "single-machine run failed"
echo "   done ($(elapsed))"

echo "== 2. Slurm: submit.sh -n 4 (4 shard tasks, merge after them)"
rm -rf "$W"
timeout 60 "$recipe/submit.sh" -n 4 -c 1 --logs "$work/logs" >"$work/submit.out" || fail "submit.sh failed"
cat "$work/submit.out"
array=$(submitted array_job) merge=$(submitted merge_job)
if [ -z "$array" ] || [ -z "$merge" ]; then fail "submit.sh printed no job ids"; fi
wait_job "$array" COMPLETED 120
wait_job "$merge" COMPLETED 60
echo "   shards: $(cd "$W/shards" && echo *)"
cmp "$work/single.json" "$work/merged.json" || fail "merged config differs from the single-machine one"
echo "   merged config identical to the single-machine one ($(elapsed))"

echo "== 3. a shard cancelled part way, submitted again, merged"
big=$work/big.jsonl
for copy in 1 2 3 4 5 6; do
  sed "s/\"id\": \"/\"id\": \"copy$copy-/" "$traces"
done >"$big" || exit 99
lines=$(wc -l <"$big")
[ "$(grep -c '"id": "copy[1-6]-' "$big")" -eq "$lines" ] || fail "could not rename the episode ids of $traces"
TRACES=$big OUTPUT=$work/big-merged.json
rm -rf "$W"
timeout 300 "$program" run --model "$model" --traces "$big" --workdir "$W" -o "$work/big-single.json" \
  --reproducible --threads 1 -q || fail "single-machine run of $lines episodes failed"
echo "   single machine: $lines episodes ($(elapsed))"
rm -rf "$W"
timeout 60 "$recipe/submit.sh" -n 2 -c 1 --logs "$work/logs" >"$work/submit.out" || fail "submit.sh failed"
cat "$work/submit.out"
array=$(submitted array_job) merge=$(submitted merge_job)
if [ -z "$array" ] || [ -z "$merge" ]; then fail "submit.sh printed no job ids"; fi

# Cancel shard 1 once its run.json lists a complete episode and one in
# progress: part way, whatever the machine's speed.
run_json=$W/shards/1-of-2/run.json
i=0
until grep -q '"complete": true' "$run_json" 2>/dev/null && grep -q '"complete": false' "$run_json" 2>/dev/null; do
  [ "$(job_states "${array}_1")" != COMPLETED ] || fail "shard 1 finished before it could be cancelled"
  [ $i -lt 1200 ] || fail "shard 1 did not start in 60 s"
  sleep 0.05
  i=$((i + 1))
done
timeout 10 scancel "${array}_1" || fail "scancel ${array}_1 failed"
wait_job "${array}_1" CANCELLED 30
wait_job "${array}_0" COMPLETED 60
kept=$(grep -c '"complete": true' "$run_json")
grep -q '"complete": false' "$run_json" || fail "shard 1 was not interrupted ($kept episodes complete)"
echo "   shard 1 cancelled with $kept episodes complete, one in progress ($(elapsed))"
# Slurm marks the merge as never to start once it has looked at it again.
i=0
until [ "$(job_states "$merge")" = NEVER ]; do
  [ $i -lt 300 ] || fail "merge job $merge: $(job_states "$merge") after 30 s, expected never to start"
  sleep 0.1
  i=$((i + 1))
done
timeout 10 scancel "$merge" || fail "scancel $merge failed"
timeout 120 "$program" run --workdir "$W" -o "$work/partial.json" --merge-shards --reproducible -q 2>"$work/partial.err"
got=$?
[ $got -eq 2 ] || fail "merge with shard 1 interrupted exited $got, expected 2"
[ ! -e "$work/partial.json" ] || fail "merge with shard 1 interrupted wrote a config"
echo "   merge job never to start (cancelled); merge by hand refused: $(head -n 1 "$work/partial.err")"

# As the README says: the index again (N from the shard directories, as
# SHARDS is not set here), then the merge.
resumed=$(timeout 30 sbatch --parsable --array=1 --cpus-per-task=1 --output="$work/logs/resume-%A_%a.out" \
  "$recipe/calibrate-shards.sbatch") || fail "sbatch --array=1 failed"
merge=$(timeout 30 sbatch --parsable --dependency=afterok:"$resumed" --output="$work/logs/merge-%j.out" \
  "$recipe/calibrate-merge.sbatch") || fail "sbatch of the merge failed"
echo "   submitted again: shard job $resumed (--array=1), merge job $merge"
wait_job "$resumed" COMPLETED 120
wait_job "$merge" COMPLETED 60
! grep -q '"complete": false' "$run_json" || fail "shard 1 still incomplete after its resubmission"
# The resubmitted task continued the shard: the episodes complete before the
# cancel were kept, not collected again.
grep -q "($kept already complete)" "$work/logs/resume-${resumed}_1.out" ||
  fail "the resubmitted shard did not continue from its $kept complete episodes"
cmp "$work/big-single.json" "$work/big-merged.json" ||
  fail "merged config after the resubmission differs from the single-machine one"
echo "   shard 1 continued from its $kept complete episodes; merged config identical to the single-machine one ($(elapsed))"
echo "slurm recipe: ok in $(elapsed)"
