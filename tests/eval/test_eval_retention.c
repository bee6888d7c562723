/* Retention matching (collector/eval/eval.h, md_eval_answer_spans and
 * md_eval_answer_positions): a probe's answer is found in the prompt as
 * scoring finds it in an output (NFKC, case folding, non-letters and
 * non-digits as one space, whole words), and mapped back to the bytes and
 * tokens of the original text. Every expected span and token list below
 * is worked out by hand from the byte offsets written beside it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/eval/eval.h"
#include "tests/test_util.h"

/* `answer` in `text`: the byte spans expected, as {begin, end} pairs. */
static void expect_spans(const char *text, const char *answer, size_t n,
                         const size_t (*want)[2]) {
  md_eval_span *spans = NULL;
  size_t n_spans = 0;
  CHECK(md_eval_answer_spans(text, strlen(text), answer, &spans, &n_spans) == MD_OK);
  CHECK_MSG(n_spans == n, "\"%s\" in \"%s\": %zu spans, expected %zu", answer, text, n_spans, n);
  for (size_t i = 0; i < n && i < n_spans; i++)
    CHECK_MSG(spans[i].begin == want[i][0] && spans[i].end == want[i][1],
              "\"%s\" in \"%s\": span %zu is [%zu, %zu), expected [%zu, %zu)", answer, text, i,
              spans[i].begin, spans[i].end, want[i][0], want[i][1]);
  free(spans);
}

static void test_spans(void) {
  /* "City: " is 6 bytes; "New-York" 8. */
  expect_spans("City: New-York.", "New York", 1, (const size_t[][2]){{6, 14}});
  expect_spans("NEW  YORK", "New York", 1, (const size_t[][2]){{0, 9}});
  expect_spans("NEW  YORK", "new-york", 1, (const size_t[][2]){{0, 9}});
  /* Whole words: "New Yorker" is not "New York"; "Newark, " 8 bytes,
   * "New Yorker, " 12. */
  expect_spans("Newark, New Yorker, New York", "New York", 1, (const size_t[][2]){{20, 28}});
  /* Case folding: ß folds to ss (Straße: 7 bytes, ß is 2). */
  expect_spans("Stra\xc3\x9f" "e 5", "STRASSE", 1, (const size_t[][2]){{0, 7}});
  expect_spans("at STRASSE 5", "Stra\xc3\x9f" "e", 1, (const size_t[][2]){{3, 10}});
  /* NFKC: full-width digits (3 bytes each) are digits. "room " 5 bytes. */
  expect_spans("room \xef\xbc\x94\xef\xbc\x92!", "42", 1, (const size_t[][2]){{5, 11}});
  /* A combining accent composes with its letter: "Cafe" + U+0301 (2 bytes). */
  expect_spans("Cafe\xcc\x81 noir", "caf\xc3\xa9", 1, (const size_t[][2]){{0, 6}});
  /* Punctuation inside the answer is a word boundary on both sides. */
  expect_spans("v4.2 or 4-2", "4.2", 1, (const size_t[][2]){{8, 11}});
  /* Overlapping occurrences are all found. */
  expect_spans("a a a", "a a", 2, (const size_t[][2]){{0, 3}, {2, 5}});
  /* An invalid byte separates words (as in scoring). */
  expect_spans("x\xffNew York", "new york", 1, (const size_t[][2]){{2, 10}});
  /* An answer without a letter or digit is never found (nor scored). */
  expect_spans("a -- b", "--", 0, NULL);
  expect_spans("nothing here", "New York", 0, NULL);
}

/* Matching normalises each grapheme cluster on its own, and must give
 * md_eval_normalise's text: each text, as its own answer, is found whole. */
