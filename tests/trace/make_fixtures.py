#!/usr/bin/env python3
"""Regenerates the reference fixtures of tests/trace from independent
implementations (CI never runs this; it only compares against its output).

- data/render-expected.jsonl: every episode of data/render-episodes.jsonl
  rendered by HF transformers' apply_chat_template(tokenize=False,
  add_generation_prompt=True) with Qwen2.5-Instruct's chat template
  (qwen2.5-chat-template.jinja); raw-form episodes are their spans joined.
- data/tojson-cases.jsonl: JSON texts and Python's json.dumps(json.loads(text),
  ensure_ascii=False) of them, which is what transformers' tojson filter
  writes; reals include seeded random doubles over the whole range.
- data/shipped-prompts.jsonl: for each episode of data/traces/*.jsonl, the
  byte length and FNV-1a 64-bit hash of its prompt rendered the same way.

Needs: transformers (5.x) and tokenizers from PyPI. Run from anywhere:
    python3 tests/trace/make_fixtures.py
"""
import glob
import json
import os
import random
import struct

import tokenizers
import transformers
from transformers import PreTrainedTokenizerFast
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fixture_versions  # noqa: E402  (tests/fixture_versions.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "data")


def template_engine():
    """A tokenizer object only to reach apply_chat_template; its vocabulary
    plays no part in rendering text."""
    vocab = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    tok = PreTrainedTokenizerFast(tokenizer_object=vocab)
    with open(os.path.join(HERE, "qwen2.5-chat-template.jinja"), encoding="utf-8") as f:
        return tok, f.read()


def hf_messages(episode):
    """Our trace messages as the HF chat format: segment texts joined into
    one content string, tool calls in the OpenAI form with arguments as an
    object (a string is parsed first, as serving stacks do)."""
    out = []
    for m in episode["messages"]:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(seg["text"] for seg in content)
        msg = {"role": m["role"], "content": content}
        calls = []
        for call in m.get("tool_calls") or []:
            body = call.get("function", call)
            args = body["arguments"]
            if isinstance(args, str):
                args = json.loads(args)
            calls.append({"type": "function", "function": {"name": body["name"], "arguments": args}})
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)
    return out


def render(tok, template, episode):
    if "spans" in episode:
        return "".join(span["text"] for span in episode["spans"])
    return tok.apply_chat_template(hf_messages(episode), tools=episode.get("tools") or None,
                                   chat_template=template, tokenize=False,
                                   add_generation_prompt=True)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def render_fixtures(tok, template):
    episodes = read_jsonl(os.path.join(DATA, "render-episodes.jsonl"))
    rows = [{"id": e["id"], "prompt": render(tok, template, e)} for e in episodes]
    write_jsonl(os.path.join(DATA, "render-expected.jsonl"), rows)
    print(f"render-expected.jsonl: {len(rows)} episodes")


def random_doubles(rng, count):
    """Finite doubles from random bit patterns (every exponent), plus
    short decimals and powers of two, where repr's rules have corners."""
    values = []
    while len(values) < count:
        x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if x == x and abs(x) != float("inf"):
            values.append(x)
    values += [rng.randint(-10**6, 10**6) / 10**rng.randint(0, 8) for _ in range(count)]
    values += [2.0**e for e in range(-1074, 1024, 7)]
    return values


def tojson_fixtures():
    texts = ['{}', '[]', '{"a": {}, "b": []}', '"plain"', '"quote \\" backslash \\\\ slash /"',
             '"tab\\tnl\\ncr\\rbs\\bff\\f"', '"\\u0001\\u001f\\u007f"',
             '"été 你好 🙂 e\\u0301 \\u2028"', '"<tag> & \'apos\'"', 'true', 'false', 'null', '0', '-0',
             '-0.0', '12', '-9223372036854775808', '9223372036854775807', '1.0', '1.5', '0.1',
             '1e16', '1e15', '1E5', '1e-5', '0.0001', '0.00001', '123456789.0', '5e-324',
             '2.2250738585072014e-308', '1.7976931348623157e308', '9007199254740993',
             '9007199254740992.0', '0.30000000000000004', '100', '1e22', '1e21',
             '{"z": 1, "a": [1, 2.5, {"k": null}], "m": "x"}']
    rng = random.Random(20250512)
    for x in random_doubles(rng, 300):
        texts += [repr(x), "%.17e" % x]  # the shortest form and a long one of the same double
    rows = []
    for text in texts:
        value = json.loads(text)
        rows.append({"input": text, "expected": json.dumps(value, ensure_ascii=False)})
    write_jsonl(os.path.join(DATA, "tojson-cases.jsonl"), rows)
    print(f"tojson-cases.jsonl: {len(rows)} cases")


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def shipped_fixtures(tok, template):
    rows = []
    for path in sorted(glob.glob(os.path.join(ROOT, "data", "traces", "*.jsonl"))):
        name = os.path.relpath(path, ROOT)
        for episode in read_jsonl(path):
            prompt = render(tok, template, episode).encode("utf-8")
            rows.append({"file": name, "id": episode["id"], "length": len(prompt),
                         "fnv1a64": f"{fnv1a64(prompt):016x}"})
    write_jsonl(os.path.join(DATA, "shipped-prompts.jsonl"), rows)
    print(f"shipped-prompts.jsonl: {len(rows)} episodes")



def main():
    tok, template = template_engine()
    render_fixtures(tok, template)
    tojson_fixtures()
    shipped_fixtures(tok, template)
    fixture_versions.write_versions(os.path.join(HERE, "data"), "tests/trace/make_fixtures.py", [transformers, tokenizers])


if __name__ == "__main__":
    main()
