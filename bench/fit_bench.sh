#!/bin/sh
# Benchmark of `memdecay-calibrate fit` end to end (read, fit, write):
#
#  1. 10 million rows over seven regions (data/events/gen_events.c), one core
#     (taskset -c 0, OMP_NUM_THREADS=1): wall time and peak RSS against the
#     targets, under 10 s and under 1 GiB.
#  2. The same work in R on a 1-million-row file (read.csv, then per region
#     survreg exponential + Weibull and survfit), against fit on that file:
#     the speed-up, target at least 10x.
#
# Needs a build (.ci/build), /usr/bin/time (Debian package 'time'), taskset
# (util-linux) and, for part 2, Rscript with the survival package. Not part
# of CI. Usage: bench/fit_bench.sh [--continuous] [ROWS]   (default 10000000)
#
# --continuous: real-valued times (gen_events --continuous 1: a uniform
# fraction added to every time), almost all distinct: the expensive case,
# one Kaplan-Meier step and one log-rank time per row, against the same
# targets. Without it, times are whole decode steps, as extract writes them.
set -eu
cd "$(dirname "$0")/.."
continuous=0
if [ "${1:-}" = --continuous ]; then continuous=1; shift; fi
rows=${1:-10000000}
program=${MD_BUILD_DIR:-build}/calib/memdecay-calibrate
[ -x "$program" ] || { echo "fit_bench: build first (.ci/build): $program missing" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "fit_bench: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cc -std=c11 -O2 -o "$work/gen_events" data/events/gen_events.c -lm

tokens=300  # per episode, on average
"$work/gen_events" --episodes $(( (rows + tokens - 1) / tokens )) --tokens $tokens \
  --continuous $continuous >"$work/big.csv"
"$work/gen_events" --episodes $(( (1000000 + tokens - 1) / tokens )) --tokens $tokens \
  --continuous $continuous >"$work/1m.csv"
big_rows=$(( $(wc -l <"$work/big.csv") - 1 ))
small_rows=$(( $(wc -l <"$work/1m.csv") - 1 ))
big_mb=$(( $(wc -c <"$work/big.csv") / 1048576 ))

# Runs fit on one core; prints "SECONDS RSS_KIB".
time_fit() {
  OMP_NUM_THREADS=1 taskset -c 0 /usr/bin/time -f '%e %M' -o "$work/time" \
    "$program" fit --quiet --reproducible "$1" -o "$work/out.json"
  cat "$work/time"
}

echo "fit_bench: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
[ "$continuous" = 1 ] && echo "times: real-valued, almost all distinct (--continuous)"
set -- $(time_fit "$work/big.csv")
seconds=$1
rss_mib=$(( $2 / 1024 ))
awk -v rows="$big_rows" -v s="$seconds" -v rss="$rss_mib" -v mb="$big_mb" 'BEGIN {
  printf "fit, %d rows (%d MiB CSV), 1 core: %.2f s, %.2f M rows/s, %.0f MiB/s, peak RSS %d MiB\n",
         rows, mb, s, rows / s / 1e6, mb / s, rss
  if (rows < 9999000) printf "  (the targets are for 10 million rows)\n"
  printf "  target < 10 s: %s (%.2fx of the limit)\n", s < 10 ? "met" : "MISSED", s / 10
  printf "  target < 1 GiB: %s (%.2fx of the limit)\n", rss < 1024 ? "met" : "MISSED", rss / 1024
}'

if ! command -v Rscript >/dev/null 2>&1 || ! Rscript -e 'library(survival)' >/dev/null 2>&1; then
  echo "R comparison skipped: Rscript with the survival package not found"
  exit 0
fi
set -- $(time_fit "$work/1m.csv")
ours=$1
cat >"$work/bench.R" <<'REOF'
suppressPackageStartupMessages(library(survival))
args <- commandArgs(TRUE)
elapsed <- system.time({
  d <- read.csv(args[1])
  for (r in unique(d$region)) {
    x <- d[d$region == r, ]
    survreg(Surv(time, event) ~ 1, data = x, dist = "exponential")
    survreg(Surv(time, event) ~ 1, data = x, dist = "weibull")
    survfit(Surv(time, event) ~ 1, data = x)
  }
})[["elapsed"]]
cat(elapsed, "\n")
REOF
theirs=$(OMP_NUM_THREADS=1 taskset -c 0 Rscript "$work/bench.R" "$work/1m.csv")
awk -v rows="$small_rows" -v ours="$ours" -v theirs="$theirs" 'BEGIN {
  printf "same work on %d rows, 1 core: fit %.2f s, R (read.csv + survreg x2 + survfit) %.2f s\n",
         rows, ours, theirs
  denominator = ours
  if (denominator < 0.005) denominator = 0.005
  ratio = theirs / denominator
  printf "  speed-up %.1fx, target >= 10x: %s\n", ratio, (ratio >= 10 ? "met" : "MISSED")
}'
