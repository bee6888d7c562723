/* Answer scoring of the eval (collector/eval/eval.h): the normalisation and the
 * whole-word containment test, on cases worked out by hand from the rule
 * (NFKC, case folding, runs of non-letters/digits -> one space, a space at
 * both ends). */
#include <stdlib.h>
#include <string.h>

#include "collector/eval/eval.h"
#include "tests/test_util.h"

static void check_normalise(const char *text, const char *want) {
  char *got = md_eval_normalise(text, strlen(text));
  CHECK_MSG(got && !strcmp(got, want), "normalise(\"%s\") = \"%s\", want \"%s\"", text,
            got ? got : "(null)", want);
  free(got);
}

static void check_match(const char *answer, const char *output, int want) {
  int got = md_eval_answer_matches(answer, output, strlen(output));
  CHECK_MSG(got == want, "matches(\"%s\", \"%s\") = %d, want %d", answer, output, got, want);
}

int main(void) {
  check_normalise("", " ");
  check_normalise("S4NNP6", " s4nnp6 ");
  check_normalise("  The locator is S4NNP6.  ", " the locator is s4nnp6 ");
  check_normalise("CC-1980", " cc 1980 ");
  check_normalise("149.95 EUR", " 149 95 eur ");
  check_normalise("2025-05-31", " 2025 05 31 ");
  check_normalise("8 kg", " 8 kg ");
  check_normalise("over-the-wing!!", " over the wing ");
  /* NFKC: the ligature "ﬁ" (U+FB01) is "fi"; full-width "Ａ１" is "a1". */
  check_normalise("\xef\xac\x81le", " file ");
  check_normalise("\xef\xbc\xa1\xef\xbc\x91", " a1 ");
  /* Case folding beyond ASCII: "ÉCOLE" is "école" (precomposed). */
  check_normalise("\xc3\x89" "COLE", " \xc3\xa9" "cole ");
  /* Invalid UTF-8 bytes (an answer cut mid-character) separate words. */
  check_normalise("ab\xe2\x82", " ab ");
  check_normalise("a\xffz", " a z ");

  check_match("S4NNP6", "The locator is S4NNP6.", 1);
  check_match("s4nnp6", "locator: S4nnP6", 1);
  check_match("CC-1980", "under cost centre CC 1980", 1); /* separators are all alike */
  check_match("CC-1980", "CC-19800", 0);
  check_match("149.95 EUR", "149.95", 0);
  check_match("2025-05-31", "on 2025-05-31, as asked", 1);
  check_match("2025-05-31", "on 2025-05-3", 0);
  check_match("8 kg", "up to 8 kg", 1);
  check_match("8 kg", "up to 18 kg", 0);          /* whole words: 18 is not 8 */
  check_match("over the wing", "a seat over the wing please", 1);
  check_match("wing", "wingspan", 0);
  check_match("90 minutes", "at least 90 minutes.", 1);
  check_match("", "anything", 0);                 /* an empty answer is never found */
  check_match("...", "...", 0);                   /* nor one of separators only */
  return md_test_finish("eval_normalise");
}
