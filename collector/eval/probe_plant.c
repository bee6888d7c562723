/* Probes planted into any trace (collector/eval/probe_plant.h). */
#include "collector/eval/probe_plant.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/regions.h"
#include "collector/eval/eval.h"
#include "collector/tokenizer/chat_template.h"
#include "io/files/atomic_file.h"
#include "io/files/output_guard.h"

/* ---- the phrasings ---------------------------------------------------------------------- */

/* One per known region, worded for what the region holds, so that the
 * questions of one episode differ and each reads as asking about its own
 * part of the prompt; the last entry serves every other region. */
static const md_probe_phrasing phrasings[] = {
    {MD_REGION_SYSTEM, "The deployment label of this assistant is ", ".",
     "What is the deployment label of this assistant?", "deployment_label", MD_PROBE_VALUE_CODE},
    {MD_REGION_PLAN, "The milestone code of this plan is ", ".",
     "What is the milestone code of the plan?", "milestone_code", MD_PROBE_VALUE_CODE},
    {MD_REGION_USER, "My customer number is ", ".", "What is the user's customer number?",
     "customer_number", MD_PROBE_VALUE_NUMBER},
    {MD_REGION_TOOL_IN, "The audit reference for this call is ", ".",
     "What audit reference did the agent pass in its tool call?", "audit_ref",
     MD_PROBE_VALUE_CODE},
    {MD_REGION_TOOL_OUT, "The request ID of this result is ", ".",
     "What request ID did the tool result carry?", "request_id", MD_PROBE_VALUE_CODE},
    {MD_REGION_RETRIEVAL, "The reference number of this document is ", ".",
     "What is the reference number of the retrieved document?", "document_number",
     MD_PROBE_VALUE_NUMBER},
    {MD_REGION_SCRATCHPAD, "Note to self: the checkpoint tag is ", ".",
     "What checkpoint tag did the agent note to itself?", "checkpoint_tag", MD_PROBE_VALUE_CODE},
    {NULL, "The tracking code of the %s section is ", ".",
     "What is the tracking code of the %s section?", "tracking_code", MD_PROBE_VALUE_CODE},
};
enum { n_phrasings = sizeof phrasings / sizeof phrasings[0] };

const md_probe_phrasing *md_probe_phrasing_for(const char *region) {
  for (size_t i = 0; i + 1 < n_phrasings; i++)
    if (!strcmp(phrasings[i].region, region)) return &phrasings[i];
  return &phrasings[n_phrasings - 1];
}

char *md_probe_phrasing_text(const char *format, const char *region) {
  const char *hole = strstr(format, "%s");
  size_t length = strlen(format) + (hole ? strlen(region) : 0) + 1;
  char *text = malloc(length);
  if (!text) return NULL;
  if (hole)
    snprintf(text, length, "%.*s%s%s", (int)(hole - format), format, region, hole + 2);
  else
    memcpy(text, format, length);
  return text;
}

/* ---- the generator ------------------------------------------------------------------------ */

/* splitmix64 (Steele, Lea and Flood 2014): the same stream on every machine. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static size_t random_below(uint64_t *state, size_t n) { return (size_t)(next_random(state) % n); }

/* The episode's generator: the seed and the episode's id (FNV-1a), so that
 * an episode's plants stay the same when others are added, removed or
 * reordered. */
static uint64_t episode_state(uint64_t seed, const char *id) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (const unsigned char *c = (const unsigned char *)id; *c; c++) hash = (hash ^ *c) * 0x100000001B3ull;
  uint64_t state = seed ^ hash;
  next_random(&state);
  return state;
}

/* No I, O, 0 or 1: a code read back by a model (or a person) is not
 * mistaken for another. */
static const char code_alphabet[] = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

static void draw_value(uint64_t *state, md_probe_value_kind kind, char out[16]) {
  if (kind == MD_PROBE_VALUE_NUMBER) {
    snprintf(out, 16, "%06u", (unsigned)(100000 + random_below(state, 900000)));
    return;
  }
  for (int i = 0; i < 3; i++) out[i] = code_alphabet[random_below(state, sizeof code_alphabet - 1)];
  snprintf(out + 3, 13, "-%04u", (unsigned)random_below(state, 10000));
}