static void test_same_normalisation(void) {
  const char *texts[] = {
      "\xe1\x84\x80\xe1\x85\xa1",        /* Hangul jamo L + V: composes to one syllable */
      "e\xcc\x81t\xc3\xa9",              /* e + combining acute, then precomposed */
      "\xef\xac\x81ne",                  /* the fi ligature: NFKC "fine" */
      "\xe2\x85\xab",                    /* Roman numeral twelve: NFKC "xii" */
      "\xc4\xb0stanbul",                 /* capital I with dot: folds to i + dot above */
      "\xe2\x91\xa0 \xc2\xbd",           /* circled one, one half: "1", "1 2" */
      "A\xcc\x8a\xcc\x81x",              /* A + ring + acute: one cluster */
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    md_eval_span *spans = NULL;
    size_t n = 0;
    size_t length = strlen(texts[i]);
    CHECK(md_eval_answer_spans(texts[i], length, texts[i], &spans, &n) == MD_OK);
    CHECK_MSG(n >= 1 && spans[0].begin == 0 && spans[0].end == length,
              "text %zu is not found whole in itself (%zu spans)", i, n);
    free(spans);
  }
}

/* A hand-tokenised prompt in three regions:
 *
 *   [0, 17)  user  "Where? New-York. "
 *   [17, 42) tool  "Moved to NEW  YORK later."
 *   [42, 56) doc   "STRASSE ４２"   (full-width digits, 3 bytes each)
 *
 * tokens (start: text): 0 "Where", 5 "?", 6 " New", 10 "-", 11 "York",
 * 15 ".", 16 " ", 17 "Moved", 22 " to", 25 " NEW", 29 "  ", 31 "YORK",
 * 35 " later", 41 ".", 42 "STR", 45 "ASSE", 49 " ", 50 "４", 53 "２". */
static void test_positions(void) {
  static const char text[] = "Where? New-York. Moved to NEW  YORK later.STRASSE \xef\xbc\x94\xef\xbc\x92";
  md_chat_span spans[] = {{0, 17, "user", false, 0}, {17, 42, "tool", false, 1},
                          {42, 56, "doc", false, 2}};
  size_t starts[] = {0, 5, 6, 10, 11, 15, 16, 17, 22, 25, 29, 31, 35, 41, 42, 45, 49, 50, 53};
  md_episode_tokens t;
  memset(&t, 0, sizeof t);
  t.prompt.text = (char *)text;
  t.prompt.length = sizeof text - 1;
  CHECK(t.prompt.length == 56);
  t.prompt.spans = spans;
  t.prompt.n_spans = 3;
  t.starts = starts;
  t.prompt_tokens = sizeof starts / sizeof starts[0];
  const struct {
    const char *region, *answer;
    size_t n;
    int64_t want[4];
  } cases[] = {
      {"user", "New York", 3, {2, 3, 4}},    /* " New" "-" "York" */
      {"tool", "new york", 3, {9, 10, 11}},  /* " NEW" "  " "YORK" */
      {"user", "NEW  YORK", 3, {2, 3, 4}},
      {"tool", "Moved", 1, {7}},
      {"doc", "Stra\xc3\x9f" "e", 2, {14, 15}}, /* "STR" "ASSE" */
      {"doc", "42", 2, {17, 18}},             /* "４" "２" */
      {"user", "York.", 1, {4}},              /* the answer's "." is a boundary, not a letter */
      {"doc", "New York", 0, {0}},            /* only the region's own text is searched */
      {"tool", "NEW YORKER", 0, {0}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t *positions = NULL;
    size_t n = 0;
    CHECK(md_eval_answer_positions(&t, cases[c].region, cases[c].answer, &positions, &n) == MD_OK);
    CHECK_MSG(n == cases[c].n, "\"%s\" in %s: %zu tokens, expected %zu", cases[c].answer,
              cases[c].region, n, cases[c].n);
    for (size_t i = 0; i < n && i < cases[c].n; i++)
      CHECK_MSG(positions[i] == cases[c].want[i], "\"%s\" in %s: token %zu is %lld, expected %lld",
                cases[c].answer, cases[c].region, i, (long long)positions[i],
                (long long)cases[c].want[i]);
    free(positions);
  }
}

int main(void) {
  test_spans();
  test_same_normalisation();
  test_positions();
  return md_test_finish("eval_retention");
}
