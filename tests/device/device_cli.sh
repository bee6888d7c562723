#!/bin/sh
# memdecay-calibrate devices --device cuda, on any machine and build:
#   built without CUDA          exit 3, "has no CUDA back end"
#   CUDA, no usable GPU         exit 3, why: no driver / no device / no such
#                               device / compute capability below 8.0
#   CUDA and a usable GPU       exit 0, the device's line on stdout
#   device_cli.sh PROGRAM built|not-built
set -u
program=$1
build=$2
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$tmp/err" >&2; exit 1; }

for device in cuda cuda:0 cuda:1000; do
  "$program" devices --device "$device" >"$tmp/out" 2>"$tmp/err"
  status=$?
  echo "$device: exit $status: $(cat "$tmp/out" "$tmp/err")"
  if [ "$build" = not-built ]; then
    [ "$status" = 3 ] || fail "$device: exit $status, expected 3"
    grep -Eq "^memdecay-calibrate: device '$device': this build of memdecay-calibrate has no CUDA back end" "$tmp/err" ||
      fail "$device: message"
  elif [ "$status" = 0 ]; then
    [ "$device" != cuda:1000 ] || fail "cuda:1000 opened"
    grep -Eq '^cuda:[0-9]+ .*compute capability [0-9]+\.[0-9]+' "$tmp/out" || fail "$device: no device line"
  else
    [ "$status" = 3 ] || fail "$device: exit $status, expected 3"
    n=${device#cuda:}; [ "$n" = cuda ] && n=0
    grep -Eq "^memdecay-calibrate: cuda:$n: (no usable CUDA device: cudaGetDeviceCount failed: .+ \(cuda[A-Za-z]+\)|no CUDA device found|no such device: this machine has [0-9]+ CUDA devices? |.* has compute capability [0-9]+\.[0-9]+; the CUDA back end needs 8\.0)" "$tmp/err" ||
      fail "$device: message"
  fi
done

# Unknown names are usage errors, in every build.
for device in gpu cuda:x cuda:-1; do
  "$program" devices --device "$device" >"$tmp/out" 2>"$tmp/err"
  status=$?
  [ "$status" = 2 ] || fail "$device: exit $status, expected 2"
  grep -q "unknown device '$device' (expected cpu, cuda or cuda:N)" "$tmp/err" || fail "$device: message"
done
echo "device_cli: ok ($build)"
