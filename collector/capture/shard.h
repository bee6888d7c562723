/* Sharded collection: which episodes shard K of N collects.
 *
 * A calibration too large for one machine is collected as N shards (a Slurm
 * job array, or N machines by hand), each an ordinary run directory, and
 * `extract` reads them together. For the merge to be exact, every shard
 * plans the whole collection as an unsharded run would (the same episodes,
 * the same skips, the same max_episodes cut) and then keeps a contiguous
 * block of that plan: concatenated in shard order the blocks are the
 * unsharded run's episodes in the unsharded order, so every sum, quantile
 * and fit downstream sees the same numbers in the same order.
 *
 * The rule (memdecay-calibrate(1), SHARDS). Episode i of the plan, in trace
 * order, weighs w_i = its prompt tokens + its decode steps (the positions
 * the model runs over). With C_i = w_0 + ... + w_{i-1} and W the total, it
 * belongs to shard
 *
 *     floor(N * (2 C_i + w_i) / (2 W)),
 *
 * the shard whose share [K W / N, (K + 1) W / N) of the tokens holds the
 * episode's middle token. Shards are contiguous and in order, their token
 * counts differ from W / N by at most about one episode, and a shard can be
 * empty (more shards than episodes, or one episode larger than a share):
 * an empty shard is a complete run directory with no episodes. The
 * arithmetic is in integers, so every machine computes the same split; it
 * is md_run_shard_owner (io/formats/run_dir.h), one function for the
 * collector, which splits by it, and the merge (io/formats/run_set.h),
 * which checks every shard against it. */
#ifndef MD_COLLECTOR_CAPTURE_SHARD_H
#define MD_COLLECTOR_CAPTURE_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "io/formats/run_dir.h"

enum { MD_SHARD_COUNT_MAX = MD_RUN_SHARD_COUNT_MAX };

typedef struct md_shard {
  size_t index;  /* K: 0 .. count-1, as Slurm array task ids count */
  size_t count;  /* N; 0 = not sharded */
} md_shard;

/* Parses "K/N" (decimal, 0 <= K < N <= MD_SHARD_COUNT_MAX). MD_E_INVALID
 * with a message that quotes `text` otherwise. */
md_status md_shard_parse(const char *text, md_shard *shard, md_error *err);

/* shard[i] for the n episodes of `weights` split into `count` shards by the
 * rule above. MD_E_INVALID when count is 0 or over MD_SHARD_COUNT_MAX, or
 * when the total weight is too large for the integer arithmetic (2 W N must
 * fit in 64 bits: W up to 2^47 tokens for N = 65536). */
md_status md_shard_assign(const uint64_t *weights, size_t n, size_t count, uint32_t *shard,
                          md_error *err);

#endif
