/* How many threads a CPU run computes with: what was asked, never more than
 * the CPUs this process may run on. A thread beyond them does not add a
 * core: it takes turns with another on one, and every parallel region
 * waits at its barrier for the thread that is not running (on a 2-core
 * machine the demo's `run` took 57 s with 16 threads against 1 s with 2). */
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

/* The CPUs a cgroup v2 CPU quota allows ("QUOTA PERIOD" in cpu.max,
 * rounded up; containers limited with `--cpus`), or INT_MAX without one. */
static int quota_cpus(void) {
  char line[512], path[640];
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return INT_MAX;
  path[0] = '\0';
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "0::", 3) == 0) { /* the unified hierarchy */
      line[strcspn(line, "\n")] = '\0';
      snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", line + 3);
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
  long long cpus = (quota + period - 1) / period;
  return cpus < INT_MAX ? (int)cpus : INT_MAX;
}

int md_cpu_available(void) {
  int cpus = omp_get_num_procs(); /* the affinity mask's CPUs (taskset, Slurm's cpusets) */
  int quota = quota_cpus();
  if (quota < cpus) cpus = quota;
  return cpus > 0 ? cpus : 1;
}

int md_cpu_threads(int requested) {
  int available = md_cpu_available();
  int threads = requested > 0 && requested < available ? requested : available;
  int limit = omp_get_thread_limit(); /* OMP_THREAD_LIMIT */
  return limit > 0 && threads > limit ? limit : threads;
}