/* ---- small text helpers ------------------------------------------------------------------- */

typedef struct text_buf {
  char *data;
  size_t length, capacity;
} text_buf;

static bool buf_append(text_buf *b, const char *text, size_t length) {
  if (b->length + length + 1 > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 256;
    while (capacity < b->length + length + 1) capacity *= 2;
    char *grown = realloc(b->data, capacity);
    if (!grown) return false;
    b->data = grown;
    b->capacity = capacity;
  }
  memcpy(b->data + b->length, text, length);
  b->length += length;
  b->data[b->length] = '\0';
  return true;
}

static bool buf_add(text_buf *b, const char *text) { return buf_append(b, text, strlen(text)); }

static unsigned char ascii_lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* Occurrences of the ASCII `needle` in text[0..length), ignoring ASCII
 * case, overlapping ones included. */
static size_t count_ascii_nocase(const char *text, size_t length, const char *needle) {
  size_t n = strlen(needle), count = 0;
  for (size_t i = 0; n && i + n <= length; i++) {
    size_t k = 0;
    while (k < n && ascii_lower((unsigned char)text[i + k]) == ascii_lower((unsigned char)needle[k])) k++;
    count += k == n;
  }
  return count;
}

/* Occurrences of `needle` in `haystack`, overlapping ones included. */
static size_t count_substring(const char *haystack, const char *needle) {
  size_t count = 0;
  if (!*needle) return 0;
  for (const char *at = strstr(haystack, needle); at; at = strstr(at + 1, needle)) count++;
  return count;
}

/* ---- errors ------------------------------------------------------------------------------- */


static md_status no_memory(md_error *err) { return md_fail(err, MD_E_NOMEM, "out of memory"); }

/* ---- where a region's fact can go ------------------------------------------------------- */

/* A text of the region: a message's content segment or a raw span. */
typedef struct text_host {
  md_probe_site_kind kind;
  size_t message, item;
  const char *text;
  size_t length;
} text_host;

static bool is_ideographic_stop(utf8proc_int32_t cp) {
  return cp == 0x3002 || cp == 0xFF01 || cp == 0xFF1F; /* 。！？ */
}

/* In the raw form, true when text[0..at) ends with a special token such as
 * "<|im_end|>" (then only line breaks): a sentence there would fall between
 * two turns instead of inside one. */
static bool follows_special_token(const char *text, size_t at) {
  while (at > 0 && (text[at - 1] == '\n' || text[at - 1] == '\r')) at--;
  return at >= 2 && text[at - 2] == '|' && text[at - 1] == '>';
}

/* The sentence boundaries of a text, in increasing order (every one after a
 * whole character): after ". ", "! ", "? ", a line feed, "。", "！", "？", and
 * the end. Returns how many; *out is malloc'd (NULL when none). */
static md_status sentence_boundaries(const char *text, size_t length, bool raw, size_t **out,
                                     size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  size_t *at = malloc((length + 1) * sizeof *at);
  if (!at) return MD_E_NOMEM;
  size_t n = 0;
  for (size_t i = 0; i < length;) {
    utf8proc_int32_t cp = -1;
    utf8proc_ssize_t k =
        utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(length - i), &cp);
    if (k <= 0) k = 1; /* cannot happen: jansson holds valid UTF-8 */
    size_t after = i + (size_t)k;
    size_t boundary = 0;
    if (cp == '\n' || is_ideographic_stop(cp)) boundary = after;
    else if ((cp == '.' || cp == '!' || cp == '?') && after < length && text[after] == ' ')
      boundary = after + 1;
    if (boundary && (n == 0 || at[n - 1] < boundary)) at[n++] = boundary;
    i = after;
  }
  if (length > 0 && (n == 0 || at[n - 1] < length)) at[n++] = length;
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (!raw || !follows_special_token(text, at[i])) at[kept++] = at[i];
  if (kept == 0) {
    free(at);
    return MD_OK;
  }
  *out = at;
  *n_out = kept;
  return MD_OK;
}

