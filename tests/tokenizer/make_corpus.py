#!/usr/bin/env python3
"""Generates the tokenizer reference fixtures from the HF `tokenizers` package.

    python3 tests/tokenizer/make_corpus.py          (from the source root)

Writes, under tests/tokenizer/fixtures/:

  qwen_corpus.jsonl   >= 2,000 deterministic strings (agent text, JSON, code, numbers, many
                      scripts, emoji, text NFC changes, whitespace, contractions, special and
                      partial special tokens, long words, the empty string) with the ids the
                      reference gives for data/tokenizer/qwen/tokenizer.json.
  small_tokenizer.json  a small byte-level BPE (the first 2,000 Qwen ids and the merges among
                      them, merges in the legacy "a b" string form) whose added tokens use every
                      matching option: lstrip, rstrip, single_word, normalized, special, a
                      token whose content is a vocabulary entry, overlapping contents.
  small_corpus.jsonl  strings that exercise those options, with the reference ids.
  gpt2_tokenizer.json the small tokenizer with other pipeline parts: a Sequence normalizer,
                      a literal Split ("\n\n") before a ByteLevel pre-tokenizer that splits
                      with its own GPT-2 regex (use_regex=true).
  gpt2_corpus.jsonl   a part of the Qwen corpus and the small corpus, with its reference ids.

Every line is {"text", "ids", "offsets", "decoded"}: `ids` from
Tokenizer.encode(text, add_special_tokens=False); `offsets` the reference's token offsets,
converted from code points to UTF-8 byte offsets and flattened [start0, end0, start1, ...];
`decoded` is Tokenizer.decode(ids, skip_special_tokens=False) for vocabulary tokens and the
(normalized) content for added tokens (see decode_reference).

The strings only use characters assigned in Unicode 14 (the tables of the PCRE2 that the C
tokenizer uses on Debian 12); see collector/tokenizer/tokenizer.h for why newer characters can differ.
Re-running the script gives byte-identical files (fixed seeds, sorted choices).
"""
import json
import os
import random
import sys
import unicodedata

import tokenizers
from tokenizers import Tokenizer
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fixture_versions  # noqa: E402  (tests/fixture_versions.py)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
QWEN = os.path.join(ROOT, "data", "tokenizer", "qwen", "tokenizer.json")
OUT = os.path.join(ROOT, "tests", "tokenizer", "fixtures")

# ---------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------
WORDS = ("the of and to in is you that it he was for on are as with his they I at be this have "
         "from or one had by word but not what all were we when your can said there use an each "
         "which she do how their if will up other about out many then them these so some her "
         "would make like him into time has look two more write go see number no way could "
         "people my than first water been call who oil its now find long down day did get come "
         "made may part agent tool memory cache token region decay attention budget eviction "
         "scratchpad retrieval plan system user assistant flight hotel Lisbon Tokyo Nairobi "
         "invoice refund database query schema latency throughput kernel tensor").split()
NAMES = ["Alice", "Bob", "Chloé", "Đorđe", "Søren", "Zoë", "Jürgen", "Małgorzata", "José",
         "Nguyễn", "O'Brien", "D'Angelo", "McDonald", "van der Berg", "Ólafur"]
CITIES = ["Lisbon", "São Paulo", "Zürich", "Kraków", "Reykjavík", "Montréal", "Düsseldorf",
          "Tōkyō", "Beijing", "Cairo", "Mumbai", "New York", "Los Angeles"]
TOOLS = ["search_flights", "get_weather", "read_file", "run_sql", "send_email", "browse",
         "calculator", "python_exec", "vector_search", "book_hotel"]

CJK_ZH = ["你好，世界！", "我们今天学习分词。", "机器学习模型需要大量的数据。", "请帮我预订明天去上海的机票。",
          "注意力机制是Transformer的核心。", "这是一个测试：（括号）、“引号”和《书名》。", "北京时间2024年3月15日"]
