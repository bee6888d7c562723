/* MemDecay's policy constants when nothing measured them: the values
 * memdecay-config(5) documents for a config's "policy" section with
 * "source": "defaults", and the defaults of the options that measure them
 * (collect --page-size, extract --tau, --ewma-beta, --quantile). Defined here
 * only; the config writer, the collector, the extract stage and the runtime
 * read them from here. */
#ifndef MD_BASE_POLICY_DEFAULTS_H
#define MD_BASE_POLICY_DEFAULTS_H

/* Each value is written once, as the literal that --help and the docs show:
 * MD_DEFAULT_TEXT(MD_POLICY_TAU_DEFAULT) is "3.0". */
#define MD_DEFAULT_TEXT_(value) #value
#define MD_DEFAULT_TEXT(value) MD_DEFAULT_TEXT_(value)

#define MD_POLICY_PAGE_SIZE_DEFAULT 16       /* tokens per KV-cache page */
#define MD_POLICY_TAU_DEFAULT 3.0            /* refresh threshold, uniform-relative units */
#define MD_POLICY_EWMA_BETA_DEFAULT 0.9      /* attention EWMA weight of the past */
#define MD_POLICY_ALPHA_DEFAULT 0.6          /* weight of the attention term in the score */
#define MD_POLICY_KAPPA_DEFAULT 1.0          /* attention normaliser when not measured */
#define MD_POLICY_NORM_QUANTILE_DEFAULT 0.95 /* quantile of the EWMA that becomes kappa */

#endif