/* The bytes inserted at boundary `at` of `text`: the sentence, on a line of
 * its own after a line break, followed by a space where a sentence follows,
 * after a space at the end of a text that ends in neither. */
static bool insertion(const char *text, size_t length, size_t at, const char *sentence,
                      text_buf *out) {
  out->length = 0;
  char before = at > 0 ? text[at - 1] : '\n';
  bool after_space = before == ' ' || before == '\t';
  bool after_line = before == '\n';
  bool after_stop = at >= 3 && (!memcmp(text + at - 3, "\xE3\x80\x82", 3) ||  /* 。 */
                                !memcmp(text + at - 3, "\xEF\xBC\x81", 3) ||  /* ！ */
                                !memcmp(text + at - 3, "\xEF\xBC\x9F", 3));   /* ？ */
  if (!after_space && !after_line && !after_stop && !buf_add(out, " ")) return false;
  if (!buf_add(out, sentence)) return false;
  if (after_line) return buf_add(out, "\n");
  if (at < length) return buf_add(out, " ");
  return true;
}

/* ---- one episode -------------------------------------------------------------------------- */

typedef struct plant_state {
  const md_trace_episode *in;
  json_t *root;        /* the planted copy of in->root */
  json_t *probes;      /* the probes planted */
  text_buf seen;       /* the episode's text (rendered prompt, continuation, questions, plants) */
  char *seen_normal;   /* md_eval_normalise(seen), kept up to date */
  uint64_t random;
  text_buf scratch;
} plant_state;

static md_status refresh_normal(plant_state *st, md_error *err) {
  free(st->seen_normal);
  st->seen_normal = md_eval_normalise(st->seen.data ? st->seen.data : "", st->seen.length);
  return st->seen_normal ? MD_OK : no_memory(err);
}

/* A value of `kind` that occurs nowhere in what the episode holds so far. */
static md_status fresh_value(plant_state *st, md_probe_value_kind kind, const char *region,
                             char value[16], md_error *err) {
  for (int attempt = 0; attempt < 1000; attempt++) {
    draw_value(&st->random, kind, value);
    if (count_ascii_nocase(st->seen.data, st->seen.length, value)) continue;
    char *normal = md_eval_normalise(value, strlen(value));
    if (!normal) return no_memory(err);
    bool taken = strstr(st->seen_normal, normal) != NULL;
    free(normal);
    if (!taken) return MD_OK;
  }
  return md_trace_episode_fail(err, MD_E_INVALID, st->in,
                      "no value for region \"%s\" that occurs nowhere in the episode after 1000 "
                      "draws", region);
}

/* A growing list of distinct region names (borrowed). */
typedef struct name_list {
  const char **names;
  size_t n, capacity;
} name_list;

static bool add_name(name_list *list, const char *name) {
  for (size_t i = 0; i < list->n; i++)
    if (!strcmp(list->names[i], name)) return true;
  if (list->n == list->capacity) {
    size_t capacity = list->capacity ? 2 * list->capacity : 8;
    const char **grown = realloc(list->names, capacity * sizeof *grown);
    if (!grown) return false;
    list->names = grown;
    list->capacity = capacity;
  }
  list->names[list->n++] = name;
  return true;
}

/* The regions of the episode's prompt that hold text or tool calls. */
static md_status regions_of(const md_trace_episode *ep, name_list *out, md_error *err) {
  memset(out, 0, sizeof *out);
  bool ok = true;
  for (size_t s = 0; ok && s < ep->n_spans; s++)
    if (ep->spans[s].length) ok = add_name(out, ep->spans[s].region);
  for (size_t m = 0; ok && m < ep->n_messages; m++) {
    const md_trace_message *msg = &ep->messages[m];
    for (size_t s = 0; ok && s < msg->n_segments; s++)
      if (msg->segments[s].length) ok = add_name(out, msg->segments[s].region);
    for (size_t c = 0; ok && c < msg->n_tool_calls; c++) ok = add_name(out, msg->tool_calls[c].region);
  }
  return ok ? MD_OK : no_memory(err);
}

/* The region's texts that have a usable boundary, with their boundaries. */
typedef struct host_list {
  text_host *hosts;
  size_t **boundaries;
  size_t *n_boundaries;
  size_t n;
} host_list;