CJK_JA = ["こんにちは、世界！", "東京タワーは高い。", "カタカナとひらがなと漢字。", "ｶﾀｶﾅ半角もあります。",
          "今日は２０２４年です。", "ラーメンを食べたい！"]
CJK_KO = ["안녕하세요, 세계!", "한국어 형태소 분석기는 어렵습니다.", "서울특별시 강남구", "ㄱㄴㄷ ㅏㅑㅓ"]
OTHER_SCRIPTS = [
    "مرحبا بالعالم، كيف حالك؟", "اللُّغَةُ العَرَبِيَّةُ جميلة", "٠١٢٣٤٥٦٧٨٩ أرقام",
    "שלום עולם! עִבְרִית", "नमस्ते दुनिया। क़ानून ज़रूरी है।", "हिन्दी में संख्या १२३४५",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง", "Привет, мир! Ёжик в тумане.", "Γειά σου Κόσμε! ΑΒΓΔ αβγδ",
    "வணக்கம் உலகம்", "ওহে বিশ্ব", "Xin chào thế giới! Tiếng Việt có dấu.", "Բարեւ աշխարհ",
    "გამარჯობა მსოფლიო", "ሰላም ልዑል", "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ", "ꯃꯤꯇꯩ ꯃꯌꯦꯛ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝟙𝟚𝟛",
    "Ⅻ Ⅳ ⅷ ① ② ⑩ ½ ¾ ²³", "Ⓐⓑⓒ 🄰🄱", "ﬁ ﬂ ﬆ ﬀ ß ẞ ǅ ǈ", "ÅÅ ΩΩ Kelvin:K",
]
EMOJI = ["🙂", "👍", "👍🏽", "👍🏿", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🧑‍🤝‍🧑", "🏳️‍🌈", "🇫🇷", "🇯🇵", "1️⃣", "#️⃣",
         "❤️", "❤", "☺️", "🤖", "🚀", "🔥", "✅", "❌", "⚠️", "💯", "🫠", "🥲", "👋🏻", "🤷‍♀️", "🧜🏾‍♂️"]
# Text that NFC changes (decomposed letters, singletons, reordering, Hangul jamo, exclusions).
NFC_CASES = [
    "cafe\u0301", "nai\u0308ve", "A\u030a", "\u212b", "\u2126", "\u212a", "e\u0301\u0301",
    "a\u0315\u0300\u05ae", "a\u0300\u0315", "x\u0344y", "\u0f73", "\u0f71\u0f72",
    "Vie\u0323\u0302t Nam", "\u1100\u1161\u11a8", "\u1100\u1161 \u11a8", "\uac00\u11a8",
    "\u0958\u093c", "\u0915\u093c", "o\u0308\u0304", "\u00f6\u0304", "\u0041\u0323\u0302",
    "\u1e9b\u0323", "\u0b47\u0b3e", "\u0b47\u0b57", "\u0dd9\u0dcf\u0dca", "s\u0323\u0307",
    "\u0301start", "q\u0307\u0323", "\u2000\u2001", "\u2329\u232a", "\uf900\uf9d0",
    "\U0001d15e\U0001d160", "\u0340\u0341", "\u0374\u037e\u0387", "\u1f71\u1fbb",
]
# Marks and compositions newer than Unicode 9.0, which the reference's NFC tables (9.0) do not
# know, next to marks it does know; and long runs of marks (the reordering of a long run).
NEWER_MARKS = ["\u07fd", "\u0898", "\u08ca", "\u09fe", "\u0c3c", "\u0d3b", "\u0eba", "\u1715",
               "\u1abf", "\u1ac5", "\u1df6", "\ua82c", "\U00010d24", "\U00010eab", "\U00010efd",
               "\U00010f46", "\U00011070", "\U0001133b", "\U00011938", "\U00011935\U00011930",
               "\U00016ff0", "\U0001e08f", "\U0001e130", "\U0001e4ec"]
