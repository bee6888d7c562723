/* collector/episode_tokens.h on tests/collect/data/episodes.jsonl with the
 * tiny tokenizer of tests/collect/fixtures. Token ids are checked end to end
 * against HF tokenizers by check_run (collect_e2e_*); here, by hand from
 * the template rules of memdecay-traces(5): the region of the template
 * tokens and of the text of each message of a chat episode, the decode
 * window (teacher-forced, generated, none) and its cap, and the refusal of
 * ids outside the model's vocabulary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/episode_tokens.h"
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
  for (int i = 0; i < 3; i++) md_trace_episode_free(&episodes[i]);
  md_tokenizer_free(tok);
  return md_test_finish("test_episode_tokens");
}