static void host_list_free(host_list *h) {
  for (size_t i = 0; i < h->n; i++) free(h->boundaries[i]);
  free(h->hosts);
  free(h->boundaries);
  free(h->n_boundaries);
  memset(h, 0, sizeof *h);
}

static md_status add_host(host_list *h, text_host host, bool raw, md_error *err) {
  size_t *at, n_at;
  if (sentence_boundaries(host.text, host.length, raw, &at, &n_at) != MD_OK) return no_memory(err);
  if (n_at == 0) return MD_OK;
  text_host *hosts = realloc(h->hosts, (h->n + 1) * sizeof *hosts);
  if (hosts) h->hosts = hosts;
  size_t **boundaries = realloc(h->boundaries, (h->n + 1) * sizeof *boundaries);
  if (boundaries) h->boundaries = boundaries;
  size_t *counts = realloc(h->n_boundaries, (h->n + 1) * sizeof *counts);
  if (counts) h->n_boundaries = counts;
  if (!hosts || !boundaries || !counts) {
    free(at);
    return no_memory(err);
  }
  h->hosts[h->n] = host;
  h->boundaries[h->n] = at;
  h->n_boundaries[h->n] = n_at;
  h->n++;
  return MD_OK;
}

static md_status text_hosts(const md_trace_episode *ep, const char *region, host_list *out,
                            md_error *err) {
  memset(out, 0, sizeof *out);
  md_status s = MD_OK;
  for (size_t i = 0; s == MD_OK && i < ep->n_spans; i++) {
    const md_trace_segment *span = &ep->spans[i];
    if (span->length && !strcmp(span->region, region))
      s = add_host(out, (text_host){MD_PROBE_SITE_SPAN, 0, i, span->text, span->length}, true, err);
  }
  for (size_t m = 0; s == MD_OK && m < ep->n_messages; m++) {
    const md_trace_message *msg = &ep->messages[m];
    for (size_t i = 0; s == MD_OK && i < msg->n_segments; i++) {
      const md_trace_segment *seg = &msg->segments[i];
      if (seg->length && !strcmp(seg->region, region))
        s = add_host(out, (text_host){MD_PROBE_SITE_SEGMENT, m, i, seg->text, seg->length}, false,
                     err);
    }
  }
  if (s != MD_OK) host_list_free(out);
  return s;
}

/* The JSON string of a host in the planted copy, and where to put its new
 * text: the object and key that hold it. */
static md_status host_slot(json_t *root, const text_host *host, json_t **object, const char **key) {
  *key = "text";
  if (host->kind == MD_PROBE_SITE_SPAN) {
    *object = json_array_get(json_object_get(root, "spans"), host->item);
  } else {
    json_t *message = json_array_get(json_object_get(root, "messages"), host->message);
    json_t *content = json_object_get(message, "content");
    if (json_is_string(content)) {
      *object = message;
      *key = "content";
    } else {
      *object = json_array_get(content, host->item);
    }
  }
  return json_is_string(json_object_get(*object, *key)) ? MD_OK : MD_E_INVALID;
}

static md_status plant_in_text(plant_state *st, const host_list *hosts, const char *sentence,
                               md_probe_site *site, md_error *err) {
  size_t pick = random_below(&st->random, hosts->n);
  const text_host *host = &hosts->hosts[pick];
  size_t at = hosts->boundaries[pick][random_below(&st->random, hosts->n_boundaries[pick])];
  if (!insertion(host->text, host->length, at, sentence, &st->scratch)) return no_memory(err);
  json_t *object;
  const char *key;
  if (host_slot(st->root, host, &object, &key) != MD_OK)
    return md_trace_episode_fail(err, MD_E_INVALID, st->in, "internal error: the planted text's field "
                        "is not where the reader found it");
  text_buf planted = {0};
  bool ok = buf_append(&planted, host->text, at) &&
            buf_append(&planted, st->scratch.data, st->scratch.length) &&
            buf_append(&planted, host->text + at, host->length - at);
  json_t *string = ok ? json_stringn(planted.data, planted.length) : NULL;
  free(planted.data);
  if (!string || json_object_set_new(object, key, string)) return no_memory(err);
  site->kind = host->kind;
  site->message = host->message;
  site->item = host->item;
  site->offset = at;
  site->inserted_length = st->scratch.length;
  return MD_OK;
}

