# Shared by the bench/*.sh scripts (sourced, from the project root).

# Prints "cpu: MODEL; N cores; flags: ..." with the vector flags the kernels
# and the limits depend on: every figure is recorded with the CPU it came
# from.
bench_cpu_line() {
  _cpu_model=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
  _cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
          grep -E '^(fma|avx2|avx512f|avx512bw|avx512vl|avx512dq|avx512_vnni|avx512_bf16|avx512fp16|amx_bf16)$' |
          tr '\n' ' ' | sed 's/ $//')
  echo "cpu: $_cpu_model; $(nproc) cores; flags: $_cpu_flags"
}

# Runs OpenBLAS on the best core for this CPU, as memdecay-calibrate itself
# chooses it at start-up (kernels/cpu/blas_core.h), so that the bench
# programs, which do not switch by themselves, measure the kernels the tool
# runs. A user's OPENBLAS_CORETYPE is respected. $1: the build directory.
bench_blas_core() {
  if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    _blas_best=$("$1/calib/memdecay-calibrate" devices 2>/dev/null |
           sed -n 's/.*best for this CPU: \([A-Za-z0-9]*\).*/\1/p')
    if [ -n "$_blas_best" ]; then
      OPENBLAS_CORETYPE=$_blas_best
      export OPENBLAS_CORETYPE
    fi
  fi
}

# Builds the project (.ci/build) unless $1 is 0 (a script's --no-build: the
# build already in $MD_BUILD_DIR, default ./build, is used as it is, for
# example one made before the script's run or on another machine of the
# same architecture), then checks that the programs $3... are there; $2 is
# the script's name for the message.
bench_build() {
  _do_build=$1 _script=$2
  shift 2
  if [ "$_do_build" = 1 ]; then .ci/build >/dev/null; fi
  for _program in "$@"; do
    if [ ! -x "${MD_BUILD_DIR:-build}/$_program" ]; then
      echo "$_script: ${MD_BUILD_DIR:-build}/$_program is missing (build first: .ci/build)" >&2
      exit 2
    fi
  done
}

# Prints $1, or when it is empty the path of the real Qwen2.5-Coder-0.5B
# GGUF file, fetched into its cache first when it is not there
# (data/models/fetch_qwen25.py).
bench_model_or_real() {
  if [ -n "$1" ]; then
    echo "$1"
    return
  fi
  _real=$(python3 data/models/fetch_qwen25.py 0.5b --print-path)
  [ -f "$_real" ] || python3 data/models/fetch_qwen25.py 0.5b >&2
  echo "$_real"
}

# Empties the work directory $1 and records in $1/machine.txt (and prints)
# the CPU line, the threads $2, the model $3 and the date.
bench_fresh_work() {
  rm -rf "$1" && mkdir -p "$1"
  bench_cpu_line | tee "$1/machine.txt"
  echo "threads: $2; model: $(basename "$3"); $(date -u +%Y-%m-%d)" | tee -a "$1/machine.txt"
}
