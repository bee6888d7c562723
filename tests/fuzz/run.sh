#!/bin/sh
# The fuzzing campaign (tests/fuzz/README.md): configures the fuzz build
# directory (clang, -Dfuzz=enabled, ASan + UBSan) and builds its harnesses,
# runs every harness for SECONDS (default 600) with a copy of its corpus and
# its dictionary, as many at once as there are cores, and keeps what it finds
# (crashes, timeouts, leaks, out-of-memory inputs) in
# tests/fuzz/crashes/<harness>/. Prints per harness the executions, the
# coverage (libFuzzer's final cov:) and the findings; exits 1 when anything
# was found.
#
#   tests/fuzz/run.sh [SECONDS]
#   MD_FUZZ_BUILD_DIR=build-fuzz MD_FUZZ_JOBS=N MD_FUZZ_HARNESSES="trace npy" tests/fuzz/run.sh 60
set -eu
cd "$(dirname "$0")/../.."
seconds=${1:-600}
build=${MD_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${MD_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
fuzz_dir=tests/fuzz
work=${MD_FUZZ_WORK:-$build/fuzz-work}

if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$build" --werror -Dcuda=disabled -Dfuzz=enabled \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
fi
harnesses=${MD_FUZZ_HARNESSES:-$(ls "$fuzz_dir/corpus")}
# The harnesses only, not the whole tree.
targets=
for name in $harnesses; do targets="$targets tests/fuzz/fuzz_$name"; done
# shellcheck disable=SC2086
meson compile -C "$build" $targets
rm -rf "$work"
mkdir -p "$work"

dict_for() {
  case $1 in
    events_fit) echo "$fuzz_dir/csv.dict" ;;
    tokenizer_encode) echo "" ;;
    run_dir) echo "$fuzz_dir/run_dir.dict" ;;
    gguf) echo "$fuzz_dir/gguf.dict" ;;
    *) echo "$fuzz_dir/json.dict" ;;
  esac
}

run_one() {
  name=$1
  exe="$build/tests/fuzz/fuzz_$name"
  out="$work/$name"
  mkdir -p "$out/corpus" "$out/artifacts"
  cp "$fuzz_dir/corpus/$name"/* "$out/corpus/" 2>/dev/null || true
  rm -f "$out/corpus/README" "$out/corpus/README.md"
  dict=$(dict_for "$name")
  set -- -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$out/artifacts/"
  [ -n "$dict" ] && set -- "$@" -dict="$dict"
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
  MD_SOURCE_ROOT="$PWD" \
    "$exe" "$@" "$out/corpus" > "$out/log" 2>&1 || true
}

# $jobs harnesses at a time: $jobs lanes, each running every $jobs-th
# harness one after another. (POSIX sh has no `wait -n` to refill a pool as
# each harness ends; every harness runs for SECONDS, so the lanes end
# together.)
lane=0
while [ "$lane" -lt "$jobs" ]; do
  (
    i=0
    for name in $harnesses; do
      if [ $((i % jobs)) -eq "$lane" ]; then run_one "$name"; fi
      i=$((i + 1))
    done
  ) &
  lane=$((lane + 1))
done
wait

found=0
printf '%-18s %12s %8s %8s\n' harness executions cov findings
for name in $harnesses; do
  out="$work/$name"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$out/log" | tail -n 1 | sed 's/cov: //')
  n=0
  for f in "$out/artifacts"/*; do
    [ -f "$f" ] || continue
    mkdir -p "$fuzz_dir/crashes/$name"
    cp "$f" "$fuzz_dir/crashes/$name/"
    cp "$out/log" "$fuzz_dir/crashes/$name/$(basename "$f").log"
    n=$((n + 1))
  done
  printf '%-18s %12s %8s %8s\n' "$name" "${execs:-?}" "${cov:-?}" "$n"
  if [ "$n" -ne 0 ]; then
    found=1
    tail -n 30 "$out/log" | sed "s/^/  $name: /"
  elif [ -z "$execs" ]; then
    # No final statistics: the harness did not run to its end.
    found=1
    echo "  $name: the harness stopped without its final statistics:"
    tail -n 30 "$out/log" | sed "s/^/  $name: /"
  fi
done
if [ "$found" -ne 0 ]; then
  echo "fuzz: findings saved in $fuzz_dir/crashes/ (logs beside them)"
  exit 1
fi
echo "fuzz: nothing found in ${seconds} s per harness"
