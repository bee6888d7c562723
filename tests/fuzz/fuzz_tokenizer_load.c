/* Loading a tokenizer.json (collector/tokenizer/tokenizer.h): md_tokenizer_load, then
 * a fixed text encoded and decoded with what was loaded.
 *
 * Invariants: a failure is MD_E_IO, MD_E_FORMAT or MD_E_UNSUPPORTED naming
 * the file; a loaded tokenizer encodes the text (or gives up with
 * MD_E_UNSUPPORTED, a regex limit) into ids below md_tokenizer_vocab_size
 * that all have pieces, with spans inside the text, at least
 * md_tokenizer_min_tokens of them, and decodes them back. */
#include "collector/tokenizer/tokenizer.h"
#include "fuzz_util.h"

static const char text[] = "Hello, world! It's 2024: caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd"
                           "<|im_start|>user\n  tabs\tand   spaces\n\n123456 <|endoftext|>";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_input_file(data, size, ".tokenizer.json");
  md_tokenizer *tok = NULL;
  md_error err = {0};
  md_status status = md_tokenizer_load(path, &tok, &err);
  if (status != MD_OK) {
    fuzz_check_failure(status, &err,
                       FUZZ_ST(MD_E_IO) | FUZZ_ST(MD_E_FORMAT) | FUZZ_ST(MD_E_UNSUPPORTED), path);
    return 0;
  }
  FUZZ_CHECK(tok != NULL);
  size_t vocab = md_tokenizer_vocab_size(tok);
  md_tokens tokens = {0};
  size_t len = sizeof text - 1;
  status = md_tokenizer_encode(tok, text, len, &tokens, &err);
  FUZZ_CHECK_MSG(status == MD_OK || status == MD_E_UNSUPPORTED || status == MD_E_NOMEM,
                 "%d: %s", (int)status, err.message);
  if (status == MD_OK) {
    FUZZ_CHECK(tokens.count >= md_tokenizer_min_tokens(tok, len));
    for (size_t i = 0; i < tokens.count; i++) {
      FUZZ_CHECK(tokens.ids[i] >= 0 && (size_t)tokens.ids[i] < vocab);
      FUZZ_CHECK(md_tokenizer_piece(tok, tokens.ids[i]) != NULL);
      FUZZ_CHECK(tokens.spans[i].start <= tokens.spans[i].end && tokens.spans[i].end <= len);
    }
    char *decoded = NULL;
    size_t decoded_len = 0;
    status = md_tokenizer_decode(tok, tokens.ids, tokens.count, false, &decoded, &decoded_len,
                                 &err);
    FUZZ_CHECK_MSG(status == MD_OK || status == MD_E_NOMEM, "%s", err.message);
    free(decoded);
  } else {
    FUZZ_CHECK(tokens.count == 0);
  }
  md_tokens_free(&tokens);
  md_tokenizer_free(tok);
  return 0;
}
