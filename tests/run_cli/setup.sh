# Sourced by the run_cli scripts called as `SCRIPT PROGRAM MODEL TRACES
# WORK`: sets program, model, traces (absolute: the scripts work inside
# WORK, and meson gives the program relative to the build directory) and
# work, defines fail, makes WORK afresh and enters it.
set -u
absolute() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
program=$(absolute "$1") model=$(absolute "$2") traces=$(absolute "$3") work=$4
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 99