/* How many tool calls of the episode are in `region`; with `message` given,
 * also where the one numbered `pick` is (its message and call index). */
static size_t region_calls(const md_trace_episode *ep, const char *region, size_t *message,
                           size_t *call, size_t pick) {
  size_t n = 0;
  for (size_t m = 0; m < ep->n_messages; m++)
    for (size_t c = 0; c < ep->messages[m].n_tool_calls; c++)
      if (!strcmp(ep->messages[m].tool_calls[c].region, region)) {
        if (n == pick && message) {
          *message = m;
          *call = c;
        }
        n++;
      }
  return n;
}

static md_status plant_in_arguments(plant_state *st, const char *region, size_t n_calls,
                                    const md_probe_phrasing *phrasing, md_probe_site *site,
                                    md_error *err) {
  size_t message = 0, call = 0;
  region_calls(st->in, region, &message, &call, random_below(&st->random, n_calls));
  json_t *object = json_array_get(
      json_object_get(json_array_get(json_object_get(st->root, "messages"), message), "tool_calls"),
      call);
  json_t *function = json_object_get(object, "function");
  json_t *arguments = json_object_get(json_is_object(function) ? function : object, "arguments");
  if (!json_is_object(arguments))
    return md_trace_episode_fail(err, MD_E_INVALID, st->in, "internal error: the tool call's arguments "
                        "are not where the reader found them");
  char *key = strdup(phrasing->argument_key);
  for (unsigned suffix = 2; key && json_object_get(arguments, key); suffix++) {
    free(key);
    size_t size = strlen(phrasing->argument_key) + 16;
    key = malloc(size);
    if (key) snprintf(key, size, "%s_%u", phrasing->argument_key, suffix);
  }
  if (!key || json_object_set_new(arguments, key, json_string(site->answer))) {
    free(key);
    return no_memory(err);
  }
  site->kind = MD_PROBE_SITE_ARGUMENTS;
  site->message = message;
  site->item = call;
  site->argument_key = key;
  return MD_OK;
}

static md_status plant_region(plant_state *st, const char *region, md_probe_site *site,
                              md_error *err) {
  site->region = region;
  host_list hosts;
  md_status s = text_hosts(st->in, region, &hosts, err);
  if (s != MD_OK) return s;
  size_t n_calls = region_calls(st->in, region, NULL, NULL, 0);
  if (hosts.n == 0 && n_calls == 0) return MD_OK; /* nothing of it in the prompt */
  const md_probe_phrasing *phrasing = md_probe_phrasing_for(region);
  char *before = md_probe_phrasing_text(phrasing->sentence_before, region);
  char *question = md_probe_phrasing_text(phrasing->question, region);
  char *sentence = NULL;
  if (!before || !question) s = no_memory(err);
  if (s == MD_OK) s = fresh_value(st, phrasing->value, region, site->answer, err);
  if (s == MD_OK) {
    size_t size = strlen(before) + strlen(site->answer) + strlen(phrasing->sentence_after) + 1;
    sentence = malloc(size);
    if (!sentence) s = no_memory(err);
    else snprintf(sentence, size, "%s%s%s", before, site->answer, phrasing->sentence_after);
  }
  /* Text first: a region with prose gets a sentence; tool calls only carry a
   * region's fact when it has no prose (tool_in, as a rule). */
  if (s == MD_OK)
    s = hosts.n ? plant_in_text(st, &hosts, sentence, site, err)
                : plant_in_arguments(st, region, n_calls, phrasing, site, err);
  if (s == MD_OK) {
    json_t *probe = json_pack("{s:s, s:s, s:s}", "region", region, "question", question, "answer",
                              site->answer);
    if (!probe || json_array_append_new(st->probes, probe)) s = no_memory(err);
  }
  /* What later regions' values must avoid: this one's text. */
  if (s == MD_OK && !(buf_add(&st->seen, "\n") && buf_add(&st->seen, sentence))) s = no_memory(err);
  if (s == MD_OK && site->argument_key && !(buf_add(&st->seen, "\n") && buf_add(&st->seen, site->argument_key)))
    s = no_memory(err);
  if (s == MD_OK) s = refresh_normal(st, err);
  free(before);
  free(question);
  free(sentence);
  host_list_free(&hosts);
  return s;
}