KNOWN_MARKS = ["\u0301", "\u0316", "\u0334", "\u0327", "\u0308", "\u05b0", "\u093c", "\u094d",
               "\u0e38", "\u302a", "\u3099"]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
            "</tool_call>", "<tool_response>", "</tool_response>", "<|fim_prefix|>",
            "<|fim_middle|>", "<|fim_suffix|>", "<|file_sep|>", "<|repo_name|>",
            "<|vision_start|>", "<|image_pad|>", "<|box_end|>"]
PARTIALS = ["<|im_start", "<|im_end|x", "<|im_end|", "im_end|>", "<||im_end|>", "<<|im_end|>>",
            "<|IM_END|>", "< |im_end|>", "<|im_end |>", "<think", "</think", "<thinking>",
            "<tool_call", "</tool_call >", "<|endoftext||>", "<|endof", "|>", "<|", "<|>"]
WS = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", "\r\r\n", " \n", "  \n",
      "\t\n", " \t ", "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\u180e", "\x0b", "\x0c",
      "\x1c", "\u200b", "\u2009", "\u202f", "\ufeff", "\n \n", " \r\n "]
CONTRACTIONS = ["don't", "DON'T", "Don'T", "I'm", "I'M", "i'M", "we'll", "We'LL", "they've",
                "THEY'VE", "she'd", "SHE'D", "it's", "IT'S", "It'S", "you're", "YOU'RE",
                "'s", "'S", "''s", "'''", "it'ſ", "it’s", "rock'n'roll", "'tis", "y'all",
                "o'clock", "ma'am", "'re'", "'ll've", "I'd've", "x'D", "'M'", "l'homme"]


def rand_word(rng):
    return rng.choice(WORDS)


def sentence(rng, n=None):
    n = n or rng.randint(3, 14)
    words = [rand_word(rng) for _ in range(n)]
    if rng.random() < 0.5:
        words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice([".", "!", "?", "", "...", ":", ";"])


# ---------------------------------------------------------------------------------------------
# Generators, one per kind of text
# ---------------------------------------------------------------------------------------------
def gen_agent(rng):
    tool = rng.choice(TOOLS)
    args = {"city": rng.choice(CITIES), "date": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "limit": rng.randint(1, 50)}
    parts = [
        f"Thought: I need to call {tool} to answer {rng.choice(NAMES)}'s question.",
        f"Action: {tool}\nAction Input: {json.dumps(args)}",
        f"Observation: {sentence(rng)}",
        f"Step {rng.randint(1, 9)}. {sentence(rng)}",
        f"- [ ] {sentence(rng)}\n- [x] {sentence(rng)}",
        f"**Plan**: {sentence(rng)}\n1. {sentence(rng)}\n2. {sentence(rng)}",
        f"User: {sentence(rng)}\nAssistant: {sentence(rng)}",
        f"See https://example.com/{rand_word(rng)}/{rng.randint(1, 99999)}?q={rand_word(rng)}&lang=en#top",
        f"Email {rng.choice(NAMES).lower()}@example.org or call +1 (555) {rng.randint(100, 999)}-{rng.randint(1000, 9999)}.",
        f"File: /home/{rand_word(rng)}/src/{rand_word(rng)}_{rand_word(rng)}.py:{rng.randint(1, 999)}",
        f"> {sentence(rng)}\n>> {sentence(rng)}",
        f"| {rand_word(rng)} | {rng.randint(0, 999)} |\n|---|---|\n| {rand_word(rng)} | {rng.random():.3f} |",
    ]
    k = rng.randint(1, 4)
    sep = rng.choice(["\n", "\n\n", " ", "\r\n"])
    return sep.join(rng.sample(parts, k))


def rand_json_value(rng, depth):
    r = rng.random()
    if depth <= 0 or r < 0.3:
        return rng.choice([
            sentence(rng), rng.randint(-10**6, 10**6), rng.random() * 10**rng.randint(-5, 8),
            True, False, None, "say \"hi\"", "back\\slash", "tab\there", "line\nbreak",
            "quote's", rng.choice(CJK_ZH), rng.choice(EMOJI), "{\"nested\": \"json\"}",
            "\u0000nul", "ctrl\x01\x1f", "</script>", "a/b/c",
        ])
    if r < 0.65:
        return [rand_json_value(rng, depth - 1) for _ in range(rng.randint(0, 4))]
    return {rand_word(rng) + rng.choice(["", "_id", "Name", "-x", " key"]): rand_json_value(rng, depth - 1)
            for _ in range(rng.randint(0, 4))}


