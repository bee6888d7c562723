// The CUDA back end's kernels, compiled by the host C++ compiler for the
// emulator (tests/cudaemu/emu.cpp).
#include "kernels/cuda/attention.cu"
#include "kernels/cuda/elementwise.cu"
#include "kernels/cuda/gemv.cu"
