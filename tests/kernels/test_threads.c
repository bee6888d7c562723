/* Threads that fit the machine and the work (kernels/cpu/threads.c,
 * md_cpu_team): a run never computes with more threads than the CPUs it
 * may run on, whatever it asks for, and a parallel region's team follows
 * its work. */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The cgroup v2 quota reader on files we write: a quota, "max", and every
 * malformed form gives "no limit" (INT_MAX), never a crash or a zero. */
static char quota_dir[64];

static void write_text(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", quota_dir, name);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

static int quota_with(const char *proc_cgroup, const char *cpu_max) {
  char cgroup[256], root[128], dir[192];
  write_text("cgroup", proc_cgroup);
  snprintf(root, sizeof root, "%s/fs", quota_dir);
  snprintf(dir, sizeof dir, "%s/job", root);
  mkdir(root, 0700);
  mkdir(dir, 0700);
  char max_path[256];
  snprintf(max_path, sizeof max_path, "%s/cpu.max", dir);
  if (cpu_max) {
    FILE *f = fopen(max_path, "w");
    CHECK(f != NULL);
    if (f) {
      fputs(cpu_max, f);
      fclose(f);
    }
  } else {
    unlink(max_path);
  }
  snprintf(cgroup, sizeof cgroup, "%s/cgroup", quota_dir);
  return md_cpu_quota_cpus(cgroup, root);
}

static void test_quota(void) {
  snprintf(quota_dir, sizeof quota_dir, "/tmp/md-quota-XXXXXX");
  CHECK(mkdtemp(quota_dir) != NULL);
  const char *unified = "12:cpu:/elsewhere\n0::/job\n";
  CHECK(quota_with(unified, "150000 100000\n") == 2);  /* 1.5 CPUs round up */
  CHECK(quota_with(unified, "200000 100000\n") == 2);
  CHECK(quota_with(unified, "100000 100000") == 1);     /* no newline */
  CHECK(quota_with(unified, "max 100000\n") == INT_MAX);
  CHECK(quota_with(unified, "") == INT_MAX);
  CHECK(quota_with(unified, "garbage\n") == INT_MAX);
  CHECK(quota_with(unified, "150000\n") == INT_MAX);    /* no period */
  CHECK(quota_with(unified, "0 100000\n") == INT_MAX);
  CHECK(quota_with(unified, "-5 100000\n") == INT_MAX);
  CHECK(quota_with(unified, "150000 0\n") == INT_MAX);
  CHECK(quota_with(unified, "150000 -1\n") == INT_MAX);
  CHECK(quota_with(unified, "99999999999999999999999 1\n") == INT_MAX); /* overflows */
  CHECK(quota_with(unified, "9223372036854775807 1\n") == INT_MAX);     /* > INT_MAX CPUs */
  CHECK(quota_with(unified, NULL) == INT_MAX);                          /* no cpu.max */
  CHECK(quota_with("12:cpu:/job\n", "150000 100000\n") == INT_MAX);    /* v1 only */
  CHECK(quota_with("", "150000 100000\n") == INT_MAX);
  /* A line longer than the reader's buffer is skipped whole: its tail is
   * not taken for a line of its own. */
  char long_line[600];
  memset(long_line, 'x', sizeof long_line);
  memcpy(long_line, "3::", 3);
  /* fgets with the reader's 512-byte buffer stops after 511 bytes: the
   * next read starts here, with what looks like the unified line. */
  memcpy(long_line + 511, "0::/job\n", 9);
  CHECK(quota_with(long_line, "150000 100000\n") == INT_MAX);
  char two_lines[700];
  snprintf(two_lines, sizeof two_lines, "%s0::/job\n", long_line);
  CHECK(quota_with(two_lines, "300000 100000\n") == 3);
  CHECK(md_cpu_quota_cpus("/nonexistent/cgroup", "/nonexistent") == INT_MAX);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", quota_dir);
  CHECK(system(cmd) == 0);
}

int main(void) {
  test_cap();
  test_team();
  test_quota();
  printf("%d checks, %d failed\n", md_test_checks, md_test_failures);
  return md_test_failures != 0;
}
