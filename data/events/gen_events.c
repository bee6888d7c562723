/* Generates a synthetic events CSV (memdecay-events(5)) with the shape of
 * real collector output: seven regions whose token lifetimes, in integer
 * decode steps, follow Weibull laws with half-lives in the spirit of the
 * published MemDecay measurements (system ~170 steps, scratchpad ~15,
 * retrieval the longest-lived movable region), observed through a window of
 * --window decode steps with the collector's censoring rule: a token still
 * in use within the last --guard steps of the window is right-censored at
 * the window end. Scratchpad tokens are partly decoded ones, born during the
 * window, so their window is shorter.
 *
 * Deterministic: the same options give the same bytes (splitmix64, no libc
 * random numbers). data/events/demo-events.csv is
 *   gen_events --episodes 24 --tokens 300 --seed 20240611
 * and bench/fit_bench.sh uses it for its 10-million-row file
 * (--continuous 1 for its real-valued-times variant).
 *
 * Standalone C11 (libm only), so that it builds with a bare `cc`. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct region_law {
  const char *name;
  double share;         /* of an episode's tokens */
  double shape;         /* Weibull shape k (< 1: early uses dominate) */
  double median;        /* median lifetime, decode steps */
  double decoded_share; /* tokens born during the window */
} region_law;

/* Prompt order. Shares sum to 1. */
static const region_law laws[] = {
    {"system", 0.10, 0.90, 150.0, 0.0},   {"user", 0.12, 0.95, 45.0, 0.0},
    {"retrieval", 0.22, 0.85, 110.0, 0.0}, {"tool_in", 0.06, 1.10, 22.0, 0.0},
    {"tool_out", 0.22, 1.00, 32.0, 0.0},  {"plan", 0.08, 1.00, 60.0, 0.0},
    {"scratchpad", 0.20, 1.20, 16.5, 0.6},
};
enum { n_laws = sizeof laws / sizeof laws[0] };

typedef struct options {
  long episodes;
  long tokens;
  uint64_t seed;
  long window;
  long guard;
  long continuous; /* 1: a uniform fraction added to every time (real-valued times) */
} options;

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Uniform on (0, 1), never 0. */
static double uniform(uint64_t *state) {
  return ((double)(splitmix64(state) >> 11) + 0.5) * 0x1.0p-53;
}

/* Weibull with median m and shape k: scale = m / (ln 2)^(1/k). */
static double weibull_lifetime(const region_law *law, uint64_t *state) {
  double scale = law->median / pow(log(2.0), 1.0 / law->shape);
  return scale * pow(-log(uniform(state)), 1.0 / law->shape);
}

static void emit_token(FILE *out, long episode, long pos, const region_law *law,
                       const options *opt, uint64_t *state) {
  long window = opt->window;
  if (law->decoded_share > 0 && uniform(state) < law->decoded_share) {
    window -= (long)(uniform(state) * 0.75 * (double)opt->window);
  }
  double lifetime = ceil(weibull_lifetime(law, state));
  int event = lifetime <= (double)(window - opt->guard);
  long time = event ? (long)lifetime : window;
  if (opt->continuous) {
    /* Times measured in real units (milliseconds, say): almost all distinct,
     * the expensive case for Kaplan-Meier and the log-rank test. */
    fprintf(out, "ep-%05ld,%ld,%s,%.9f,%d\n", episode, pos, law->name,
            (double)time + uniform(state), event);
    return;
  }
  fprintf(out, "ep-%05ld,%ld,%s,%ld,%d\n", episode, pos, law->name, time, event);
}

static void emit_episode(FILE *out, long episode, const options *opt, uint64_t *state) {
  long pos = 0;
  for (int r = 0; r < n_laws; r++) {
    /* Region sizes vary by +-30% between episodes. */
    double jitter = 0.7 + 0.6 * uniform(state);
    long count = lround(laws[r].share * (double)opt->tokens * jitter);
    for (long i = 0; i < count; i++) emit_token(out, episode, pos++, &laws[r], opt, state);
  }
}

static int usage(void) {
  fputs("usage: gen_events [--episodes N] [--tokens N] [--seed N] [--window N] [--guard N]\n"
        "                  [--continuous 0|1]\n"
        "writes an events CSV to standard output; --continuous 1 adds a uniform fraction\n"
        "to every time (real-valued, almost all distinct)\n",
        stderr);
  return 2;
}

int main(int argc, char **argv) {
  options opt = {.episodes = 24, .tokens = 300, .seed = 20240611, .window = 256, .guard = 16};
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) return usage();
    char *end = NULL;
    long value = strtol(argv[i + 1], &end, 10);
    if (*end != '\0' || value < 0) return usage();
    if (!strcmp(argv[i], "--episodes")) opt.episodes = value;
    else if (!strcmp(argv[i], "--tokens")) opt.tokens = value;
    else if (!strcmp(argv[i], "--seed")) opt.seed = (uint64_t)value;
    else if (!strcmp(argv[i], "--window")) opt.window = value;
    else if (!strcmp(argv[i], "--guard")) opt.guard = value;
    else if (!strcmp(argv[i], "--continuous") && value <= 1) opt.continuous = value;
    else return usage();
  }
  if (opt.window <= opt.guard) return usage();
  static char buffer[1 << 20];
  setvbuf(stdout, buffer, _IOFBF, sizeof buffer);
  uint64_t state = opt.seed;
  fputs("episode,pos,region,time,event\n", stdout);
  for (long e = 0; e < opt.episodes; e++) emit_episode(stdout, e, &opt, &state);
  return fflush(stdout) == 0 ? 0 : 1;
}
