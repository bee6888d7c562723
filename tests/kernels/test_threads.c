/* Threads that fit the machine and the work (kernels/cpu/threads.c,
 * md_cpu_team): a run never computes with more threads than the CPUs it
 * may run on, whatever it asks for, and a parallel region's team follows
 * its work. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_internal.h"
#include "kernels/device.h"
#include "tests/test_util.h"

static void test_cap(void) {
  int available = md_cpu_available();
  CHECK(available >= 1);
  CHECK(md_cpu_threads(0) == available);
  CHECK(md_cpu_threads(-3) == available);
  CHECK(md_cpu_threads(1) == 1);
  CHECK_MSG(md_cpu_threads(8 * available) == available, "asked %d, got %d of %d CPUs",
            8 * available, md_cpu_threads(8 * available), available);
  CHECK(md_device_threads(8 * available) == available);
  /* Pinned to one CPU (what taskset or a Slurm cpuset does): one thread,
   * however many are asked for. */
  cpu_set_t all, one;
  if (sched_getaffinity(0, sizeof all, &all) != 0) return;
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &all)) first++;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) return;
  CHECK_MSG(md_cpu_available() == 1, "pinned to CPU %d: %d CPUs available", first,
            md_cpu_available());
  CHECK(md_cpu_threads(16) == 1);
  CHECK(md_device_threads(16) == 1);
  md_kernels *k = NULL;
  md_error err;
  md_cpu_options o = {.threads = 16};
  CHECK(md_kernels_cpu_new(&o, &k, &err) == MD_OK);
  char text[2048] = "";
  if (k) md_device_describe(k, 16, text, sizeof text);
  md_kernels_free(k);
  sched_setaffinity(0, sizeof all, &all);
  CHECK(md_cpu_available() == available);
}

static void test_team(void) {
  int64_t g = 1000;
  CHECK(md_cpu_team(16, 0, g) == 1);         /* no work: one thread */
  CHECK(md_cpu_team(16, g - 1, g) == 1);     /* less than a grain */
  CHECK(md_cpu_team(16, 2 * g + 1, g) == 2); /* a thread per whole grain */
  CHECK(md_cpu_team(4, 100 * g, g) == 4);    /* never more than asked */
  CHECK(md_cpu_team(1, 100 * g, g) == 1);
  CHECK(md_cpu_team(3, 5, 0) == 3);          /* no grain: every thread */
}

int main(void) {
  test_cap();
  test_team();
  printf("%d checks, %d failed\n", md_test_checks, md_test_failures);
  return md_test_failures != 0;
}
