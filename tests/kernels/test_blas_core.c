/* The OpenBLAS core choice (kernels/cpu/blas_core.h): the best core for
 * hand-written CPUs, the ranks of core names, and the decisions for every
 * state of the environment, including that each switch ends.
 *
 *   test_blas_core              runs the checks (and those of the CPU's
 *                               identity in md_cpu_facts)
 *   test_blas_core --best-core  prints the best core for this CPU ("none"
 *                               when OpenBLAS's choice is to be left)
 *   test_blas_core --current-core  prints the core OpenBLAS runs (this
 *                               program never switches it) */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/blas_core.h"
#include "kernels/cpu/cpu_internal.h"
#include "tests/test_util.h"

static const md_cpu_facts sse_only = {.vendor = MD_CPU_VENDOR_INTEL};
static const md_cpu_facts avx_only = {.vendor = MD_CPU_VENDOR_INTEL, .avx = true};
static const md_cpu_facts intel_avx2 = {.vendor = MD_CPU_VENDOR_INTEL, .avx = true, .avx2 = true,
                                        .fma = true, .f16c = true};
static const md_cpu_facts amd_avx2 = {.vendor = MD_CPU_VENDOR_AMD, .avx = true, .avx2 = true,
                                      .fma = true, .f16c = true};
static const md_cpu_facts intel_avx512 = {.vendor = MD_CPU_VENDOR_INTEL, .avx = true, .avx2 = true,
                                          .fma = true, .f16c = true, .avx512f = true,
                                          .avx512bw = true, .avx512vl = true, .avx512dq = true,
                                          .avx512cd = true};

