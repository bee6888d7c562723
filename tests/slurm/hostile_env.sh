#!/bin/bash
# The Slurm recipe (calib/slurm) given hostile or malformed values: nothing
# they name runs, nothing is glob-expanded, no option is split into more.
# The scripts run outside Slurm here, with the array task's variables set
# by hand, a stub program in MEMDECAY that records its arguments, and a
# stub sbatch on PATH for submit.sh.
#
#   hostile_env.sh SLURM_DIR WORK
set -u
slurm=$1 work=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work/bin" && cd "$work" || exit 99
# Files a glob would match, and the stubs.
touch a.glob b.glob
cat >bin/record <<'EOF'
#!/bin/sh
for a in "$@"; do printf '%s\n' "$a"; done >"$RECORD"
EOF
cp bin/record bin/sbatch || exit 99
# shard: one array task (index ID, default 0) of calibrate-shards.sbatch.
printf '#!/bin/sh\nSLURM_ARRAY_TASK_ID=${ID:-0} exec bash "%s/calibrate-shards.sbatch"\n' "$slurm" >bin/shard
chmod +x bin/record bin/sbatch bin/shard || exit 99
export PATH=$work/bin:$PATH MEMDECAY=$work/bin/record RECORD=$work/args
unset SHARDS THREADS DEVICE COLLECT_OPTIONS MERGE_OPTIONS SLURM_CPUS_PER_TASK

# refused NAME PATTERN COMMAND...: exit 2, the message, no stub called, no
# file made by an injected command.
refused() {
  name=$1 pattern=$2
  shift 2
  rm -f args pwned
  "$@" >out.txt 2>err.txt
  status=$?
  [ "$status" = 2 ] || { cat err.txt >&2; fail "$name: exit $status, expected 2"; }
  grep -Eq -e "$pattern" err.txt || { cat err.txt >&2; fail "$name: message"; }
  [ ! -e args ] || fail "$name: the program (or sbatch) ran"
  [ ! -e pwned ] || fail "$name: an injected command ran"
  echo "ok $name"
}
# shellcheck disable=SC2016  # the $(...) must reach the script unexpanded
refused shards-subscript-injection 'SHARDS must be a whole number' \
  env SHARDS='HOME[$(touch pwned)]' shard
refused shards-not-a-number 'SHARDS must be a whole number' \
  env SHARDS=four shard
refused threads-split 'THREADS must be a whole number' \
  env SHARDS=2 THREADS='4 --device cuda' shard
refused device 'DEVICE must be cpu, cuda or cuda:N' \
  env SHARDS=2 DEVICE='cpu --resume' shard
# shellcheck disable=SC2016
refused task-id-injection 'SLURM_ARRAY_TASK_ID is not an array index' \
  env SHARDS=2 ID='0$(touch pwned)' shard
refused task-beyond 'array index 2 is not a shard of 2' \
  env SHARDS=2 ID=2 shard

# Accepted values reach the program word for word, no glob expanded.
SHARDS=2 THREADS=3 COLLECT_OPTIONS=$'--max-steps 4\n*.glob' SLURM_ARRAY_TASK_ID=1 \
  bash "$slurm/calibrate-shards.sbatch" >/dev/null 2>&1 || fail "a good shard task failed"
grep -qx -- '--threads' args && grep -qx 3 args && grep -qx -- '--max-steps' args ||
  fail "shard task: options lost: $(tr '\n' ' ' <args)"
grep -qx '\*\.glob' args && ! grep -q 'a\.glob' args || fail "shard task: a glob was expanded"
grep -qx '1/2' args || fail "shard task: not shard 1/2"
MERGE_OPTIONS='--reproducible *.glob' bash "$slurm/calibrate-merge.sbatch" >/dev/null 2>&1 ||
  fail "a good merge failed"
grep -qx -- '--reproducible' args && grep -qx '\*\.glob' args || fail "merge: options or glob"

# submit.sh: -p and -c cannot smuggle options; -n is checked.
refused submit-partition 'must be a partition name' sh "$slurm/submit.sh" -p 'gpu --account=x'
refused submit-cpus 'must be a whole number' sh "$slurm/submit.sh" -c '4 --account=x'
refused submit-shards 'must be a whole number' sh "$slurm/submit.sh" -n '2;touch pwned'
sh "$slurm/submit.sh" --test-only -n 3 -p gpu,cpu -c 4 >/dev/null 2>&1 || fail "submit.sh --test-only"
grep -qx -- '--partition=gpu,cpu' args && ! grep -qx -- '--account=x' args ||
  fail "submit.sh: the partition: $(tr '\n' ' ' <args)"
echo "hostile_env: all passed"