/* What every value must avoid: the prompt as the model reads it (template
 * text, tool names, tools block included), the continuation, and the
 * questions that will be asked. */
static md_status seen_text(plant_state *st, const char *const *regions, size_t n_regions,
                           md_error *err) {
  md_chat_prompt prompt;
  md_status s = md_chat_render(st->in, &prompt, err);
  if (s != MD_OK) return s;
  bool ok = buf_append(&st->seen, prompt.text, prompt.length);
  if (ok && prompt.continuation.kind == MD_CONTINUATION_TEXT)
    ok = buf_add(&st->seen, "\n") &&
         buf_append(&st->seen, prompt.continuation.text, prompt.continuation.length);
  md_chat_prompt_free(&prompt);
  for (size_t i = 0; ok && i < n_regions; i++) {
    char *question = md_probe_phrasing_text(md_probe_phrasing_for(regions[i])->question, regions[i]);
    ok = question && buf_add(&st->seen, "\n") && buf_add(&st->seen, question);
    free(question);
  }
  if (!ok) return no_memory(err);
  return refresh_normal(st, err);
}

/* The planted episode as eval will read it: each answer exactly once, as
 * text in any case and as normalised words, inside a span of its region. */
static md_status check_planted(const md_probe_planted *out, md_error *err) {
  const md_trace_episode *ep = &out->episode;
  md_chat_prompt prompt;
  md_status s = md_chat_render(ep, &prompt, err);
  if (s != MD_OK) return s;
  text_buf all = {0};
  bool ok = buf_append(&all, prompt.text, prompt.length);
  if (ok && prompt.continuation.kind == MD_CONTINUATION_TEXT)
    ok = buf_add(&all, "\n") && buf_append(&all, prompt.continuation.text, prompt.continuation.length);
  char *normal = ok ? md_eval_normalise(all.data, all.length) : NULL;
  if (!normal) s = no_memory(err);
  for (size_t i = 0; s == MD_OK && i < out->n_sites; i++) {
    const md_probe_site *site = &out->sites[i];
    if (site->kind == MD_PROBE_SITE_NONE) continue;
    char *answer = md_eval_normalise(site->answer, strlen(site->answer));
    if (!answer) {
      s = no_memory(err);
      break;
    }
    size_t as_text = count_ascii_nocase(all.data, all.length, site->answer);
    size_t as_words = count_substring(normal, answer);
    free(answer);
    const char *found_in = NULL;
    const char *at = strstr(prompt.text, site->answer);
    for (size_t k = 0; at && k < prompt.n_spans; k++)
      if ((size_t)(at - prompt.text) >= prompt.spans[k].start &&
          (size_t)(at - prompt.text) + strlen(site->answer) <= prompt.spans[k].end)
        found_in = prompt.spans[k].region;
    if (as_text != 1 || as_words != 1 || !found_in || strcmp(found_in, site->region) != 0)
      s = md_trace_episode_fail(err, MD_E_INVALID, ep,
                       "internal error: the answer %s planted in region \"%s\" occurs %zu times "
                       "as text and %zu as words, %s%s", site->answer, site->region, as_text,
                       as_words, found_in ? "in region " : "in no single span",
                       found_in ? found_in : "");
  }
  free(normal);
  free(all.data);
  md_chat_prompt_free(&prompt);
  return s;
}

void md_probe_planted_free(md_probe_planted *planted) {
  if (!planted) return;
  free(planted->line);
  md_trace_episode_free(&planted->episode);
  for (size_t i = 0; i < planted->n_sites; i++) free(planted->sites[i].argument_key);
  free(planted->sites);
  memset(planted, 0, sizeof *planted);
}

