/* Byte-level BPE tokenizer for the Qwen2 / Qwen2.5 / Qwen3 family, loaded from a Hugging Face
 * `tokenizer.json` and giving the same ids as the HF `tokenizers` library
 * (Tokenizer.encode(text, add_special_tokens=False)).
 *
 * Encoding, in the order `tokenizers` applies it:
 *   1. added tokens with normalized=false are cut out of the raw text (leftmost-longest match;
 *      single_word, lstrip and rstrip as in `tokenizers`' AddedVocabulary);
 *   2. each remaining stretch is normalized (NFC, via utf8proc) and the added tokens with
 *      normalized=true are cut out of the normalized text the same way;
 *   3. each remaining stretch is split by the pre-tokenizer regex taken from the file
 *      (PCRE2, UTF + UCP, JIT), the pieces mapped through the GPT-2 byte->unicode table;
 *   4. each piece is merged by BPE in merge-rank order (lowest rank first, leftmost first).
 * The post-processor is not applied (add_special_tokens=false): no BOS/EOS is added.
 *
 * Supported `tokenizer.json` components (anything else is refused at load with a message that
 * names the file and the JSON path): model BPE without dropout, byte_fallback,
 * continuing_subword_prefix, end_of_word_suffix or ignore_merges, merges as "a b" strings or
 * ["a", "b"] pairs; normalizer null, NFC, or a Sequence of NFC; pre-tokenizer ByteLevel
 * (add_prefix_space=false), alone or after Split pre-tokenizers (pattern Regex or String,
 * behavior Isolated, invert=false) in a Sequence; decoder ByteLevel.
 *
 * Where this differs from `tokenizers`, on purpose or by necessity:
 *   - Invalid UTF-8 in the text to encode is refused (MD_E_FORMAT, with the byte offset).
 *     `tokenizers` never sees such input: Python strings cannot hold lone bytes.
 *   - `tokenizers` runs the split regex with Oniguruma; we run it with PCRE2 and translate the
 *     constructs the engines read differently (collector/tokenizer/tokenizer_regex.c): \s and \S are
 *     Unicode White_Space as in Oniguruma (PCRE2's \s would add U+180E), \h is a hex digit,
 *     \v is U+000B, ^ and $ are line anchors, (?m) is PCRE2's (?s). Constructs that differ and
 *     that byte-level patterns do not use (\w \W \b \B \R \X \K \G \g \k \N \O \y \Y, \S
 *     or \H inside a class, nested classes, class intersection, group options other than
 *     i, x, m) are refused at load with their offset.
 *     Character properties (\p{L}, \p{N}) come from PCRE2's Unicode tables (Unicode 14 in
 *     PCRE2 10.42), Oniguruma's from Unicode 15: the letters and digits assigned in
 *     Unicode 15 (CJK Extension H, Kawi, Nag Mundari, ...) can split differently.
 *   - NFC follows `tokenizers`' normalizer, whose Unicode tables are frozen at version 9.0:
 *     combining marks and compositions added after Unicode 9.0 (about a hundred code points,
 *     listed in collector/tokenizer/tokenizer_unicode9.h) are left alone, exactly as `tokenizers` does.
 *   - decode() emits an added token's content verbatim (its NFC form when the token is
 *     normalized=true). `tokenizers`' ByteLevel decoder also pushes added-token content
 *     through the byte-level inverse table, which garbles content with characters in
 *     U+00A1..U+0143 ("café" decodes to "caf\xE9"); Qwen's added tokens are printable ASCII,
 *     where both agree. An added token whose content is also a vocabulary entry decodes as
 *     that entry.
 *   - Added-token ids must be the ones `tokenizers` would assign (the vocabulary id when the
 *     content is in the vocabulary, else the next free id above it); `tokenizers` only warns
 *     and renumbers, this loader refuses such a file.
 *
 * Token spans: each token gets the byte range [start, end) of the input text it comes from,
 * by `tokenizers`' offset rule: a token covers the input characters its normalized characters
 * are aligned to, so tokens that split one multi-byte character each get the whole character
 * (spans may overlap); a character that NFC composes with a following mark is aligned to the
 * base character only; an added token with lstrip/rstrip covers the whitespace it ate.
 *
 * A loaded tokenizer is immutable: encode, decode and the lookups may run concurrently from
 * several threads on the same md_tokenizer (it keeps a bounded cache of word encodings, each
 * part behind its own lock; results never depend on it). No global state. */
#ifndef MD_COLLECTOR_TOKENIZER_TOKENIZER_H
#define MD_COLLECTOR_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "io/formats/gguf.h"

typedef struct md_tokenizer md_tokenizer;

/* The input bytes [start, end) a token comes from (see "Token spans" above). */
typedef struct md_token_span {
  size_t start;
  size_t end;
} md_token_span;

/* A growable list of tokens that md_tokenizer_encode appends to. Zero-initialise it
 * (md_tokens t = {0};), reuse it across calls, release it with md_tokens_free. It also
 * keeps the encoder's working memory between calls, so one md_tokens per thread makes
 * many short encode calls cheap; it must not be used by two threads at once. */
typedef struct md_tokens {
  int32_t *ids;         /* [count] token ids */
  md_token_span *spans; /* [count] byte span of each token in the text passed to encode */
  size_t count;
  size_t capacity;
  struct md_tokens_scratch *scratch; /* private to the tokenizer */
} md_tokens;

