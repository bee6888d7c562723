/* collector/tokenizer/episode_tokens.h on tests/collect/data/episodes.jsonl with the
 * tiny tokenizer of tests/collect/fixtures. Token ids are checked end to end
 * against HF tokenizers by check_run (collect_e2e_*); here, by hand from
 * the template rules of memdecay-traces(5): the region of the template
 * tokens and of the text of each message of a chat episode, the decode
 * window (teacher-forced, generated, none) and its cap, the refusal of
 * ids outside the model's vocabulary, and of episodes that cannot fit
 * max_positions before they are tokenised in full. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/tokenizer/episode_tokens.h"
#include "tests/test_util.h"

static md_tokenizer *tok;

static void read_episodes(md_trace_episode *episodes, size_t n) {
  char path[4096];
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/tests/collect/data/episodes.jsonl", root ? root : ".");
  md_trace_reader *reader = NULL;
  md_error err;
  if (md_trace_open(path, NULL, &reader, &err) != MD_OK) {
    fprintf(stderr, "%s\n", err.message);
    exit(2);
  }
  for (size_t i = 0; i < n; i++) {
    bool have = false;
    if (md_trace_next(reader, &episodes[i], &have, &err) != MD_OK || !have) {
      fprintf(stderr, "episode %zu: %s\n", i, err.message);
      exit(2);
    }
  }
  md_trace_close(reader);
}

/* The region of the k-th token (0-based) whose piece is `piece`, or NULL. */
static const char *region_of(const md_episode_tokens *t, const char *piece, int k) {
  for (size_t i = 0; i < t->prompt_tokens; i++) {
    size_t len = 0;
    const char *bytes = md_tokenizer_piece_bytes(tok, t->ids[i], &len);
    if (bytes && len == strlen(piece) && !memcmp(bytes, piece, len) && k-- == 0) return t->regions[i];
  }
  return NULL;
}

#define CHECK_REGION(t, piece, k, want)                                                   \
  do {                                                                                    \
    const char *got_ = region_of(t, piece, k);                                            \
    CHECK_MSG(got_ && !strcmp(got_, want), "token '%s' #%d: region %s, expected %s", piece, k, \
              got_ ? got_ : "(none)", want);                                              \
  } while (0)

/* chat-1: system, user (user + retrieval segments), assistant (plan + a
 * tool call), tool; teacher-forced continuation in scratchpad. */
static void test_chat_regions(const md_trace_episode *ep) {
  md_episode_tokens t;
  md_error err;
  CHECK_MSG(md_episode_tokenize(tok, ep, NULL, &t, &err) == MD_OK, "%s", err.message);
  CHECK_REGION(&t, "<|im_start|>", 0, "system");
  CHECK_REGION(&t, "<|im_start|>", 1, "user");
  CHECK_REGION(&t, "<|im_start|>", 2, "plan");      /* a turn opens in its first piece's region */
  CHECK_REGION(&t, "<|im_start|>", 3, "tool_out");  /* the tool-response turn */
  CHECK_REGION(&t, "<|im_start|>", 4, "scratchpad"); /* generation prompt: the continuation's */
  CHECK_REGION(&t, "<|im_end|>", 0, "system");
  CHECK_REGION(&t, "<|im_end|>", 1, "retrieval");   /* a turn closes in its last piece's region */
  CHECK_REGION(&t, "<|im_end|>", 2, "tool_in");     /* the assistant turn ends with the call */
  CHECK_REGION(&t, "<tool_call>", 0, "tool_in");
  CHECK_REGION(&t, " D", 0, "retrieval");           /* " Doc 3" of the retrieval segment */
  CHECK_REGION(&t, " L", 0, "user");                /* " Lisbon", the user's text */
  CHECK_REGION(&t, "T", 0, "tool_out");             /* "TP 1351" in the tool output */
  CHECK(t.kind == MD_CONTINUATION_TEXT && !md_episode_generated(&t));
  CHECK(t.forced_tokens == t.decode_steps && t.decode_steps > 20);
  CHECK(!strcmp(t.continuation_region, "scratchpad"));
  for (size_t i = t.prompt_tokens; i < md_episode_positions(&t); i++)
    CHECK(!strcmp(t.regions[i], "scratchpad"));
  /* The continuation is tokenised on its own: "Two flights..." starts a word. */
  md_tokens alone = {0};
  CHECK(md_tokenizer_encode(tok, ep->continuation.text, ep->continuation.length, &alone, &err) == MD_OK);
  CHECK(alone.count == t.decode_steps);
  CHECK(!memcmp(alone.ids, t.ids + t.prompt_tokens, alone.count * sizeof(int32_t)));
  /* Capped at 5 steps: the first 5 continuation tokens. */
  md_episode_tokens capped;
  md_episode_tokens_options cap = {.max_steps = 5};
  CHECK(md_episode_tokenize(tok, ep, &cap, &capped, &err) == MD_OK);
  CHECK(capped.decode_steps == 5 && capped.forced_tokens == 5 && capped.prompt_tokens == t.prompt_tokens);
  CHECK(!memcmp(capped.ids, t.ids, (t.prompt_tokens + 5) * sizeof(int32_t)));
  md_episode_tokens_free(&capped);
  md_tokens_free(&alone);
  md_episode_tokens_free(&t);
}

