/* Which kernels OpenBLAS runs, and which it should run on this CPU.
 *
 * Why: a DYNAMIC_ARCH OpenBLAS picks its kernels ("core") once, when the
 * library loads, from the CPU model. On CPUs newer than the library knows
 * it falls back to its SSE3 (Prescott) kernels, several times slower for
 * sgemm than the AVX2 or AVX-512 kernels the same library has. It reads
 * OPENBLAS_CORETYPE only at load time, so the only fix from inside the
 * program is to set that variable and execute the program again. This
 * module decides; the program (calib/main.c) sets the environment, executes
 * itself and prints. Nothing here prints, exits or changes the environment.
 *
 * The environment the decision reads:
 *   OPENBLAS_CORETYPE    OpenBLAS's own variable. Set by the user, it is
 *                        respected: nothing is switched.
 *   MEMDECAY_BLAS_CORE   unset, empty or "auto": switch to the best core
 *                        for this CPU when OpenBLAS chose a narrower one;
 *                        "keep": never switch; a core name ("Haswell"):
 *                        use that core (not one wider than this CPU runs);
 *                        "simulate-weak" (for tests): start as if OpenBLAS
 *                        had chosen Prescott on its own, then decide as for
 *                        "auto".
 *   MD_BLAS_CORE_FROM    the marker this program sets when it sets
 *                        OPENBLAS_CORETYPE itself: the core OpenBLAS had
 *                        chosen. It tells the executed program that
 *                        OPENBLAS_CORETYPE is not the user's, and stops
 *                        loops: once OPENBLAS_CORETYPE differs from the
 *                        marker the switch is done. */
#ifndef MD_KERNELS_CPU_BLAS_CORE_H
#define MD_KERNELS_CPU_BLAS_CORE_H

#include <stddef.h>

#include "kernels/cpu/cpu.h"
#include "kernels/device.h"

#define MD_BLAS_ENV_CORETYPE MD_DEVICE_ENV_BLAS_CORETYPE
#define MD_BLAS_ENV_SETTING MD_DEVICE_ENV_BLAS_SETTING
#define MD_BLAS_ENV_FROM MD_DEVICE_ENV_BLAS_FROM
/* The core "simulate-weak" starts on. */
#define MD_BLAS_WEAK_CORE "Prescott"

/* The core OpenBLAS runs ("Zen", "Haswell", "Prescott"; never NULL, "" when
 * the library does not say) and its build configuration ("OpenBLAS 0.3.21
 * NO_LAPACKE DYNAMIC_ARCH ..."). */
const char *md_blas_core_current(void);
const char *md_blas_config(void);

/* The library and version, the first two words of md_blas_config()
 * ("OpenBLAS 0.3.21"), into out (always terminated). */
void md_blas_library(char *out, size_t size);

/* The widest OpenBLAS core for a CPU with these facts: AVX-512
 * F+BW+VL+DQ+CD: "SkylakeX"; else AVX2+FMA: "Zen" on AMD, "Haswell"
 * otherwise; else AVX: "Sandybridge"; else NULL (leave OpenBLAS's choice). */
const char *md_blas_core_best(const md_cpu_facts *facts);

/* The vector width class of an OpenBLAS core name, case-insensitive: 1 for
 * the SSE-era cores (Prescott, Core2, Nehalem, Atom, Opteron, Barcelona,
 * ...), 2 for AVX (Sandybridge, Bulldozer, Piledriver, Steamroller), 3 for
 * AVX2 (Haswell, Zen, Excavator), 4 for AVX-512 (SkylakeX, Cooperlake,
 * SapphireRapids); 0 for NULL and names this table does not know, which
 * are never switched. */
int md_blas_core_rank(const char *name);

/* The widest rank this CPU runs: 4, 3, 2 as md_blas_core_best, else 1. */
int md_blas_cpu_rank(const md_cpu_facts *facts);

/* The environment of md_blas_core_decide (each NULL when unset). */
typedef struct md_blas_env {
  const char *coretype; /* OPENBLAS_CORETYPE */
  const char *setting;  /* MEMDECAY_BLAS_CORE */
  const char *from;     /* MD_BLAS_CORE_FROM */
} md_blas_env;

typedef enum md_blas_action {
  MD_BLAS_STAY = 0,   /* go on with the loaded library */
  MD_BLAS_REEXEC,     /* set OPENBLAS_CORETYPE=coretype and MD_BLAS_CORE_FROM=from, execute again */
  MD_BLAS_WARN_WEAK,  /* go on, but the library lacks the kernels asked for: say so */
  MD_BLAS_WARN_SETTING, /* go on, but MEMDECAY_BLAS_CORE names no core this CPU runs: say so */
  MD_BLAS_REPLACE,    /* the user's OPENBLAS_CORETYPE names a core this CPU cannot run (an
                         illegal instruction at the first product): say so, then as REEXEC */
} md_blas_action;

/* Who chose the core running now. */
typedef enum md_blas_origin {
  MD_BLAS_ORIGIN_LIBRARY = 0, /* OpenBLAS itself */
  MD_BLAS_ORIGIN_USER,        /* the user's OPENBLAS_CORETYPE */
  MD_BLAS_ORIGIN_KEEP,        /* MEMDECAY_BLAS_CORE=keep: OpenBLAS itself, by request */
  MD_BLAS_ORIGIN_SWITCHED,    /* this program, from OpenBLAS's choice `from` */
  MD_BLAS_ORIGIN_SIMULATED,   /* simulate-weak's Prescott, not switched (nothing wider here) */
} md_blas_origin;

typedef struct md_blas_decision {
  md_blas_action action;
  md_blas_origin origin;
  const char *best;      /* md_blas_core_best of the facts, or NULL */
  const char *requested; /* the core asked for: REEXEC sets it, WARN_WEAK lacks it,
                            WARN_SETTING and REPLACE refuse it; else NULL */
  const char *coretype;  /* REEXEC, REPLACE: the value for OPENBLAS_CORETYPE */
  const char *from;      /* REEXEC, REPLACE: the value for MD_BLAS_CORE_FROM; SWITCHED:
                            the core OpenBLAS had chosen */
} md_blas_decision;

/* What to do, given the environment, the core OpenBLAS runs now and the
 * CPU. Pure: the strings returned are `env`'s, `current`'s or constants.
 * Each REEXEC leads to a state where the next call returns no REEXEC,
 * except simulate-weak's first, which leads to one more. */
md_blas_decision md_blas_core_decide(const md_blas_env *env, const char *current,
                                     const md_cpu_facts *facts);

#endif