def gen_json(rng):
    value = rand_json_value(rng, rng.randint(1, 4))
    style = rng.randint(0, 3)
    if style == 0:
        return json.dumps(value)
    if style == 1:
        return json.dumps(value, ensure_ascii=False)
    if style == 2:
        return json.dumps(value, indent=rng.choice([2, 4]), ensure_ascii=False)
    return json.dumps(json.dumps(value))  # a JSON string holding JSON: nested escapes


CODE = [
    "def {f}(x, y=2):\n    \"\"\"{doc}\"\"\"\n    if x > y:\n        return x ** 2  # square\n    return [i for i in range(y)]\n",
    "int {f}(const char *s, size_t n) {{\n\tfor (size_t i = 0; i < n; i++) {{\n\t\tif (s[i] == '\\n') return (int)i;\n\t}}\n\treturn -1;\n}}\n",
    "const {f} = async (url) => {{\n  const res = await fetch(`${{url}}/api?x=${{1+2}}`);\n  return res.ok ? res.json() : null; // {doc}\n}};",
    "fn {f}<'a>(v: &'a [u32]) -> Option<&'a u32> {{\n    v.iter().max_by_key(|&&x| x % 7)\n}}\n",
    "SELECT u.id, COUNT(*) AS n\nFROM users u JOIN orders o ON o.user_id = u.id\nWHERE o.created_at >= '2024-01-01'\nGROUP BY u.id HAVING n > 3;",
    "#!/bin/sh\nset -eu\nfor f in *.txt; do\n  grep -c '{doc}' \"$f\" || echo \"no match in $f\" >&2\ndone\n",
    "<div class=\"{f}\">\n  <p>{doc} &amp; more&nbsp;text</p>\n  <!-- comment -->\n</div>",
    "package main\n\nimport \"fmt\"\n\nfunc {f}() {{\n\tfmt.Printf(\"%d %s\\n\", 42, \"{doc}\")\n}}\n",
    "    @property\n    def {f}(self) -> dict[str, int]:\n        return {{k: v for k, v in self._d.items() if v}}\n",
    "x = {{'a': 1, \"b\": [1, 2.5e-3, -7], 'c': None}}\nprint(f\"{{x!r:>10}}\")\n",
    "\\begin{{equation}}\n  E = mc^2 \\quad \\forall x \\in \\mathbb{{R}}\n\\end{{equation}}",
    "diff --git a/{f}.c b/{f}.c\n@@ -1,3 +1,4 @@\n-int x;\n+int x = 0;\n+/* {doc} */\n",
]


def gen_code(rng):
    return rng.choice(CODE).format(f=rand_word(rng) + "_" + rand_word(rng), doc=sentence(rng))


def gen_numbers(rng):
    items = [
        f"{rng.randint(0, 10**9)}", f"{rng.randint(0, 10**6):,}", f"{rng.uniform(-1e6, 1e6):.4f}",
        f"{rng.uniform(0, 1):.3e}", f"{rng.randint(1, 31)}/{rng.randint(1, 12)}/{rng.randint(1900, 2100)}",
        f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z",
        f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}", f"{rng.randint(0, 100)}%",
        f"${rng.uniform(0, 1e4):.2f}", f"€{rng.randint(1, 999)}", f"¥{rng.randint(1, 99999)}",
        f"0x{rng.randint(0, 2**32):08X}", f"{rng.randint(1, 9)}.{rng.randint(0, 9)}M", "3.14159",
        "1,000,000", "1e-10", "-0.0", "+42", "007", "½", "１２３", "٣٤٥", "१२३", "Ⅻ",
        f"{rng.randint(10, 99)}:{rng.randint(10, 59)}", f"#{rng.randint(1, 9999)}",
    ]
    return " ".join(rng.choice(items) for _ in range(rng.randint(1, 8)))


