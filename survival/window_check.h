/* Whether an exponential half-life is a property of the data or of the
 * observation window it was measured in.
 *
 * A lifetime measured in a window of W decode steps cannot be longer than W.
 * When tokens stay in use for about as long as the window lasts, the
 * lifetimes spread over the whole window, the survival curve falls almost
 * linearly to its end, and the exponential MLE (events / exposure) returns a
 * half-life of the order of W whatever the tokens' true persistence: a longer
 * window would give a longer one. Two symptoms are checked:
 *
 *   mostly censored   more than half of the weight is right-censored: most
 *                     tokens were still in use when the window closed, so
 *                     the rate rests on the few that were not;
 *   window-bound      refitted with the window cut to half (every lifetime
 *                     censored at W / 2: time' = min(time, W / 2), an event
 *                     only when it ended by then; rows entering at or after
 *                     W / 2 dropped), the half-life moves by more than a
 *                     factor MD_WINDOW_CHECK_RATIO either way. Under a
 *                     constant hazard the cut changes only the precision
 *                     (the exponential likelihood is memoryless), so a large
 *                     move means the estimate follows the window. Lifetimes
 *                     spread uniformly over the window move by 3/2: the
 *                     full fit gives lambda = 2 / W, the cut one
 *                     (N / 2) / (3 N W / 8) = 4 / (3 W).
 *
 * W is the largest time of the table (the longest follow-up any row had). */
#ifndef MD_SURVIVAL_WINDOW_CHECK_H
#define MD_SURVIVAL_WINDOW_CHECK_H

#include <stdbool.h>

#include "survival/surv_data.h"

/* The half-life may move by this factor (up or down) when the window is
 * halved before the check calls it window-bound. */
#define MD_WINDOW_CHECK_RATIO 1.25
/* Censored weight share above which the check calls the fit mostly censored. */
#define MD_WINDOW_CHECK_CENSORED 0.5

typedef struct md_window_check {
  double window;          /* W: the largest time in the table, decode steps */
  double censored_share;  /* censored weight / total weight */
  double half_life;       /* ln 2 * exposure / events over the whole window; NaN without events */
  double half_life_cut;   /* the same with the window cut to W / 2; NaN without events by then */
  bool identified;        /* false: one of the symptoms, or no events */
  /* NULL when identified; otherwise "no-events", "mostly-censored" or
   * "window-bound" (the first that applies, in that order). */
  const char *reason;
} md_window_check;

/* Fills `check` from a table built by md_surv_table_build and its totals
 * (md_surv_table_totals: the full window's events and exposure, which the
 * exponential fit has used too). Never fails on a valid table; MD_E_INVALID
 * for a NULL or empty one. */
md_status md_window_check_run(const md_surv_table *table, const md_surv_totals *totals,
                              md_window_check *check, md_error *err);

/* A sentence for a warning: what the symptom is, with the numbers
 * ("more than half ..." / "halving the window moves it from H to H'").
 * Writes at most `size` bytes into `text` (always terminated). */
void md_window_check_describe(const md_window_check *check, char *text, size_t size);

#endif
