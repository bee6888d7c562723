#!/bin/sh
# Submits a sharded calibration: calibrate-shards.sbatch as a job array of
# N tasks (one shard each), and calibrate-merge.sbatch to run once every
# task has succeeded (--dependency=afterok). Prints the two job ids:
#   array_job=ID
#   merge_job=ID
#
#   submit.sh [-n N] [-p PARTITION] [-c CPUS] [--logs DIR] [--test-only]
#             [-- SBATCH_OPTIONS...]
#
# -n N           shards, one array task each (default: SHARDS, or 4)
# -p PARTITION   partition of both jobs (default: PARTITION, or the
#                cluster's default)
# -c CPUS        CPUs per shard task (default: CPUS_PER_TASK, or the
#                #SBATCH line of calibrate-shards.sbatch); also its --threads
# --logs DIR     where the jobs' output goes, shard-ARRAYID_K.out and
#                merge-ID.out (default: LOGS, or slurm-logs; made if absent)
# --test-only    ask Slurm whether and when the jobs would run, submit nothing
#                (sbatch --test-only; the merge is asked about on its own)
# SBATCH_OPTIONS go to both sbatch calls (e.g. --account=A, --qos=Q).
#
# The settings of the two scripts (MEMDECAY, MODEL, TRACES, WORKDIR, DEVICE,
# THREADS, COLLECT_OPTIONS, OUTPUT, MERGE_OPTIONS) can be set in the
# environment: sbatch passes it on to the jobs. E.g.
#   MODEL=~/models/Qwen2.5-1.5B-Instruct TRACES=agent.jsonl DEVICE=cuda \
#     calib/slurm/submit.sh -n 8 -p gpu -- --gres=gpu:1
set -eu
here=$(cd "$(dirname "$0")" && pwd)
shards=${SHARDS:-4}
partition=${PARTITION:-}
cpus=${CPUS_PER_TASK:-}
logs=${LOGS:-slurm-logs}
test_only=
# usage STATUS: prints the option summary above and exits.
usage() { sed -n '/^#   submit.sh/,/^# SBATCH_OPTIONS/s/^# \{0,1\}//p' "$0"; exit "$1"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -n|--shards) [ $# -ge 2 ] || usage 2 >&2; shards=$2; shift 2 ;;
    -p|--partition) [ $# -ge 2 ] || usage 2 >&2; partition=$2; shift 2 ;;
    -c|--cpus-per-task) [ $# -ge 2 ] || usage 2 >&2; cpus=$2; shift 2 ;;
    --logs) [ $# -ge 2 ] || usage 2 >&2; logs=$2; shift 2 ;;
    --test-only) test_only=--test-only; shift ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    *) echo "submit.sh: unknown option $1" >&2; usage 2 >&2 ;;
  esac
done
case "$shards" in
  ''|*[!0-9]*|0*) echo "submit.sh: -n must be a whole number from 1, not '$shards'" >&2; exit 2 ;;
esac
[ "${#shards}" -le 6 ] || { echo "submit.sh: -n $shards is too many shards" >&2; exit 2; }
# A partition (or a comma-separated list) and a CPU count: checked, and
# given to sbatch as one word each, never split into more options.
case "$partition" in
  *[!A-Za-z0-9_.,-]*|-*) echo "submit.sh: -p must be a partition name, not '$partition'" >&2; exit 2 ;;
esac
case "$cpus" in
  *[!0-9]*|0*) echo "submit.sh: -c must be a whole number from 1, not '$cpus'" >&2; exit 2 ;;
esac

# The shard tasks read N from SHARDS, not from the array's size: an index
# submitted again later is an array of one.
SHARDS=$shards
export SHARDS
last=$((shards - 1))  # digits only, checked above

if [ -n "$test_only" ]; then
  # Nothing is submitted, so there is no job to depend on: each job is
  # checked on its own (sbatch prints where and when it would start).
  sbatch --test-only ${partition:+"--partition=$partition"} ${cpus:+"--cpus-per-task=$cpus"} \
    "--array=0-$last" "$@" "$here/calibrate-shards.sbatch"
  sbatch --test-only ${partition:+"--partition=$partition"} "$@" "$here/calibrate-merge.sbatch"
  exit 0
fi

# Slurm does not make the directory of --output: without it a job fails.
mkdir -p "$logs"
array_job=$(sbatch --parsable ${partition:+"--partition=$partition"} \
  ${cpus:+"--cpus-per-task=$cpus"} "--array=0-$last" \
  "--output=$logs/shard-%A_%a.out" "$@" "$here/calibrate-shards.sbatch")
array_job=${array_job%%;*}   # --parsable prints ID;CLUSTER on a federation
echo "array_job=$array_job"
case "$array_job" in
  ''|*[!0-9]*) echo "submit.sh: sbatch answered '$array_job', not a job id" >&2; exit 1 ;;
esac
merge_job=$(sbatch --parsable ${partition:+"--partition=$partition"} "--dependency=afterok:$array_job" \
  "--output=$logs/merge-%j.out" "$@" "$here/calibrate-merge.sbatch")
merge_job=${merge_job%%;*}
echo "merge_job=$merge_job"
