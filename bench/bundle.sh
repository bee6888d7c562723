#!/bin/sh
# Packs the benchmark programs (bench/inference_bench, calib/memdecay-calibrate)
# with the shared libraries they load (OpenBLAS, GSL, jansson, cairo, ...)
# into one archive, for measuring a machine that has no compiler or
# development packages: a production server, a rented one. Unpacked in a
# checkout of the same commit there, the bench scripts run it with
# --no-build:
#
#   here:   bench/bundle.sh                      (writes build/bench-bundle.tar.xz)
#   there:  tar xJf bench-bundle.tar.xz           (in the checkout: bench-bundle/)
#           MD_BUILD_DIR=bench-bundle/build bench/inference_bench.sh --no-build
#           MD_BUILD_DIR=bench-bundle/build bench/llama_cpp_bench.sh --no-build
#
#   bench/bundle.sh [--out FILE] [--build-dir DIR] [--llama-cpp DIR]
#
#   --out FILE        the archive (default build/bench-bundle.tar.xz)
#   --build-dir DIR   the build directory it configures and builds (default
#                     build-bundle; CUDA off, the default build type)
#   --llama-cpp DIR   also pack this llama.cpp tree (llama_cpp_bench.sh's
#                     WORK/llama-cpp-python-VERSION, its sources only), so
#                     that the other machine builds llama.cpp without PyPI
#                     (that build needs cmake and a C++ compiler there, not
#                     this project's development packages); move the
#                     archive's llama-cpp-python-VERSION into the work
#                     directory there (default build/bench-work)
#
# The programs are linked with an RPATH of $ORIGIN/../../lib, so they load
# the packed libraries wherever the archive is unpacked, without
# LD_LIBRARY_PATH (which the Python the scripts also run would inherit).
# The C library, the C++ runtime and the dynamic loader are not packed: the
# other machine's are used, so it must be x86-64 Linux with a glibc at least
# as new as this one's (ldd --version). The CPU kernels are chosen at run
# time there as here (`devices` names them); no -march=native.
set -eu
cd "$(dirname "$0")/.."
out=build/bench-bundle.tar.xz
build="build-bundle"
llama=
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --llama-cpp) llama=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -eu$/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bundle.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$llama" ] && [ ! -f "$llama/vendor/llama.cpp/CMakeLists.txt" ]; then
  echo "bundle.sh: $llama/vendor/llama.cpp/CMakeLists.txt not found (--llama-cpp takes llama_cpp_bench.sh's WORK/llama-cpp-python-VERSION)" >&2
  exit 2
fi
for tool in ldd xz strip; do
  command -v "$tool" >/dev/null || { echo "bundle.sh: needs $tool" >&2; exit 1; }
done

programs="bench/inference_bench calib/memdecay-calibrate"
if [ ! -f "$build/build.ninja" ]; then
  # shellcheck disable=SC2016
  meson setup "$build" -Dcuda=disabled \
    '-Dc_link_args=-Wl,--disable-new-dtags,-rpath,$ORIGIN/../../lib' >/dev/null
fi
# shellcheck disable=SC2086
meson compile -C "$build" $programs >/dev/null

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/bench-bundle
mkdir -p "$root/build/bench" "$root/build/calib" "$root/lib"
for p in $programs; do
  cp "$build/$p" "$root/build/$p"
  strip "$root/build/$p"
done
# Every library the programs load, but the C library's and the C++
# runtime's, which the other machine's own must provide.
for p in $programs; do ldd "$build/$p"; done |
  awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so|/ld-linux' |
  while read -r lib; do
    cp -L "$lib" "$root/lib/"
  done
missing=$(for p in $programs; do ldd "$build/$p"; done | grep 'not found' || true)
if [ -n "$missing" ]; then
  echo "bundle.sh: libraries not found here: $missing" >&2
  exit 1
fi
{
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version | head -1)"
  "$root/build/calib/memdecay-calibrate" --version 2>/dev/null || true
  echo "libraries:"
  for lib in "$root"/lib/*; do echo "  ${lib##*/}"; done
} >"$root/BUNDLE.txt"
if [ -n "$llama" ]; then
  name=$(basename "$llama")
  mkdir -p "$stage/$name/vendor"
  # The sources a CPU build of llama-bench and the GGUF converter need: not
  # the models, docs, tests, examples, other back ends or a previous build.
  set --
  for dir in "$llama"/vendor/llama.cpp/ggml/src/ggml-*/; do
    backend=$(basename "$dir")
    [ "$backend" = ggml-cpu ] || set -- "$@" "--exclude=llama.cpp/ggml/src/$backend"
  done
  (cd "$llama/vendor" && tar cf - --exclude=llama.cpp/models --exclude=llama.cpp/docs \
      --exclude=llama.cpp/media --exclude=llama.cpp/tests --exclude=llama.cpp/benches \
      --exclude=llama.cpp/examples --exclude=llama.cpp/tools/server --exclude=llama.cpp/tools/ui \
      --exclude=llama.cpp/build-native "$@" llama.cpp) | (cd "$stage/$name/vendor" && tar xf -)
fi
mkdir -p "$(dirname "$out")"
tmp=$out.tmp.$$
(cd "$stage" && tar cf - -- *) | xz -T0 -6 >"$tmp"
mv "$tmp" "$out"
set -- "$root"/lib/*
echo "wrote $out ($(du -h "$out" | cut -f1)): bench-bundle/ (programs, $# libraries)${llama:+ and $(basename "$llama")/}" >&2