def gen_scripts(rng):
    pool = CJK_ZH + CJK_JA + CJK_KO + OTHER_SCRIPTS
    sep = rng.choice([" ", "", "\n", " - "])
    return sep.join(rng.choice(pool) for _ in range(rng.randint(1, 3)))


def gen_emoji(rng):
    out = []
    for _ in range(rng.randint(1, 8)):
        out.append(rng.choice(EMOJI) if rng.random() < 0.6 else rand_word(rng))
        out.append(rng.choice(["", " ", "  ", "\n"]))
    return "".join(out)


def gen_nfc(rng):
    out = []
    for _ in range(rng.randint(1, 5)):
        r = rng.random()
        if r < 0.5:
            out.append(rng.choice(NFC_CASES))
        elif r < 0.8:
            base = rng.choice("aeiouAEIOUnczsgkqwyx\u03b1\u0430\u05d0\u0915")
            marks = "".join(chr(rng.randint(0x300, 0x36f)) for _ in range(rng.randint(1, 4)))
            out.append(base + marks)
        else:
            out.append(rand_word(rng))
        out.append(rng.choice(["", " ", "\n"]))
    return "".join(out)


def gen_marks(rng):
    out = []
    for _ in range(rng.randint(1, 4)):
        base = rng.choice(["x", "a", "e", "\u0915", "\u05d0", "\uac00", "\u1100", "\u0627", " ", ""])
        marks = [rng.choice(NEWER_MARKS + KNOWN_MARKS) for _ in range(rng.randint(1, 5))]
        out.append(base + "".join(marks))
    if rng.random() < 0.1:
        out.append("a" + "".join(rng.choice(KNOWN_MARKS + NEWER_MARKS) for _ in range(rng.randint(33, 80))))
    if rng.random() < 0.2:
        out.append(rng.choice(["\u1100\u1161\u11a7", "\uac00\u11a7", "\uac01\u11a8", "\u1100\u1100\u1161",
                               "\u1112\u1175\u11c2\u11c2"]))
    return rng.choice(["", " ", "\n"]).join(out)


def gen_whitespace(rng):
    out = []
    for _ in range(rng.randint(1, 10)):
        out.append(rng.choice(WS) * rng.randint(1, 3))
        if rng.random() < 0.7:
            out.append(rng.choice([rand_word(rng), "x", "1", ".", "é", "你", "🙂", "'s"]))
    return "".join(out)


def gen_contractions(rng):
    out = [rng.choice(CONTRACTIONS) for _ in range(rng.randint(1, 6))]
    return rng.choice([" ", "", "\n", ", "]).join(out)


def gen_specials(rng):
    out = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.35:
            out.append(rng.choice(SPECIALS))
        elif r < 0.6:
            out.append(rng.choice(PARTIALS))
        elif r < 0.8:
            out.append(rng.choice(WS))
        else:
            out.append(rng.choice([sentence(rng), "\u0301", "x", "\n", "user\n", "assistant\n"]))
    return "".join(out)


def gen_chatml(rng):
    turns = []
    for role in rng.sample(["system", "user", "assistant", "tool", "user"], rng.randint(1, 4)):
        body = rng.choice([sentence(rng), gen_json(rng), gen_code(rng), gen_scripts(rng), gen_agent(rng)])
        if role == "assistant" and rng.random() < 0.4:
            body = f"<think>\n{sentence(rng)}\n</think>\n\n{body}"
        if role == "assistant" and rng.random() < 0.3:
            body += f"\n<tool_call>\n{json.dumps({'name': rng.choice(TOOLS), 'arguments': {'q': rand_word(rng)}})}\n</tool_call>"
        if role == "tool":
            role, body = "user", f"<tool_response>\n{body}\n</tool_response>"
        turns.append(f"<|im_start|>{role}\n{body}<|im_end|>\n")
    if rng.random() < 0.5:
        turns.append("<|im_start|>assistant\n")
    return "".join(turns)