md_status md_probe_plant_episode(const md_trace_episode *input, const md_probe_plant_settings *settings,
                                 md_probe_planted *out, md_error *err) {
  memset(out, 0, sizeof *out);
  if (input->n_probes && !settings->replace)
    return md_trace_episode_fail(err, MD_E_INVALID, input,
                        "has %zu probe%s already (--replace drops them and plants new ones)",
                        input->n_probes, input->n_probes == 1 ? "" : "s");
  name_list own_regions = {0};
  const char *const *regions = settings->regions;
  size_t n_regions = settings->n_regions;
  md_status s = MD_OK;
  if (!regions) {
    s = regions_of(input, &own_regions, err);
    regions = own_regions.names;
    n_regions = own_regions.n;
  }
  plant_state st = {.in = input, .random = episode_state(settings->seed, input->id)};
  if (s == MD_OK) {
    st.root = json_deep_copy(input->root);
    st.probes = json_array();
    out->sites = calloc(n_regions ? n_regions : 1, sizeof *out->sites);
    if (!st.root || !st.probes || !out->sites) s = no_memory(err);
  }
  if (s == MD_OK) s = seen_text(&st, regions, n_regions, err);
  /* Output order, whatever order the regions were asked in. */
  const char **ordered = s == MD_OK ? malloc((n_regions ? n_regions : 1) * sizeof *ordered) : NULL;
  if (s == MD_OK && !ordered) s = no_memory(err);
  if (s == MD_OK && n_regions) {
    memcpy(ordered, regions, n_regions * sizeof *ordered);
    qsort(ordered, n_regions, sizeof *ordered, md_region_name_compare);
  }
  for (size_t i = 0; s == MD_OK && i < n_regions; i++) {
    s = plant_region(&st, ordered[i], &out->sites[i], err);
    out->n_sites = i + 1;
    if (s == MD_OK && out->sites[i].kind != MD_PROBE_SITE_NONE) out->n_planted++;
  }
  if (s == MD_OK) {
    /* In place of the input's probes, or last; an empty list stays as it was. */
    if (json_array_size(st.probes)) {
      if (json_object_set(st.root, "probes", st.probes)) s = no_memory(err);
    } else if (input->n_probes) {
      json_object_del(st.root, "probes");
    }
  }
  if (s == MD_OK) {
    /* The input's parsed fields with the planted root: the writer reads
     * which arguments were strings from them, one for one. */
    md_trace_episode view = *input;
    view.root = st.root;
    s = md_trace_episode_dumps(&view, &out->line, err);
  }
  if (s == MD_OK) {
    md_error inner;
    md_error_clear(&inner);
    s = md_trace_parse_line(input->path, input->line, out->line, strlen(out->line) - 1,
                            &out->episode, &inner);
    if (s == MD_E_NOMEM) s = no_memory(err);
    else if (s != MD_OK)
      s = md_trace_episode_fail(err, MD_E_INVALID, input, "internal error: the planted episode does not "
                       "read back: %.300s", inner.message);
  }
  if (s == MD_OK) s = check_planted(out, err);
  json_decref(st.root);
  json_decref(st.probes);
  free(st.seen.data);
  free(st.seen_normal);
  free(st.scratch.data);
  free(ordered);
  free(own_regions.names);
  if (s != MD_OK) md_probe_planted_free(out);
  return s;
}

/* ---- the stage -------------------------------------------------------------------------- */

void md_probe_plant_outcome_free(md_probe_plant_outcome *outcome) {
  if (!outcome) return;
  for (size_t i = 0; i < outcome->n_regions; i++) free(outcome->regions[i].region);
  free(outcome->regions);
  memset(outcome, 0, sizeof *outcome);
}

static md_probe_region_count *count_for(md_probe_plant_outcome *o, const char *region) {
  for (size_t i = 0; i < o->n_regions; i++)
    if (!strcmp(o->regions[i].region, region)) return &o->regions[i];
  md_probe_region_count *grown = realloc(o->regions, (o->n_regions + 1) * sizeof *grown);
  if (!grown) return NULL;
  o->regions = grown;
  md_probe_region_count *c = &o->regions[o->n_regions];
  *c = (md_probe_region_count){.region = strdup(region)};
  if (!c->region) return NULL;
  o->n_regions++;
  return c;
}