/* Loads `path` (a tokenizer.json). On success *out owns the tokenizer; free it with
 * md_tokenizer_free. Errors: MD_E_IO (cannot read), MD_E_FORMAT (not JSON, with line and
 * column; a missing or malformed field, with its JSON path), MD_E_UNSUPPORTED (a model,
 * normalizer, pre-tokenizer, decoder or option this tokenizer does not implement),
 * MD_E_NOMEM. */
md_status md_tokenizer_load(const char *path, md_tokenizer **out, md_error *err);

/* Builds the tokenizer a GGUF file's metadata carries (tokenizer.ggml.*:
 * model "gpt2", pre-tokenizer "qwen2"), encoding exactly as the
 * tokenizer.json it was converted from. Errors name the file and the key:
 * MD_E_UNSUPPORTED for another model or pre-tokenizer, MD_E_FORMAT for
 * missing or malformed keys, and those of md_tokenizer_load for what the
 * document holds. */
md_status md_tokenizer_load_gguf(const md_gguf_file *file, md_tokenizer **out, md_error *err);

void md_tokenizer_free(md_tokenizer *tok);

/* Encodes `len` bytes of UTF-8 `text` and appends the ids (and their spans, relative to
 * `text`) to `out`. The main use is one call per region segment, appending to one list.
 * Errors: MD_E_FORMAT for invalid UTF-8 (the message gives the byte offset), MD_E_NOMEM,
 * MD_E_UNSUPPORTED if PCRE2 gives up on the split regex (a match, depth or heap limit), and
 * MD_E_INVALID for a text of 4 GiB or more. On error `out` keeps the tokens it had before
 * the call. */
md_status md_tokenizer_encode(const md_tokenizer *tok, const char *text, size_t len, md_tokens *out,
                              md_error *err);

/* As md_tokenizer_encode, but gives up as soon as `out` is certain to hold more than
 * `max_count` tokens (those it had before the call included): then *over is set, `out` keeps
 * the tokens it had before the call, and the status is MD_OK. Time and memory stay bounded
 * by `max_count`, not by `len`: a text too long for its fewest possible tokens to fit
 * (md_tokenizer_min_tokens) is not looked at, and neither is a pre-tokenizer piece that
 * cannot fit. Otherwise *over is false and the call is md_tokenizer_encode. */
md_status md_tokenizer_encode_at_most(const md_tokenizer *tok, const char *text, size_t len,
                                      size_t max_count, md_tokens *out, bool *over, md_error *err);

/* The fewest tokens that `len` bytes of text can encode to, from the text's length alone:
 * no token covers more normalized bytes than the longest vocabulary entry or added token,
 * and NFC makes a text at most 4 times shorter (KELVIN SIGN, 3 bytes, becomes "K"). An added
 * token with lstrip or rstrip covers any run of white space: the bound is then 1 for any
 * non-empty text. */
size_t md_tokenizer_min_tokens(const md_tokenizer *tok, size_t len);

/* Forgets the tokens (keeps the memory). */
void md_tokens_clear(md_tokens *tokens);
void md_tokens_free(md_tokens *tokens);

/* Decodes `n` ids to bytes: byte-level inverse for vocabulary tokens, the content for added
 * tokens; special tokens are left out when `skip_special`. *out_text is malloc'd and
 * NUL-terminated (it may contain invalid UTF-8 when the ids end inside a character, and NUL
 * bytes when the text had them); *out_len excludes the terminator. Errors: MD_E_INVALID for
 * an id that is not in the vocabulary (the message gives its position), MD_E_NOMEM. */
md_status md_tokenizer_decode(const md_tokenizer *tok, const int32_t *ids, size_t n,
                              bool skip_special, char **out_text, size_t *out_len, md_error *err);

/* One more than the largest id of the vocabulary and the added tokens (151669 for Qwen3's
 * file); ids below it with no entry are holes. Model embedding tables may be larger. */
size_t md_tokenizer_vocab_size(const md_tokenizer *tok);

/* The token's string as `tokenizers` shows it (Tokenizer.id_to_token): the byte-level vocab
 * string ("Ġworld") or the added token's content. NULL for an id with no entry. */
const char *md_tokenizer_piece(const md_tokenizer *tok, int32_t id);

/* The bytes the token decodes to (" world"), *len bytes, not NUL-terminated; may be a
 * partial UTF-8 character. NULL for an id with no entry. */
const char *md_tokenizer_piece_bytes(const md_tokenizer *tok, int32_t id, size_t *len);

/* Tokenizer.token_to_id: the id of an added token's content or of a vocabulary string
 * ("Ġworld"); -1 when there is none. */
int32_t md_tokenizer_token_id(const md_tokenizer *tok, const char *piece);

/* The id of the added token with this content ("<|im_start|>", "<|im_end|>",
 * "<|endoftext|>", "<think>"); -1 when the file has no such added token. */
int32_t md_tokenizer_added_id(const md_tokenizer *tok, const char *content);

/* Whether an id is an added token, and whether it is a special one. */
bool md_tokenizer_is_added(const md_tokenizer *tok, int32_t id);
bool md_tokenizer_is_special(const md_tokenizer *tok, int32_t id);

#endif
