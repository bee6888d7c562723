#!/bin/sh
# Packs the GPU check (tests/gpu/check.sh) for a machine with an NVIDIA GPU
# that has none of this project's build tools or libraries: no meson, no
# compiler, no GSL or OpenBLAS, no network. Built here with nvcc
# (-Dcuda=enabled, release), the archive holds
#   build/   the GPU check programs (tests/gpu), memdecay-calibrate and the
#            programs of the `device` test suite, linked with an RPATH
#            relative to the archive ($ORIGIN/../../lib, $ORIGIN/../../../lib)
#   lib/     every shared library they load but the CUDA ones (the GPU
#            machine's driver and CUDA runtime, 13.x like the build's, are
#            used) and the C library's (glibc there must be at least as new
#            as here: ldd --version)
#   tests.json  the device suite's tests as plain commands (meson introspect,
#            paths made relative), for check.sh to run without meson
#   src/     with --data: the files the check reads from the source tree
#            (the HF fixtures, the demo checkpoint, its traces and golden
#            config), so that the checkout there may leave them out
#
#   tests/gpu/bundle.sh [--out FILE] [--build-dir DIR] [--data]
#
#   --out FILE        the archive (default build/gpu-bundle.tar.gz)
#   --build-dir DIR   the build directory (default build-gpu-bundle)
#   --data            also pack src/ (above)
#
# There, in a checkout of the same commit:
#   tar xzf gpu-bundle.tar.gz          (a folder gpu-bundle/)
#   tests/gpu/check.sh --bundle gpu-bundle
set -eu
cd "$(dirname "$0")/../.."
out=build/gpu-bundle.tar.gz
build=build-gpu-bundle
data=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --data) data=1; shift ;;
    -h|--help) sed -n '2,/^set -eu$/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bundle.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
for tool in ldd readelf strip tar gzip python3 nvcc meson; do
  command -v "$tool" >/dev/null || { echo "bundle.sh: needs $tool" >&2; exit 1; }
done
# RPATH (not RUNPATH: it also serves the libraries' own dependencies) into
# the archive's lib/ from build/X and build/X/Y; programs with CUDA code are
# linked by nvcc, hence cuda_link_args.
# shellcheck disable=SC2016
rpath='$ORIGIN/../../lib:$ORIGIN/../../../lib'
set -- "-Dc_link_args=-Wl,--disable-new-dtags,-rpath,$rpath" \
  "-Dcpp_link_args=-Wl,--disable-new-dtags,-rpath,$rpath" \
  "-Dcuda_link_args=-Xlinker=--disable-new-dtags -Xlinker=-rpath=$rpath"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dcuda=enabled -Dbuildtype=release "$@" >/dev/null
else
  meson configure "$build" "$@" >/dev/null
fi
meson compile -C "$build" >/dev/null

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/gpu-bundle
mkdir -p "$root/build" "$root/lib"
# The device suite as plain commands: build-dir paths become @BUILD@,
# source paths @SOURCE@; the programs they name are packed.
meson introspect "$build" --tests | python3 -c '
import json, os, sys
build, source, out = os.path.realpath(sys.argv[1]), os.getcwd(), sys.argv[2]
def rel(s):
    return s.replace(build, "@BUILD@").replace(source, "@SOURCE@")
tests = [{"name": t["name"], "cmd": [rel(c) for c in t["cmd"]],
          "env": {k: rel(v) for k, v in t["env"].items()}, "timeout": t["timeout"]}
         for t in json.load(sys.stdin) if any(s.split(":")[-1] == "device" for s in t["suite"])]
json.dump(tests, open(out, "w"), indent=1)
' "$build" "$root/tests.json"
programs=$(python3 -c '
import json, sys
names = {"tests/gpu/cuda_kernels_check", "tests/gpu/gpu_parity", "tests/gpu/gpu_bench", "tests/gpu/gpu_batch",
         "tests/gpu/make_checkpoint", "calib/memdecay-calibrate"}
for t in json.load(open(sys.argv[1])):
    for c in t["cmd"]:
        if c.startswith("@BUILD@/"): names.add(c[len("@BUILD@/"):])
        elif "/" in c and not c.startswith(("@SOURCE@", "/", "-", "^")) and " " not in c: names.add(c)
print("\n".join(sorted(names)))
' "$root/tests.json")
for p in $programs; do
  [ -f "$build/$p" ] || continue
  readelf -d "$build/$p" | grep -q 'RPATH.*ORIGIN' ||
    { echo "bundle.sh: $build/$p has no RPATH into the archive" >&2; exit 1; }
  mkdir -p "$root/build/$(dirname "$p")"
  cp "$build/$p" "$root/build/$p"
  strip "$root/build/$p"
done
# Every library the programs load, but CUDA's and the C and C++ runtimes'.
for p in $programs; do [ -f "$build/$p" ] && ldd "$build/$p"; done |
  awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt)\.so|/ld-linux' |
  while read -r lib; do
    cp -L "$lib" "$root/lib/"
  done
if [ "$data" = 1 ]; then
  for path in tests/model/fixtures data/models/qwen2-tiny data/traces/agent-450.jsonl \
              data/golden/qwen2-tiny-agent-450.json; do
    mkdir -p "$root/src/$(dirname "$path")"
    cp -R "$path" "$root/src/$path"
  done
fi
git rev-parse HEAD >"$root/commit" 2>/dev/null || true
mkdir -p "$(dirname "$out")"
tar -C "$stage" -czf "$out" gpu-bundle
echo "bundle.sh: wrote $out ($(du -h "$out" | cut -f1)): $(echo "$programs" | wc -l) programs, $(ls "$root/lib" | wc -l) libraries"