static void test_windows(const md_trace_episode *raw, const md_trace_episode *bare) {
  md_episode_tokens t;
  md_error err;
  CHECK(md_episode_tokenize(tok, raw, NULL, &t, &err) == MD_OK);
  CHECK(md_episode_generated(&t) && t.decode_steps == 12 && t.kind == MD_CONTINUATION_GENERATE);
  CHECK(!strcmp(t.regions[0], "system") && !strcmp(t.regions[t.prompt_tokens - 1], "scratchpad"));
  md_episode_tokens_free(&t);
  /* No continuation: MD_EPISODE_DEFAULT_STEPS greedy steps in scratchpad, or the cap. */
  CHECK(md_episode_tokenize(tok, bare, NULL, &t, &err) == MD_OK);
  CHECK(md_episode_generated(&t) && t.decode_steps == MD_EPISODE_DEFAULT_STEPS);
  CHECK(t.kind == MD_CONTINUATION_NONE && !strcmp(t.continuation_region, "scratchpad"));
  md_episode_tokens_free(&t);
  md_episode_tokens_options cap = {.max_steps = 7};
  CHECK(md_episode_tokenize(tok, bare, &cap, &t, &err) == MD_OK);
  CHECK(t.decode_steps == 7);
  md_episode_tokens_free(&t);
}

static void test_vocab_refusal(const md_trace_episode *ep) {
  md_episode_tokens t;
  md_error err;
  md_episode_tokens_options small = {.vocab_size = 300};
  CHECK(md_episode_tokenize(tok, ep, &small, &t, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "episodes.jsonl:1: episode \"chat-1\": token 0 (id 487, \"<|im_start|>\") "
                                "is outside the model's vocabulary of 300 ids"),
            "%s", err.message);
  CHECK(t.ids == NULL && t.prompt.text == NULL);
}

/* max_positions: up to MD_EPISODE_COUNT_FACTOR times it the count is exact (the caller's
 * check says by how much an episode is over); past that counting stops; a prompt too long
 * for its fewest possible tokens to fit is refused from its length. */
