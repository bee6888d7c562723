/* How many threads a CPU run computes with: what was asked, never more than
 * the CPUs this process may run on. A thread beyond them does not add a
 * core: it takes turns with another on one, and every parallel region
 * waits at its barrier for the thread that is not running. */
#define _GNU_SOURCE
#include <limits.h>
#include <omp.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_internal.h"

int md_cpu_quota_cpus(const char *proc_cgroup, const char *cgroup_root) {
  char line[512], path[1024];
  FILE *f = fopen(proc_cgroup, "r");
  if (!f) return INT_MAX;
  path[0] = '\0';
  while (fgets(line, sizeof line, f)) {
    bool whole_line = strchr(line, '\n') || feof(f);
    if (whole_line && strncmp(line, "0::", 3) == 0) { /* the unified hierarchy */
      line[strcspn(line, "\n")] = '\0';
      snprintf(path, sizeof path, "%s%s/cpu.max", cgroup_root, line + 3);
    }
    /* the rest of a line longer than the buffer is read and ignored */
    while (!whole_line && fgets(line, sizeof line, f)) whole_line = strchr(line, '\n') != NULL;
  }
  fclose(f);
  if (!path[0] || !(f = fopen(path, "r"))) return INT_MAX;
  long long quota = 0, period = 0;
  char first[32] = "";
  int fields = fscanf(f, "%31s %lld", first, &period);
  fclose(f);
  if (fields != 2 || strcmp(first, "max") == 0 || sscanf(first, "%lld", &quota) != 1 ||
      quota <= 0 || period <= 0)
    return INT_MAX;
  long long cpus = quota / period + (quota % period != 0); /* rounded up, never overflowing */
  return cpus < INT_MAX ? (int)cpus : INT_MAX;
}

/* The CPUs of this thread's affinity mask (taskset, Slurm's cpusets), read
 * now: OpenMP runtimes read it once (LLVM's at start-up), and a process may
 * have been pinned since. */
static int affinity_cpus(void) {
  for (int size = 1024; size <= (1 << 20); size *= 4) {
    cpu_set_t *set = CPU_ALLOC((size_t)size);
    if (!set) break;
    size_t bytes = CPU_ALLOC_SIZE((size_t)size);
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(0, bytes, set) == 0) {
      int count = CPU_COUNT_S(bytes, set);
      CPU_FREE(set);
      return count;
    }
    CPU_FREE(set);
  }
  return omp_get_num_procs();
}

int md_cpu_available(void) {
  int cpus = affinity_cpus();
  int quota = md_cpu_quota_cpus("/proc/self/cgroup", "/sys/fs/cgroup");
  if (quota < cpus) cpus = quota;
  return cpus > 0 ? cpus : 1;
}

int md_cpu_threads(int requested) {
  int available = md_cpu_available();
  int threads = requested > 0 && requested < available ? requested : available;
  int limit = omp_get_thread_limit(); /* OMP_THREAD_LIMIT */
  return limit > 0 && threads > limit ? limit : threads;
}

void md_cpu_run(int team, void (*fn)(void *), void *arg) {
  if (team > 1) {
#pragma omp parallel num_threads(team)
    fn(arg);
  } else {
    fn(arg);
  }
}