def gen_long(rng):
    kind = rng.randint(0, 7)
    n = rng.randint(200, 3000)
    if kind == 0:
        return "a" * n
    if kind == 1:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
    if kind == 2:
        return "".join(rng.choice("0123456789") for _ in range(n))
    if kind == 3:
        return rng.choice(EMOJI) * (n // 10)
    if kind == 4:
        return rng.choice([" ", "\n", "\t", " \n"]) * n
    if kind == 5:
        return rng.choice("!-=*#.~") * n
    if kind == 6:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        return "data:image/png;base64," + "".join(rng.choice(alphabet) for _ in range(n)) + "=="
    return "".join(rng.choice(CJK_ZH)[:-1] for _ in range(n // 20))


def unicode14_pool():
    """Assigned, non-surrogate, non-private characters of a few hundred blocks (Unicode 14)."""
    pool = []
    for cp in list(range(0x20, 0x3000, 3)) + list(range(0x3000, 0xA000, 37)) + \
            list(range(0xA000, 0x10000, 11)) + list(range(0x10000, 0x20000, 97)):
        ch = chr(cp)
        if unicodedata.category(ch) in ("Cn", "Cs", "Co"):
            continue
        pool.append(ch)
    return pool


def gen_soup(rng, pool):
    return "".join(rng.choice(pool) for _ in range(rng.randint(1, 40)))


def gen_mixed(rng, pool):
    gens = [gen_agent, gen_json, gen_code, gen_numbers, gen_scripts, gen_emoji, gen_nfc,
            gen_whitespace, gen_contractions, gen_specials]
    parts = [rng.choice(gens)(rng) for _ in range(rng.randint(2, 4))]
    if rng.random() < 0.3:
        parts.append(gen_soup(rng, pool))
    return rng.choice(["", " ", "\n"]).join(parts)


def fixed_cases():
    """Hand-picked edge cases, one string each."""
    cases = ["", " ", "  ", "\n", "\r", "\r\n", "\t", "a", "A", "0", "'", "''", "'s", " 's",
             "\u0000", "\u0000a\u0000", "\x7f", "\u0301", " \u0301", "\ufeffBOM", "\U0010fffd",
             "\U0001F600" * 3, "x\u200dy", "a\u180eb", "a \u180e b", "a\u0085b", "a\u2028b",
             "end with space ", "end with spaces   ", "trailing  \nnext", "trailing \t\r\nx",
             "lone\rcr", "\r\r\r", "\n\n\n\n", " \n \n ", "a   b    c", "  leading", "x\n\n  y"]
    cases += [chr(b) for b in range(0x20, 0x7f)]
    cases += [chr(b) + "x" for b in range(0x00, 0x20)]
    cases += ["x" + s for s in SPECIALS] + [s + "x" for s in SPECIALS]
    cases += [" " + s + " " for s in SPECIALS] + ["\n" + s + "\n" for s in SPECIALS]
    cases += PARTIALS + NFC_CASES + EMOJI + CONTRACTIONS + OTHER_SCRIPTS
    cases += ["<|im_end|>\u0301", "e<|im_end|>\u0301", "<|im_start|><|im_end|>",
              "<|im_start|>" * 3, "<|im_start|>user\n\n<|im_end|>", "<<|im_start|>|im_end|>>",
              "<|endoftext|><|endoftext|>x", "<think></think>", "<think>\n\n</think>\n\n",
              "<tool_call></tool_call>", "<|im_start|>" + "a" * 100 + "<|im_end|>"]
    return cases


def qwen_corpus():
    rng = random.Random(20240615)
    pool = unicode14_pool()
    texts = fixed_cases()
    kinds = [gen_agent, gen_json, gen_code, gen_numbers, gen_scripts, gen_emoji, gen_nfc,
             gen_marks, gen_whitespace, gen_contractions, gen_specials, gen_chatml]
    for _ in range(12):
        for gen in kinds:
            for _ in range(15):
                texts.append(gen(rng))
    for _ in range(25):
        texts.append(gen_long(rng))
    for _ in range(150):
        texts.append(gen_soup(rng, pool))
    for _ in range(100):
        texts.append(gen_mixed(rng, pool))
    return texts


# ---------------------------------------------------------------------------------------------
# The small tokenizer with every added-token option
# ---------------------------------------------------------------------------------------------
SMALL_VOCAB = 2000
SMALL_ADDED = [
    # content, special, normalized, lstrip, rstrip, single_word
    ("<|im_start|>", True, False, False, False, False),
    ("<|im_end|>", True, False, False, False, False),
    ("[L]", False, False, True, False, False),
    ("[R]", False, False, False, True, False),
    ("[LR]", True, False, True, True, False),
    ("cat", False, False, False, False, True),
    ("[SW]", False, False, True, True, True),
    ("cafe\u0301", False, True, False, False, False),   # normalized: matches NFC text "café"
    ("<n>", False, True, False, True, False),
    ("<a>", False, False, False, False, False),
    ("<a><b>", False, False, False, False, False),     # leftmost-longest against "<a>"
    (" [W]", False, False, False, False, False),       # starts with a space (overlap with [R])
    ("Ġthe", False, False, False, False, False),       # the vocabulary's own entry: keeps its id
    ("x y", False, True, True, False, True),
]


def small_tokenizer(qwen):
    vocab = {k: v for k, v in qwen["model"]["vocab"].items() if v < SMALL_VOCAB}
    merges = []
    for a, b in qwen["model"]["merges"]:
        if a in vocab and b in vocab and (a + b) in vocab:
            merges.append(f"{a} {b}")
    assert len(merges) == SMALL_VOCAB - 256, len(merges)
    added = []
    next_id = SMALL_VOCAB
    for content, special, normalized, lstrip, rstrip, single_word in SMALL_ADDED:
        if content in vocab:
            tid = vocab[content]
        else:
            tid, next_id = next_id, next_id + 1
        added.append({"id": tid, "content": content, "single_word": single_word,
                      "lstrip": lstrip, "rstrip": rstrip, "normalized": normalized,
                      "special": special})
    tok = dict(qwen)
    tok["added_tokens"] = added
    tok["model"] = dict(qwen["model"], vocab=vocab, merges=merges)
    return tok


def small_corpus():
    rng = random.Random(7)
    texts = ["", "[L]", "a [L]", "a  \t[L]b", "\n[L]", "[L][L]", " [L] [L] ", "[R]", "[R] a",
             "[R]  \n x", "[R][R]", "[LR]", " [LR] ", "x  [LR]  y", "[L] [R] [LR]", "cat", "a cat",
             "concat", "cats", "cat_", "_cat", "cat1", "1cat", "cat.", ".cat", "écat", "caté",
             "cat\u0301", "\u0301cat", "Ⓐcat", "cat\u200d", "\u200ccat", "catcat", "cat cat",
             "[SW]", "a[SW]b", "a [SW] b", "é [SW]", "[SW]cat", "café", "cafe\u0301", "cafe\u0301 ",
             "xcafé", "<n>", "<n>   x", "a<n>\n\nb", "<a>", "<a><b>", "<a><b", "<a><a><b>",
             "[R] [W]", "[R]  [W]", "[R] [W] [W]", "the", " the", "Ġthe", "aĠthe", "x y", "ax y",
             "a x y b", "x  y", "<|im_start|>user\nhi<|im_end|>\n", "<|im_start|>[L]  [R] cat",
             "\u00a0[L]\u3000[R]\u2028", "\u180e[L]", "[R]\u180e", "[R]\u0085x"]
    parts = ["[L]", "[R]", "[LR]", "cat", "[SW]", "café", "cafe\u0301", "<n>", "<a>", "<a><b>",
             " [W]", "the", " the", "x y", "<|im_start|>", "<|im_end|>", " ", "  ", "\n", "\t",
             "a", "b1", "_", "é", "你", "🙂", "\u0301", "ÀB", "'s"]
    for _ in range(300):
        texts.append("".join(rng.choice(parts) for _ in range(rng.randint(1, 8))))
    return texts


def gpt2_tokenizer(small):
    tok = dict(small)
    tok["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
    tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": "\n\n"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    return tok


# ---------------------------------------------------------------------------------------------
def added_content(tok):
    """id -> the text an added token stands for: its content, NFC-normalized when the token is
    matched on normalized text. Tokens whose id is a vocabulary entry decode as that entry."""
    config = json.loads(tok.to_str())
    vocab = config["model"]["vocab"]
    out = {}
    for entry in config["added_tokens"]:
        if entry["content"] in vocab:
            continue
        content = entry["content"]
        if entry["normalized"]:
            content = unicodedata.normalize("NFC", content)
        out[entry["id"]] = content
    return out


def decode_reference(tok, added, ids):
    """The reference decoding: runs of vocabulary tokens through Tokenizer.decode, added tokens
    as their content. (Tokenizer.decode alone also pushes added-token content through the
    ByteLevel decoder, which turns "café" into "caf\ufffd"; the C tokenizer keeps the content.)"""
    out, run = [], []
    for tid in ids + [None]:
        if tid is None or tid in added:
            if run:
                out.append(tok.decode(run, skip_special_tokens=False))
                run = []
            if tid is not None:
                out.append(added[tid])
        else:
            run.append(tid)
    return "".join(out)


def encode_all(tok, texts):
    added = added_content(tok)
    lines = []
    for text in texts:
        enc = tok.encode(text, add_special_tokens=False)
        byte_at = [0]
        for ch in text:
            byte_at.append(byte_at[-1] + len(ch.encode("utf-8")))
        offsets = []
        for start, end in enc.offsets:
            offsets += [byte_at[start], byte_at[end]]
        decoded = decode_reference(tok, added, enc.ids)
        lines.append(json.dumps({"text": text, "ids": enc.ids, "offsets": offsets, "decoded": decoded},
                                ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(path, ROOT)}", file=sys.stderr)



def main():
    os.makedirs(OUT, exist_ok=True)
    qwen_tok = Tokenizer.from_file(QWEN)
    texts = qwen_corpus()
    assert len(texts) >= 2000, len(texts)
    write(os.path.join(OUT, "qwen_corpus.jsonl"), encode_all(qwen_tok, texts))
    # Qwen's added tokens are printable ASCII, which the ByteLevel decoder leaves alone.
    for line in open(os.path.join(OUT, "qwen_corpus.jsonl"), encoding="utf-8"):
        row = json.loads(line)
        assert row["decoded"] == qwen_tok.decode(row["ids"], skip_special_tokens=False)

    with open(QWEN, encoding="utf-8") as f:
        qwen = json.load(f)
    small = small_tokenizer(qwen)
    small_path = os.path.join(OUT, "small_tokenizer.json")
    write(small_path, json.dumps(small, ensure_ascii=False, indent=1) + "\n")
    small_tok = Tokenizer.from_file(small_path)
    for entry in small["added_tokens"]:
        assert small_tok.token_to_id(entry["content"]) == entry["id"], entry
    write(os.path.join(OUT, "small_corpus.jsonl"), encode_all(small_tok, small_corpus()))

    gpt2_path = os.path.join(OUT, "gpt2_tokenizer.json")
    write(gpt2_path, json.dumps(gpt2_tokenizer(small), ensure_ascii=False, indent=1) + "\n")
    gpt2_tok = Tokenizer.from_file(gpt2_path)
    write(os.path.join(OUT, "gpt2_corpus.jsonl"), encode_all(gpt2_tok, texts[::5] + small_corpus()))
    fixture_versions.write_versions(OUT, "tests/tokenizer/make_corpus.py", [tokenizers])


if __name__ == "__main__":
    main()