static int compare_counts(const void *a, const void *b) {
  const md_probe_region_count *x = a, *y = b;
  return md_region_name_compare(&x->region, &y->region);
}

static md_status check_regions(const md_probe_plant_settings *s, md_error *err) {
  for (size_t i = 0; i < s->n_regions; i++) {
    if (!md_trace_region_valid(s->regions[i]))
      return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE,
                          "--regions: invalid region name '%s' (a region is [a-z][a-z0-9_]*, at "
                          "most %d bytes)", s->regions[i], MD_TRACE_REGION_MAX);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(s->regions[i], s->regions[j]))
        return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE,
                            "--regions: region '%s' is listed twice", s->regions[i]);
  }
  if (s->regions && s->n_regions == 0)
    return md_fail_kind(err, MD_E_INVALID, MD_KIND_USAGE, "--regions: the list is empty");
  return MD_OK;
}

static md_status tally(md_probe_plant_outcome *o, const md_trace_episode *in,
                       const md_probe_planted *planted, md_error *err) {
  o->episodes++;
  o->probes += planted->n_planted;
  o->replaced += in->n_probes;
  if (!planted->n_planted) o->episodes_without_probes++;
  for (size_t i = 0; i < planted->n_sites; i++) {
    md_probe_region_count *c = count_for(o, planted->sites[i].region);
    if (!c) return no_memory(err);
    if (planted->sites[i].kind == MD_PROBE_SITE_NONE) continue;
    c->planted++;
    c->in_arguments += planted->sites[i].kind == MD_PROBE_SITE_ARGUMENTS;
  }
  return MD_OK;
}

md_status md_probe_plant(const md_probe_plant_options *options, md_probe_plant_outcome *outcome,
                         md_error *err) {
  memset(outcome, 0, sizeof *outcome);
  md_status s = check_regions(&options->settings, err);
  if (s != MD_OK) return s;
  const md_path_role outputs[] = {{options->output_path, "-o", false}};
  const md_path_role inputs[] = {{options->traces_path, "trace file", false}};
  if ((s = md_outputs_check(outputs, 1, inputs, 1, err)) != MD_OK) return s;
  md_trace_reader *reader = NULL;
  if ((s = md_trace_open(options->traces_path, NULL, &reader, err)) != MD_OK) return s;
  md_atomic_file file = {0};
  s = md_atomic_open(&file, options->output_path, err);
  /* Regions asked for are reported even where no episode has them. */
  for (size_t i = 0; s == MD_OK && i < options->settings.n_regions; i++)
    if (!count_for(outcome, options->settings.regions[i])) s = no_memory(err);
  while (s == MD_OK) {
    md_trace_episode episode;
    bool have = false;
    if ((s = md_trace_next(reader, &episode, &have, err)) != MD_OK || !have) break;
    md_probe_planted planted;
    s = md_probe_plant_episode(&episode, &options->settings, &planted, err);
    if (s == MD_OK) s = tally(outcome, &episode, &planted, err);
    if (s == MD_OK && fputs(planted.line, file.fp) == EOF)
      s = md_fail_kind(err, MD_E_IO, MD_KIND_IO, "cannot write %s: %s", options->output_path,
                       strerror(errno));
    md_probe_planted_free(&planted); /* empty after a failure */
    md_trace_episode_free(&episode);
  }
  md_trace_close(reader);
  if (s == MD_OK && outcome->episodes == 0)
    s = md_fail(err, MD_E_FORMAT, "%s: no episodes (the file is empty or has only blank lines)",
                options->traces_path);
  if (s == MD_OK) {
    s = md_atomic_commit(&file, err);
  } else {
    md_atomic_abort(&file);
  }
  if (s != MD_OK) {
    md_probe_plant_outcome_free(outcome);
    return s;
  }
  for (size_t i = 0; i < outcome->n_regions; i++)
    outcome->regions[i].without = outcome->episodes - outcome->regions[i].planted;
  if (outcome->n_regions) qsort(outcome->regions, outcome->n_regions, sizeof *outcome->regions, compare_counts);
  return MD_OK;
}
