/* memdecay-calibrate tokenize: JSON Lines of texts in, JSON Lines of token ids out, with the
 * model's own tokenizer.json. For checking what the collector will see, and for comparing
 * with the HF `tokenizers` library (Tokenizer.encode(text, add_special_tokens=False)). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "calib/cli.h"
#include "calib/commands.h"
#include "collector/tokenizer/tokenizer.h"

static const char command[] = "tokenize";

typedef struct options {
  const char *model_dir;
  const char *tokenizer_path;
  bool pieces;       /* emit "pieces" */
  bool offsets;      /* emit "offsets" */
  bool vocab_pieces; /* pieces as vocabulary strings ("Ġworld") rather than text */
} options;

static void print_help(FILE *out) {
  fprintf(
      out,
      "Usage: " MD_PROGRAM
      " tokenize (--model DIR | --tokenizer FILE) [OPTIONS] < IN.jsonl > OUT.jsonl\n"
      "\n"
      "Tokenizes texts with a model's tokenizer.json, as the collector does: the ids are those\n"
      "of the HF tokenizers library with add_special_tokens=False (no BOS/EOS added; special\n"
      "tokens written in the text, such as <|im_start|>, are recognised).\n"
      "\n"
      "Input: JSON Lines on standard input, one object per line with a \"text\" string. An \"id\"\n"
      "field, of any type, is copied to the output line; other fields are ignored; blank lines\n"
      "are skipped.\n"
      "Output: one JSON object per input line on standard output:\n"
      "  \"id\"       the input's id, when it has one\n"
      "  \"ids\"      the token ids\n"
      "  \"pieces\"   each token's text; a token that ends or starts inside a multi-byte\n"
      "             character shows the bytes it cannot complete as U+FFFD\n"
      "  \"offsets\"  each token's [start, end) in bytes of the UTF-8 text; tokens that split\n"
      "             one character each cover the whole character\n"
      "\n"
      "Options:\n"
      "  --model DIR       use DIR/tokenizer.json (a Hugging Face checkpoint directory)\n"
      "  --tokenizer FILE  use this tokenizer.json\n"
      "  --no-pieces       leave out \"pieces\"\n"
      "  --no-offsets      leave out \"offsets\"\n"
      "  --vocab-pieces    show pieces as vocabulary strings (\"Ġworld\"), as\n"
      "                    tokenizers' Encoding.tokens does\n"
      "  -h, --help        this text\n"
      "\n"
      "Example:\n"
      "  echo '{\"id\": \"t1\", \"text\": \"Hello world\"}' |\n"
      "    " MD_PROGRAM
      " tokenize --tokenizer data/tokenizer/qwen/tokenizer.json\n"
      "  {\"id\": \"t1\", \"ids\": [9707, 1879], \"pieces\": [\"Hello\", \" world\"], \"offsets\": "
      "[[0, 5], [5, 11]]}\n"
      "\n"
      "Exit status: 0 on success; 2 for a usage error, an unreadable or unsupported tokenizer,\n"
      "or an input line that is not a JSON object with a \"text\" string (the message names\n"
      "the line); 3 when the output cannot be written.\n");
}

enum { OPT_MODEL, OPT_TOKENIZER, OPT_NO_PIECES, OPT_NO_OFFSETS, OPT_VOCAB_PIECES, OPT_HELP };

static const md_opt tokenize_table[] = {
    {"model", 0, OPT_MODEL, "DIR"},
    {"tokenizer", 0, OPT_TOKENIZER, "FILE"},
    {"no-pieces", 0, OPT_NO_PIECES, NULL},
    {"no-offsets", 0, OPT_NO_OFFSETS, NULL},
    {"vocab-pieces", 0, OPT_VOCAB_PIECES, NULL},
    {"help", 'h', OPT_HELP, NULL},
    {NULL, 0, 0, NULL},
};

/* Handles one option; returns -1 to go on, else the exit code. */
static int take_option(void *context, const md_opt *option, const char *value) {
  options *opt = context;
  switch (option->id) {
    case OPT_MODEL: opt->model_dir = value; return -1;
    case OPT_TOKENIZER: opt->tokenizer_path = value; return -1;
    case OPT_NO_PIECES: opt->pieces = false; return -1;
    case OPT_NO_OFFSETS: opt->offsets = false; return -1;
    case OPT_VOCAB_PIECES: opt->vocab_pieces = true; return -1;
    case OPT_HELP: print_help(stdout); return MD_EXIT_OK;
    default: return md_cli_usage_error(command, "unknown option");
  }
}

static const md_opt_group groups[] = {{tokenize_table, take_option}, {NULL, NULL}};

/* "unexpected argument '--x'" and "option --x needs a value", as its tests
 * check. */
const md_opt_command md_tokenize_command = {
    "tokenize", groups, print_help, MD_OPT_KEEP_UNKNOWN_WORDING | MD_OPT_KEEP_NEEDS_VALUE_WORDING};

/* Parses the options; returns -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, options *opt) {
  *opt = (options){.pieces = true, .offsets = true};
  char **args;
  int n_args;
  int code = md_opt_parse_or_report(&md_tokenize_command, opt, argc, argv, &args, &n_args);
  if (code >= 0) return code;
  if (n_args > 0) return md_cli_usage_error(command, "unexpected argument '%s'", args[0]);
  if (!opt->model_dir == !opt->tokenizer_path)
    return md_cli_usage_error(command, "give one of --model DIR or --tokenizer FILE");
  return -1;
}

static int load(const options *opt, md_tokenizer **tok) {
  char *path = NULL;
  if (opt->model_dir) {
    size_t n = strlen(opt->model_dir) + sizeof "/tokenizer.json";
    path = malloc(n);
    if (!path) return MD_EXIT_FAILURE;
    snprintf(path, n, "%s/tokenizer.json", opt->model_dir);
  }
  md_error err = {0};
  md_status st = md_tokenizer_load(path ? path : opt->tokenizer_path, tok, &err);
  free(path);
  if (st == MD_OK) return -1;
  md_cli_report(&err);
  /* A tokenizer that cannot be read is bad input here, whatever the cause. */
  return st == MD_E_NOMEM ? MD_EXIT_FAILURE : MD_EXIT_INPUT;
}

