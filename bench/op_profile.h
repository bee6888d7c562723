/* Where a forward pass's time goes, operation by operation: a back end that
 * forwards every operation to another one (the CPU back end, as the
 * program opens it) and times each call. Used by `inference_bench ops`; a
 * measuring aid, not part of the program.
 *
 * Each call is timed from entry to return, with the inner back end's sync
 * after it when that back end is not "cpu" (whose operations are done when
 * they return), so a device back end's queue does not shift time from one
 * operation to the next. Timing costs two clock reads per call (tens of
 * nanoseconds against milliseconds for a prompt's products).
 *
 * Calls are tallied by phase (what the caller set: the prompt or the decode
 * steps), by operation and by what they work on: a matmul by its weight's
 * name without the layer ("o_proj"), a matmul_shared by its weights' names
 * joined ("q_proj+k_proj+v_proj"), so a 24-layer prompt gives one line per
 * kind of product. The flops a line does (matrix products, attention's two
 * products, the LM head) and the bytes of weights and KV cache it reads
 * are counted with it. */
#ifndef MD_BENCH_OP_PROFILE_H
#define MD_BENCH_OP_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "kernels/kernels.h"

typedef struct op_profile op_profile;

/* A back end that forwards to `inner` and takes ownership of it (freeing the
 * profile frees it). NULL when out of memory (inner is then freed too). */
md_kernels *op_profile_wrap(md_kernels *inner);

/* The phase later calls are tallied under. */
typedef enum op_phase { OP_PHASE_PROMPT = 0, OP_PHASE_DECODE = 1 } op_phase;
void op_profile_set_phase(md_kernels *profiled, op_phase phase);

/* Forgets every tally (the warm-up's, say). */
void op_profile_reset(md_kernels *profiled);

/* Prints the tallies of one phase, largest first: calls, seconds, share of the phase's
 * timed total, GFLOP/s and its fraction of `fma_peak_gflops` (prompt),
 * GB/s of weights read (decode). `wall_s` is the phase's wall time,
 * printed beside the timed total so the untimed remainder (the forward
 * pass's own code) shows. */
void op_profile_print(md_kernels *profiled, FILE *out, op_phase phase, double wall_s,
                      double fma_peak_gflops);

#endif
