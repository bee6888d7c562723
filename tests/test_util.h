/* A minimal test harness: each test program runs its checks, prints every
 * failure with file and line, and exits non-zero when any failed. */
#ifndef MD_TESTS_TEST_UTIL_H
#define MD_TESTS_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int md_test_failures = 0;
static int md_test_checks = 0;

#define CHECK(cond)                                                     \
  do {                                                                  \
    md_test_checks++;                                                   \
    if (!(cond)) {                                                      \
      md_test_failures++;                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                   \
  } while (0)

#define CHECK_MSG(cond, ...)                                            \
  do {                                                                  \
    md_test_checks++;                                                   \
    if (!(cond)) {                                                      \
      md_test_failures++;                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                     \
      fputc('\n', stderr);                                              \
    }                                                                   \
  } while (0)

/* |got - want| <= rtol * max(|want|, atol_floor): relative tolerance with an
 * absolute floor for values near zero. NaN matches only NaN. */
static inline int md_test_close(double got, double want, double rtol, double floor_abs) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  double scale = fabs(want) > floor_abs ? fabs(want) : floor_abs;
  return fabs(got - want) <= rtol * scale;
}

#define CHECK_CLOSE(got, want, rtol)                                    \
  do {                                                                  \
    double md_got_ = (got), md_want_ = (want);                          \
    md_test_checks++;                                                   \
    if (!md_test_close(md_got_, md_want_, (rtol), 1.0)) {               \
      md_test_failures++;                                               \
      fprintf(stderr, "%s:%d: %s = %.17g, expected %.17g (rtol %g)\n", __FILE__, __LINE__, \
              #got, md_got_, md_want_, (double)(rtol));                 \
    }                                                                   \
  } while (0)

/* Relative closeness with no absolute floor (for small but exact values). */
#define CHECK_REL(got, want, rtol)                                      \
  do {                                                                  \
    double md_got_ = (got), md_want_ = (want);                          \
    md_test_checks++;                                                   \
    if (!md_test_close(md_got_, md_want_, (rtol), 0.0)) {               \
      md_test_failures++;                                               \
      fprintf(stderr, "%s:%d: %s = %.17g, expected %.17g (rtol %g)\n", __FILE__, __LINE__, \
              #got, md_got_, md_want_, (double)(rtol));                 \
    }                                                                   \
  } while (0)

static inline int md_test_finish(const char *name) {
  if (md_test_failures) {
    fprintf(stderr, "%s: %d of %d checks failed\n", name, md_test_failures, md_test_checks);
    return 1;
  }
  printf("%s: all %d checks passed\n", name, md_test_checks);
  return 0;
}

#endif
