/* OpenBLAS's core: which it runs, which this CPU deserves, and when to
 * switch (see blas_core.h for why and for the environment it reads). */
#include "kernels/cpu/blas_core.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *md_blas_core_current(void) {
  const char *name = openblas_get_corename();
  return name ? name : "";
}

const char *md_blas_config(void) {
  const char *config = openblas_get_config();
  return config ? config : "";
}

void md_blas_library(char *out, size_t size) {
  if (size == 0) return;
  const char *config = md_blas_config();
  /* "OpenBLAS 0.3.21 NO_LAPACKE ...": up to the second space. */
  const char *space = strchr(config, ' ');
  if (space) space = strchr(space + 1, ' ');
  size_t n = space ? (size_t)(space - config) : strlen(config);
  snprintf(out, size, "%.*s", (int)n, config);
}

const char *md_blas_core_best(const md_cpu_facts *f) {
  if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512cd) return "SkylakeX";
  if (f->avx2 && f->fma) return f->vendor == MD_CPU_VENDOR_AMD ? "Zen" : "Haswell";
  if (f->avx) return "Sandybridge";
  return NULL;
}

int md_blas_cpu_rank(const md_cpu_facts *facts) {
  int rank = md_blas_core_rank(md_blas_core_best(facts));
  return rank > 0 ? rank : 1;
}

/* The core names of OpenBLAS's x86 DYNAMIC_ARCH builds (its corename
 * table), by the widest vectors their kernels use. */
static const struct {
  const char *name;
  int rank;
} core_ranks[] = {
    {"Katmai", 1},      {"Coppermine", 1},  {"Northwood", 1},      {"Prescott", 1},
    {"Banias", 1},      {"Atom", 1},        {"Core2", 1},          {"Penryn", 1},
    {"Dunnington", 1},  {"Nehalem", 1},     {"Westmere", 1},       {"Athlon", 1},
    {"Opteron", 1},     {"Opteron_SSE3", 1}, {"Barcelona", 1},     {"Nano", 1},
    {"Bobcat", 1},      {"Sandybridge", 2}, {"Bulldozer", 2},      {"Piledriver", 2},
    {"Steamroller", 2}, {"Haswell", 3},     {"Zen", 3},            {"Excavator", 3},
    {"SkylakeX", 4},    {"Cooperlake", 4},  {"SapphireRapids", 4},
};

int md_blas_core_rank(const char *name) {
  if (!name) return 0;
  for (size_t i = 0; i < sizeof core_ranks / sizeof core_ranks[0]; i++)
    if (!strcasecmp(name, core_ranks[i].name)) return core_ranks[i].rank;
  return 0;
}

static const char *set_or_null(const char *value) { return value && *value ? value : NULL; }

static bool same_name(const char *a, const char *b) { return a && b && !strcasecmp(a, b); }

/* Who chose the core when nothing is to be done now. */
static md_blas_origin origin_of(const char *coretype, const char *from) {
  if (!coretype) return MD_BLAS_ORIGIN_LIBRARY;
  if (!from) return MD_BLAS_ORIGIN_USER;
  return same_name(coretype, from) ? MD_BLAS_ORIGIN_SIMULATED : MD_BLAS_ORIGIN_SWITCHED;
}

md_blas_decision md_blas_core_decide(const md_blas_env *env, const char *current,
                                     const md_cpu_facts *facts) {
  const char *coretype = set_or_null(env->coretype);
  const char *setting = set_or_null(env->setting);
  /* A marker without OPENBLAS_CORETYPE is stale: ignore it. */
  const char *from = coretype ? set_or_null(env->from) : NULL;
  md_blas_decision d = {.action = MD_BLAS_STAY, .best = md_blas_core_best(facts)};
  d.origin = origin_of(coretype, from);
  if (d.origin == MD_BLAS_ORIGIN_SWITCHED) d.from = from;

  /* The user's OPENBLAS_CORETYPE is theirs to set, but for a core this CPU
   * cannot run, which would stop the program on an illegal instruction at
   * its first matrix product: that one is replaced by the best this CPU
   * runs, with a warning. */
  if (d.origin == MD_BLAS_ORIGIN_USER) {
    if (md_blas_core_rank(coretype) > md_blas_cpu_rank(facts)) {
      d.action = MD_BLAS_REPLACE;
      d.requested = coretype;
      d.coretype = d.best ? d.best : MD_BLAS_WEAK_CORE;
      d.from = current && *current && !same_name(current, d.coretype) ? current : coretype;
    }
    return d;
  }
  if (setting && !strcmp(setting, "keep")) {
    if (d.origin == MD_BLAS_ORIGIN_LIBRARY) d.origin = MD_BLAS_ORIGIN_KEEP;
    return d;
  }
  /* Executed again after a switch: done; say so if the library did not
   * honour it (a build without those kernels falls back to others). */
  if (d.origin == MD_BLAS_ORIGIN_SWITCHED) {
    if (md_blas_core_rank(current) < md_blas_core_rank(coretype)) {
      d.action = MD_BLAS_WARN_WEAK;
      d.requested = coretype;
    }
    return d;
  }
  bool simulate = setting && !strcmp(setting, "simulate-weak");
  if (simulate && d.origin == MD_BLAS_ORIGIN_LIBRARY) {
    /* Start as if OpenBLAS had chosen Prescott on its own: the marker equal
     * to OPENBLAS_CORETYPE says the value is ours, not switched yet. */
    d.action = MD_BLAS_REEXEC;
    d.requested = d.coretype = d.from = MD_BLAS_WEAK_CORE;
    return d;
  }
  /* From here OpenBLAS's choice (or the simulated one) is to be judged. */
  const char *chosen = d.origin == MD_BLAS_ORIGIN_SIMULATED ? from : current;
  if (setting && !simulate && strcmp(setting, "auto")) {
    /* A forced core: one this table knows and this CPU runs (a wider one
     * would stop on an illegal instruction). */
    int rank = md_blas_core_rank(setting);
    if (rank == 0 || rank > md_blas_cpu_rank(facts)) {
      d.action = MD_BLAS_WARN_SETTING;
      d.requested = setting;
    } else if (!same_name(current, setting)) {
      d.action = MD_BLAS_REEXEC;
      d.requested = d.coretype = setting;
      d.from = chosen;
    }
    return d;
  }
  int rank = md_blas_core_rank(current);
  if (rank > 0 && d.best && rank < md_blas_core_rank(d.best)) {
    d.action = MD_BLAS_REEXEC;
    d.requested = d.coretype = d.best;
    d.from = chosen;
  }
  return d;
}
