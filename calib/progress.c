#include "calib/progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define MD_PROGRESS_REDRAW_SECONDS 0.2 /* bar redraws at most 5 times a second */
#define MD_PROGRESS_BAR_CELLS 20

struct md_progress {
  md_progress_options options;
  bool bar;               /* drawing the in-place bar */
  bool bar_drawn;         /* a bar line is on screen, not yet ended */
  double last_print;      /* elapsed seconds at the last bar draw or plain line */
  md_collect_progress last; /* the latest state, to redraw after a warning */
  bool have_last;
};

md_progress *md_progress_new(const md_progress_options *options) {
  md_progress *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  if (options) p->options = *options;
  if (!p->options.out) p->options.out = stderr;
  if (p->options.interval <= 0) p->options.interval = 10.0;
  int terminal = p->options.terminal;
  p->bar = terminal == 1 || (terminal <= 0 && isatty(fileno(p->options.out)) == 1);
  p->last_print = -1e9;
  return p;
}

void md_progress_free(md_progress *p) {
  md_progress_end(p);
  free(p);
}

const char *md_progress_duration(double seconds, char *buf, size_t size) {
  if (!(seconds >= 0) || seconds > 1e7) {
    snprintf(buf, size, "--");
    return buf;
  }
  long s = lround(seconds);
  if (s < 60) snprintf(buf, size, "%lds", s);
  else if (s < 3600) snprintf(buf, size, "%ldm%02lds", s / 60, s % 60);
  else snprintf(buf, size, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

/* Decode tokens per second of this run so far (0 before the first step). */
static double decode_rate(const md_collect_progress *g) {
  return g->decode_seconds > 0 ? (double)g->decode_steps_done / g->decode_seconds : 0.0;
}

/* Time left: the remaining prompt tokens at the prefill rate and the
 * remaining steps at the decode rate seen so far; negative when unknown. */
static double eta_seconds(const md_collect_progress *g) {
  if (g->decode_steps_done == 0 || g->prompt_tokens_done == 0) return -1.0;
  double per_step = g->decode_seconds / (double)g->decode_steps_done;
  double per_token = g->prefill_seconds / (double)g->prompt_tokens_done;
  return (double)(g->decode_steps_total - g->decode_steps_done) * per_step +
         (double)(g->prompt_tokens_total - g->prompt_tokens_done) * per_token;
}

static const char *label(const md_progress *p) { return p->options.label ? p->options.label : ""; }
static const char *label_sep(const md_progress *p) { return p->options.label ? ": " : ""; }

static int terminal_width(const md_progress *p) {
  struct winsize ws;
  if (ioctl(fileno(p->options.out), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40) return ws.ws_col;
  return 80;
}

/* Share of the work done: decode steps dominate, prompt tokens count a
 * little; episodes done on resume count in full. */
static double fraction_done(const md_collect_progress *g) {
  if (g->episodes_total == 0) return 0.0;
  double resumed = (double)g->episodes_resumed / (double)g->episodes_total;
  double work = g->decode_steps_total ? (double)g->decode_steps_done / (double)g->decode_steps_total
                                      : 0.0;
  return resumed + (1.0 - resumed) * work;
}

static void draw_bar(md_progress *p, const md_collect_progress *g) {
  char cells[MD_PROGRESS_BAR_CELLS + 1], eta[16], line[512];
  int filled = (int)(fraction_done(g) * MD_PROGRESS_BAR_CELLS);
  for (int i = 0; i < MD_PROGRESS_BAR_CELLS; i++) cells[i] = i < filled ? '=' : ' ';
  cells[MD_PROGRESS_BAR_CELLS] = '\0';
  if (filled > 0 && filled < MD_PROGRESS_BAR_CELLS) cells[filled - 1] = '>';
  snprintf(line, sizeof line, "%s%s[%s] %zu/%zu episodes  step %lld/%lld  %.1f tok/s  ETA %s  %s",
           label(p), label_sep(p), cells, g->episodes_done, g->episodes_total,
           (long long)g->step, (long long)g->steps, decode_rate(g),
           md_progress_duration(eta_seconds(g), eta, sizeof eta),
           g->episode_id ? g->episode_id : "");
  int width = terminal_width(p) - 1;
  if ((int)strlen(line) > width) line[width] = '\0';
  fprintf(p->options.out, "\r%s\033[K", line);
  fflush(p->options.out);
  p->bar_drawn = true;
}

static void plain_line(md_progress *p, const md_collect_progress *g) {
  char eta[16];
  fprintf(p->options.out, "%s%s%zu/%zu episodes, %llu/%llu decode steps, %.1f tok/s, ETA %s\n",
          label(p), label_sep(p), g->episodes_done, g->episodes_total,
          (unsigned long long)g->decode_steps_done, (unsigned long long)g->decode_steps_total,
          decode_rate(g), md_progress_duration(eta_seconds(g), eta, sizeof eta));
  fflush(p->options.out);
}

static void start_line(md_progress *p, const md_collect_progress *g) {
  char resumed[64] = "", episodes[96];
  if (g->episodes_resumed)
    snprintf(resumed, sizeof resumed, " (%zu already complete)", g->episodes_resumed);
  if (g->shard_count)
    snprintf(episodes, sizeof episodes, "shard %zu/%zu: %zu of the %zu episodes", g->shard_index,
             g->shard_count, g->episodes_total, g->plan_episodes);
  else
    snprintf(episodes, sizeof episodes, "%zu episodes", g->episodes_total);
  fprintf(p->options.out, "%s%s%s%s; to run: %llu prompt tokens, %llu decode steps\n", label(p),
          label_sep(p), episodes, resumed, (unsigned long long)g->prompt_tokens_total,
          (unsigned long long)g->decode_steps_total);
}

static void finish_line(md_progress *p, const md_collect_progress *g) {
  char took[16];
  double prefill_rate = g->prefill_seconds > 0 ? (double)g->prompt_tokens_done / g->prefill_seconds : 0;
  fprintf(p->options.out,
          "%s%sdone: %zu episodes in %s (prefill %.0f tok/s, decode %.1f tok/s)\n", label(p),
          label_sep(p), g->episodes_done, md_progress_duration(g->elapsed_seconds, took, sizeof took),
          prefill_rate, decode_rate(g));
}

void md_progress_collect(void *context, const md_collect_progress *g) {
  md_progress *p = context;
  if (!p || p->options.quiet) return;
  p->last = *g;
  p->have_last = true;
  if (g->event == MD_COLLECT_START) {
    start_line(p, g);
    p->last_print = g->elapsed_seconds;
    return;
  }
  if (g->event == MD_COLLECT_FINISH) {
    md_progress_end(p);
    finish_line(p, g);
    return;
  }
  bool episode_done = g->event == MD_COLLECT_EPISODE_DONE;
  if (p->bar) {
    if (episode_done || g->elapsed_seconds - p->last_print >= MD_PROGRESS_REDRAW_SECONDS) {
      draw_bar(p, g);
      p->last_print = g->elapsed_seconds;
    }
  } else if ((g->event == MD_COLLECT_STEP || episode_done) &&
             g->elapsed_seconds - p->last_print >= p->options.interval) {
    plain_line(p, g);
    p->last_print = g->elapsed_seconds;
  }
}

void md_progress_end(md_progress *p) {
  if (!p || !p->bar_drawn) return;
  fputc('\n', p->options.out);
  fflush(p->options.out);
  p->bar_drawn = false;
}

/* Prints a line of its own, then redraws the bar under it. */
static void print_line(md_progress *p, const char *kind, const char *message) {
  if (!p || p->options.quiet) return;
  if (p->bar_drawn) fprintf(p->options.out, "\r\033[K");
  fprintf(p->options.out, "%s%s%s%s\n", label(p), label_sep(p), kind, message);
  p->bar_drawn = false;
  if (p->bar && p->have_last && p->last.event != MD_COLLECT_START &&
      p->last.event != MD_COLLECT_FINISH)
    draw_bar(p, &p->last);
  fflush(p->options.out);
}

void md_progress_warning(void *context, const char *message) {
  print_line(context, "warning: ", message);
}

void md_progress_note(md_progress *p, const char *message) { print_line(p, "", message); }