static void test_position_limit(const md_trace_episode *ep) {
  md_episode_tokens t, all;
  md_error err;
  CHECK(md_episode_tokenize(tok, ep, NULL, &all, &err) == MD_OK);
  size_t p = all.prompt_tokens, exact = (p + MD_EPISODE_COUNT_FACTOR - 1) / MD_EPISODE_COUNT_FACTOR;
  md_episode_tokens_options o = {.max_positions = exact};
  CHECK(md_episode_tokenize(tok, ep, &o, &t, &err) == MD_OK);
  CHECK(t.prompt_tokens == p && !memcmp(t.ids, all.ids, md_episode_positions(&all) * sizeof *t.ids));
  md_episode_tokens_free(&t);
  o.max_positions = exact - 1;
  CHECK(md_episode_tokenize(tok, ep, &o, &t, &err) == MD_E_INVALID);
  char expect[256];
  snprintf(expect, sizeof expect,
           "episodes.jsonl:1: episode \"chat-1\": the prompt has more than %zu tokens (counting "
           "stopped there), more than the model's max_position_embeddings (%zu)",
           (exact - 1) * MD_EPISODE_COUNT_FACTOR, exact - 1);
  CHECK_MSG(strstr(err.message, expect), "%s", err.message);
  CHECK(t.ids == NULL && t.prompt.text == NULL);
  size_t fewest = md_tokenizer_min_tokens(tok, all.prompt.length);
  CHECK(fewest >= 2 && fewest <= p);
  o.max_positions = fewest - 1;
  CHECK(md_episode_tokenize(tok, ep, &o, &t, &err) == MD_E_INVALID);
  snprintf(expect, sizeof expect,
           "episode \"chat-1\": the prompt's %zu bytes make at least %zu tokens, more than the "
           "model's max_position_embeddings (%zu)",
           all.prompt.length, fewest, fewest - 1);
  CHECK_MSG(strstr(err.message, expect), "%s", err.message);
  md_episode_tokens_free(&all);
}

/* A teacher-forced continuation far longer than the model: refused once counted past the
 * limit without a cap; with --max-steps its first tokens are all that is used. */
static void test_long_continuation(void) {
  char path[] = "/tmp/md_episode_tokens.XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  CHECK(f != NULL);
  if (!f) return;
  fputs("{\"id\": \"long-text\", \"messages\": [{\"role\": \"user\", \"content\": \"Go.\"}], "
        "\"continuation\": {\"text\": \"", f);
  for (int i = 0; i < 2000; i++) fputs("one more word ", f);
  fputs("\"}}\n", f);
  fclose(f);
  md_trace_reader *reader = NULL;
  md_trace_episode ep;
  bool have = false;
  md_error err;
  CHECK(md_trace_open(path, NULL, &reader, &err) == MD_OK);
  CHECK(reader && md_trace_next(reader, &ep, &have, &err) == MD_OK && have);
  md_trace_close(reader);
  unlink(path);
  if (!have) return;
  md_episode_tokens t, all;
  md_episode_tokens_options o = {.max_positions = 100};
  CHECK(md_episode_tokenize(tok, &ep, NULL, &all, &err) == MD_OK);
  CHECK(all.decode_steps > 400 && all.prompt_tokens < 100);
  CHECK(md_episode_tokenize(tok, &ep, &o, &t, &err) == MD_E_INVALID);
  CHECK_MSG(strstr(err.message, "episode \"long-text\": the continuation has more than 400 tokens "
                                "(counting stopped there), more than the model's "
                                "max_position_embeddings (100)"),
            "%s", err.message);
  o.max_steps = 5;
  CHECK(md_episode_tokenize(tok, &ep, &o, &t, &err) == MD_OK);
  CHECK(t.decode_steps == 5 && t.forced_tokens == 5);
  CHECK(!memcmp(t.ids, all.ids, md_episode_positions(&t) * sizeof *t.ids));
  md_episode_tokens_free(&t);
  md_episode_tokens_free(&all);
  md_trace_episode_free(&ep);
}

int main(void) {
  char path[4096];
  const char *root = getenv("MD_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/tests/collect/fixtures/tokenizer.json", root ? root : ".");
  md_error err;
  if (md_tokenizer_load(path, &tok, &err) != MD_OK) {
    fprintf(stderr, "%s\n", err.message);
    return 2;
  }
  md_trace_episode episodes[3];
  read_episodes(episodes, 3);
  test_chat_regions(&episodes[0]);
  test_windows(&episodes[1], &episodes[2]);
  test_vocab_refusal(&episodes[0]);
  test_position_limit(&episodes[0]);
  test_long_continuation();
  for (int i = 0; i < 3; i++) md_trace_episode_free(&episodes[i]);
  md_tokenizer_free(tok);
  return md_test_finish("test_episode_tokens");
}