static bool same(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

static void test_best(void) {
  CHECK(same(md_blas_core_best(&intel_avx512), "SkylakeX"));
  md_cpu_facts amd_avx512 = intel_avx512;
  amd_avx512.vendor = MD_CPU_VENDOR_AMD; /* Zen 4 */
  CHECK(same(md_blas_core_best(&amd_avx512), "SkylakeX"));
  CHECK(same(md_blas_core_best(&amd_avx2), "Zen"));
  CHECK(same(md_blas_core_best(&intel_avx2), "Haswell"));
  md_cpu_facts other_avx2 = intel_avx2;
  other_avx2.vendor = MD_CPU_VENDOR_OTHER;
  CHECK(same(md_blas_core_best(&other_avx2), "Haswell"));
  CHECK(same(md_blas_core_best(&avx_only), "Sandybridge"));
  CHECK(same(md_blas_core_best(&sse_only), NULL));
  /* AVX-512 needs all five subsets (Knights Landing lacks BW, VL and DQ). */
  md_cpu_facts knl = intel_avx512;
  knl.avx512bw = knl.avx512vl = knl.avx512dq = false;
  CHECK(same(md_blas_core_best(&knl), "Haswell"));
  /* AVX2 without FMA is not enough for the AVX2 cores. */
  md_cpu_facts no_fma = intel_avx2;
  no_fma.fma = false;
  CHECK(same(md_blas_core_best(&no_fma), "Sandybridge"));
  CHECK(md_blas_cpu_rank(&intel_avx512) == 4);
  CHECK(md_blas_cpu_rank(&amd_avx2) == 3);
  CHECK(md_blas_cpu_rank(&avx_only) == 2);
  CHECK(md_blas_cpu_rank(&sse_only) == 1);
}

static void test_ranks(void) {
  const char *sse[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                       "Opteron", "Barcelona", "Bobcat", "Katmai", "prescott", "NEHALEM"};
  for (size_t i = 0; i < sizeof sse / sizeof sse[0]; i++)
    CHECK_MSG(md_blas_core_rank(sse[i]) == 1, "%s", sse[i]);
  const char *avx[] = {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller", "sandybridge"};
  for (size_t i = 0; i < sizeof avx / sizeof avx[0]; i++)
    CHECK_MSG(md_blas_core_rank(avx[i]) == 2, "%s", avx[i]);
  const char *avx2[] = {"Haswell", "Zen", "Excavator", "zen", "HASWELL"};
  for (size_t i = 0; i < sizeof avx2 / sizeof avx2[0]; i++)
    CHECK_MSG(md_blas_core_rank(avx2[i]) == 3, "%s", avx2[i]);
  const char *avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", "skylakex"};
  for (size_t i = 0; i < sizeof avx512 / sizeof avx512[0]; i++)
    CHECK_MSG(md_blas_core_rank(avx512[i]) == 4, "%s", avx512[i]);
  const char *unknown[] = {"", "Unknown", "ARMV8", "NeoverseN1", "Zen4", "Haswel", "keep"};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
    CHECK_MSG(md_blas_core_rank(unknown[i]) == 0, "'%s'", unknown[i]);
  CHECK(md_blas_core_rank(NULL) == 0);
}

/* The environment after a REEXEC of `d`, as main.c sets it. */
static md_blas_env after(const md_blas_env *env, const md_blas_decision *d) {
  md_blas_env next = *env;
  next.coretype = d->coretype;
  next.from = d->from;
  return next;
}

/* Follows the decisions the way main.c does, with a library that runs
 * whatever core it is asked for when `honours`, else stays on `library`:
 * returns the final decision and the core then running, and checks that
 * it ends within `max_execs` executions. */
static md_blas_decision follow(md_blas_env env, const char *library, bool honours,
                               const md_cpu_facts *facts, int max_execs, const char **running) {
  const char *current = env.coretype && honours ? env.coretype : library;
  md_blas_decision d = md_blas_core_decide(&env, current, facts);
  int execs = 0;
  while (d.action == MD_BLAS_REEXEC && execs <= max_execs) {
    execs++;
    env = after(&env, &d);
    current = honours ? env.coretype : library;
    d = md_blas_core_decide(&env, current, facts);
  }
  CHECK_MSG(execs <= max_execs, "%d executions", execs);
  *running = current;
  return d;
}

static void test_decide(void) {
  const char *core;
  md_blas_decision d;
  /* A library that chose the best core: nothing to do. */
  d = follow((md_blas_env){0}, "Zen", true, &amd_avx2, 0, &core);
  CHECK(d.action == MD_BLAS_STAY && d.origin == MD_BLAS_ORIGIN_LIBRARY && same(core, "Zen"));
  CHECK(same(d.best, "Zen"));
  /* A library that fell back to Prescott: one switch, to the best. */
  d = follow((md_blas_env){0}, "Prescott", true, &intel_avx512, 1, &core);
  CHECK(d.action == MD_BLAS_STAY && d.origin == MD_BLAS_ORIGIN_SWITCHED);
  CHECK(same(core, "SkylakeX") && same(d.from, "Prescott"));
  d = md_blas_core_decide(&(md_blas_env){0}, "Prescott", &amd_avx2);
  CHECK(d.action == MD_BLAS_REEXEC && same(d.coretype, "Zen") && same(d.from, "Prescott"));
  /* Same rank, another name (Haswell on an AMD CPU): not worth a switch. */
  d = md_blas_core_decide(&(md_blas_env){0}, "Haswell", &amd_avx2);
  CHECK(d.action == MD_BLAS_STAY);
  /* Wider than the best (never expected) and unknown names: untouched. */
  CHECK(md_blas_core_decide(&(md_blas_env){0}, "SkylakeX", &amd_avx2).action == MD_BLAS_STAY);
  CHECK(md_blas_core_decide(&(md_blas_env){0}, "ARMV8", &amd_avx2).action == MD_BLAS_STAY);
  CHECK(md_blas_core_decide(&(md_blas_env){0}, "", &amd_avx2).action == MD_BLAS_STAY);
  /* An SSE-only CPU: nothing better. */
  CHECK(md_blas_core_decide(&(md_blas_env){0}, "Prescott", &sse_only).action == MD_BLAS_STAY);
  /* A library without the kernels: one switch, then the warning, no loop. */
  d = follow((md_blas_env){0}, "Prescott", false, &intel_avx512, 1, &core);
  CHECK(d.action == MD_BLAS_WARN_WEAK && same(d.requested, "SkylakeX") && same(core, "Prescott"));

  /* ... but not one this CPU cannot run (SIGILL at the first product):
   * replaced by the best it runs, once, then left alone. */
  md_blas_env wide = {.coretype = "SkylakeX"};
  d = md_blas_core_decide(&wide, "SkylakeX", &amd_avx2);
  CHECK(d.action == MD_BLAS_REPLACE && same(d.requested, "SkylakeX") && same(d.coretype, "Zen") &&
        same(d.from, "SkylakeX"));
  wide = after(&wide, &d);
  d = md_blas_core_decide(&wide, "Zen", &amd_avx2);
  CHECK(d.action == MD_BLAS_STAY && d.origin == MD_BLAS_ORIGIN_SWITCHED);
  d = md_blas_core_decide(&(md_blas_env){.coretype = "Haswell"}, "Haswell", &sse_only);
  CHECK(d.action == MD_BLAS_REPLACE && same(d.coretype, "Prescott"));
  d = md_blas_core_decide(&(md_blas_env){.coretype = "SkylakeX"}, "SkylakeX", &intel_avx512);
  CHECK(d.action == MD_BLAS_STAY && d.origin == MD_BLAS_ORIGIN_USER);

  /* The user's OPENBLAS_CORETYPE is respected, whatever else is set. */
  const char *settings[] = {NULL, "auto", "simulate-weak", "Haswell", "keep"};
  for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
    md_blas_env env = {.coretype = "Prescott", .setting = settings[i]};
    d = md_blas_core_decide(&env, "Prescott", &amd_avx2);
    CHECK_MSG(d.action == MD_BLAS_STAY && d.origin == MD_BLAS_ORIGIN_USER, "%s",
              settings[i] ? settings[i] : "(unset)");
  }
  /* keep: OpenBLAS's choice stays. */
  d = md_blas_core_decide(&(md_blas_env){.setting = "keep"}, "Prescott", &amd_avx2);
  CHECK(d.action == MD_BLAS_STAY && d.origin == MD_BLAS_ORIGIN_KEEP);

  /* simulate-weak: Prescott first, then the normal switch to the best. */
  md_blas_env sim = {.setting = "simulate-weak"};
  d = md_blas_core_decide(&sim, "Zen", &amd_avx2);
  CHECK(d.action == MD_BLAS_REEXEC && same(d.coretype, "Prescott") && same(d.from, "Prescott"));
  sim = after(&sim, &d);
  d = md_blas_core_decide(&sim, "Prescott", &amd_avx2);
  CHECK(d.action == MD_BLAS_REEXEC && same(d.coretype, "Zen") && same(d.from, "Prescott"));
  d = follow((md_blas_env){.setting = "simulate-weak"}, "Zen", true, &amd_avx2, 2, &core);
  CHECK(d.action == MD_BLAS_STAY && d.origin == MD_BLAS_ORIGIN_SWITCHED && same(d.from, "Prescott"));
  CHECK(same(core, "Zen"));
  d = follow((md_blas_env){.setting = "simulate-weak"}, "Prescott", true, &sse_only, 1, &core);
  CHECK(d.action == MD_BLAS_STAY && d.origin == MD_BLAS_ORIGIN_SIMULATED && same(core, "Prescott"));

  /* A forced core: switched to unless already so; refused when unknown or
   * wider than the CPU runs. */
  d = follow((md_blas_env){.setting = "sandybridge"}, "Zen", true, &amd_avx2, 1, &core);
  CHECK(d.action == MD_BLAS_STAY && d.origin == MD_BLAS_ORIGIN_SWITCHED && same(core, "sandybridge"));
  CHECK(md_blas_core_decide(&(md_blas_env){.setting = "zen"}, "Zen", &amd_avx2).action == MD_BLAS_STAY);
  d = md_blas_core_decide(&(md_blas_env){.setting = "SkylakeX"}, "Zen", &amd_avx2);
  CHECK(d.action == MD_BLAS_WARN_SETTING && same(d.requested, "SkylakeX"));
  d = md_blas_core_decide(&(md_blas_env){.setting = "Zen4"}, "Zen", &amd_avx2);
  CHECK(d.action == MD_BLAS_WARN_SETTING && same(d.requested, "Zen4"));
  CHECK(md_blas_core_decide(&(md_blas_env){.setting = "auto"}, "Prescott", &amd_avx2).action ==
        MD_BLAS_REEXEC);
  CHECK(md_blas_core_decide(&(md_blas_env){.setting = ""}, "Prescott", &amd_avx2).action ==
        MD_BLAS_REEXEC);

  /* A marker without OPENBLAS_CORETYPE is stale: decided afresh. */
  d = md_blas_core_decide(&(md_blas_env){.from = "Prescott"}, "Prescott", &amd_avx2);
  CHECK(d.action == MD_BLAS_REEXEC && same(d.coretype, "Zen"));
}

/* The CPUs the AMD defaults were measured on and the ones they were not. */
static void test_zen5_or_later(void) {
  md_cpu_facts amd_avx512 = intel_avx512;
  amd_avx512.vendor = MD_CPU_VENDOR_AMD;
  md_cpu_facts zen4 = amd_avx512, zen5 = amd_avx512, later = amd_avx512, intel = intel_avx512;
  zen4.family = 25, zen4.model = 17;
  zen5.family = 26, zen5.model = 2;
  later.family = 27;
  intel.family = 6, intel.model = 207;
  CHECK(!md_cpu_amd_zen5_or_later(&zen4));
  CHECK(md_cpu_amd_zen5_or_later(&zen5));
  CHECK(md_cpu_amd_zen5_or_later(&later));
  CHECK(!md_cpu_amd_zen5_or_later(&intel));
  CHECK(!md_cpu_amd_zen5_or_later(&(md_cpu_facts){.family = 26})); /* another vendor */
  md_cpu_facts here = md_cpu_read_facts();
  CHECK(md_cpu_amd_zen5_or_later_once() == md_cpu_amd_zen5_or_later(&here));
}

/* The reader against the compiler's own (which also asks the OS). */
static void test_facts(void) {
  md_cpu_facts f = md_cpu_read_facts();
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  CHECK(f.avx == !!__builtin_cpu_supports("avx"));
  CHECK(f.avx2 == !!__builtin_cpu_supports("avx2"));
  CHECK(f.fma == !!__builtin_cpu_supports("fma"));
  CHECK(f.avx512f == !!__builtin_cpu_supports("avx512f"));
  CHECK(f.avx512bw == !!__builtin_cpu_supports("avx512bw"));
  CHECK(f.avx512vl == !!__builtin_cpu_supports("avx512vl"));
  CHECK(f.avx512dq == !!__builtin_cpu_supports("avx512dq"));
  CHECK(f.avx512cd == !!__builtin_cpu_supports("avx512cd"));
#endif
#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
  /* The vendor, family and model against the kernel's reading of CPUID,
   * the first processor of /proc/cpuinfo. */
  FILE *in = fopen("/proc/cpuinfo", "r");
  CHECK_MSG(in != NULL, "cannot read /proc/cpuinfo");
  int family = -1, model = -1;
  char vendor[64] = "", line[1024];
  while (in && fgets(line, sizeof line, in) && line[0] != '\n') {
    (void)sscanf(line, "vendor_id : %63s", vendor);
    (void)sscanf(line, "cpu family : %d", &family);
    (void)sscanf(line, "model : %d", &model); /* not "model name": ':' fails at 'n' */
  }
  if (in) fclose(in);
  md_cpu_vendor want = !strcmp(vendor, "GenuineIntel") ? MD_CPU_VENDOR_INTEL
                       : !strcmp(vendor, "AuthenticAMD") ? MD_CPU_VENDOR_AMD
                                                          : MD_CPU_VENDOR_OTHER;
  CHECK_MSG(f.vendor == want, "vendor %s, /proc/cpuinfo '%s'", md_cpu_vendor_name(f.vendor), vendor);
  CHECK_MSG(f.family == family && f.model == model, "family %d model %d, /proc/cpuinfo %d %d",
            f.family, f.model, family, model);
#endif
  printf("this CPU: %s family %d model %d\n", md_cpu_vendor_name(f.vendor), f.family, f.model);
  printf("this CPU: best OpenBLAS core %s; OpenBLAS runs %s (%s)\n",
         md_blas_core_best(&f) ? md_blas_core_best(&f) : "none", md_blas_core_current(),
         md_blas_config());
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--best-core")) {
    md_cpu_facts f = md_cpu_read_facts();
    const char *best = md_blas_core_best(&f);
    printf("%s\n", best ? best : "none");
    return 0;
  }
  if (argc == 2 && !strcmp(argv[1], "--current-core")) {
    printf("%s\n", md_blas_core_current());
    return 0;
  }
  test_best();
  test_ranks();
  test_decide();
  test_facts();
  test_zen5_or_later();
  return md_test_finish("test_blas_core");
}