/* The bytes as a JSON string, each byte that is not part of a complete UTF-8 character
 * replaced by U+FFFD. */
static json_t *readable_piece(const char *bytes, size_t len) {
  char *text = malloc(3 * len + 1);
  if (!text) return NULL;
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k =
        utf8proc_iterate((const utf8proc_uint8_t *)bytes + i, (utf8proc_ssize_t)(len - i), &cp);
    if (k > 0) {
      memcpy(text + n, bytes + i, (size_t)k);
      n += (size_t)k;
      i += (size_t)k;
    } else {
      memcpy(text + n, "\xef\xbf\xbd", 3);
      n += 3;
      i++;
    }
  }
  json_t *s = json_stringn(text, n);
  free(text);
  return s;
}

static json_t *piece_of(const md_tokenizer *tok, int32_t id, bool vocab_form) {
  if (vocab_form) return json_string(md_tokenizer_piece(tok, id));
  size_t len = 0;
  const char *bytes = md_tokenizer_piece_bytes(tok, id, &len);
  return readable_piece(bytes, len);
}

/* The output object for one input line. */
static json_t *result(const md_tokenizer *tok, const options *opt, json_t *id, const md_tokens *t) {
  json_t *out = json_object(), *ids = json_array(), *pieces = json_array(), *offsets = json_array();
  if (id) json_object_set(out, "id", id);
  for (size_t k = 0; k < t->count; k++) {
    json_array_append_new(ids, json_integer(t->ids[k]));
    if (opt->pieces) json_array_append_new(pieces, piece_of(tok, t->ids[k], opt->vocab_pieces));
    if (opt->offsets)
      json_array_append_new(
          offsets, json_pack("[II]", (json_int_t)t->spans[k].start, (json_int_t)t->spans[k].end));
  }
  json_object_set_new(out, "ids", ids);
  if (opt->pieces)
    json_object_set_new(out, "pieces", pieces);
  else
    json_decref(pieces);
  if (opt->offsets)
    json_object_set_new(out, "offsets", offsets);
  else
    json_decref(offsets);
  return out;
}

static bool blank(const char *line, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '\n') return false;
  return true;
}

/* Tokenizes one input line; returns -1 to go on, else the exit code. */
static int process_line(const md_tokenizer *tok, const options *opt, const char *line, size_t len,
                        size_t number, md_tokens *t) {
  json_error_t jerr;
  json_t *row = json_loadb(line, len, JSON_ALLOW_NUL, &jerr);
  if (!row) {
    fprintf(stderr, MD_PROGRAM " tokenize: <stdin>:%zu:%d: not valid JSON: %s\n", number,
            jerr.column, jerr.text);
    return MD_EXIT_INPUT;
  }
  json_t *text = json_object_get(row, "text");
  if (!json_is_string(text)) {
    fprintf(stderr, MD_PROGRAM " tokenize: <stdin>:%zu: %s\n", number,
            !json_is_object(row) ? "not a JSON object"
            : text               ? "\"text\" is not a string"
                                 : "no \"text\" field");
    json_decref(row);
    return MD_EXIT_INPUT;
  }
  md_error err = {0};
  md_tokens_clear(t);
  md_status st =
      md_tokenizer_encode(tok, json_string_value(text), json_string_length(text), t, &err);
  int code = -1;
  if (st != MD_OK) {
    fprintf(stderr, MD_PROGRAM " tokenize: <stdin>:%zu: %s\n", number, err.message);
    code = st == MD_E_NOMEM ? MD_EXIT_FAILURE : MD_EXIT_INPUT;
  } else {
    json_t *out = result(tok, opt, json_object_get(row, "id"), t);
    if (json_dumpf(out, stdout, JSON_PRESERVE_ORDER) != 0 || fputc('\n', stdout) == EOF)
      code = MD_EXIT_FAILURE;
    json_decref(out);
  }
  json_decref(row);
  return code;
}

static int run(const md_tokenizer *tok, const options *opt) {
  char *line = NULL;
  size_t cap = 0, number = 0;
  ssize_t len;
  md_tokens t = {0};
  int code = -1;
  while (code < 0 && (len = getline(&line, &cap, stdin)) != -1) {
    number++;
    if (!blank(line, (size_t)len)) code = process_line(tok, opt, line, (size_t)len, number, &t);
  }
  free(line);
  md_tokens_free(&t);
  if (code < 0 && ferror(stdin)) {
    fprintf(stderr, MD_PROGRAM " tokenize: cannot read standard input\n");
    code = MD_EXIT_INPUT;
  }
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, MD_PROGRAM " tokenize: cannot write standard output\n");
    return MD_EXIT_FAILURE;
  }
  return code < 0 ? MD_EXIT_OK : code;
}

int md_cmd_tokenize(int argc, char **argv) {
  options opt;
  int code = parse_options(argc, argv, &opt);
  if (code >= 0) return code;
  md_tokenizer *tok = NULL;
  code = load(&opt, &tok);
  if (code >= 0) return code;
  code = run(tok, &opt);
  md_tokenizer_free(tok);
  return code;
}
