#!/usr/bin/env python3
"""Reference fixtures for the collect end-to-end tests (tests/collect), made
with HF tokenizers and HF transformers; CI only compares against them.

1. fixtures/tokenizer.json: a small Qwen2.5-style tokenizer, so that the
   random-weight checkpoints of tests/model/fixtures (vocabularies of 512 and
   600 ids) can be driven by real text. It is Qwen's byte-level BPE cut to
   its first MERGES merges: the 256 byte tokens (ids 0-255, as in Qwen), the
   results of merges 0..MERGES-1 (ids 256..255+MERGES, Qwen's own ids: merge
   r makes id 256 + r), and Qwen2.5's 22 added tokens (<|endoftext|>,
   <|im_start|>, <|im_end|>, ... <|file_sep|>) renumbered to follow. The
   normalizer, split regex and decoder are Qwen's, unchanged. BPE trained in
   merge order stays consistent when cut after any merge (every merge joins
   bytes or results of earlier merges).

2. For each run configuration in CONFIGS, fixtures/<config>/expected.json and
   one .attn.npy / .prefill.npy per episode of data/episodes.jsonl:
     - the token ids of each episode: the prompt rendered with Qwen2.5's chat
       template (transformers apply_chat_template, via
       tests/trace/make_fixtures.py) or the raw spans joined, tokenised by HF
       tokenizers with this tokenizer.json; the continuation tokenised on its
       own (teacher-forced) or decoded greedily by transformers (generate), or
       DEFAULT_STEPS greedy tokens when there is none; the window capped at
       max_steps;
     - for raw-form episodes, each token's region: that of the span holding
       its first byte (memdecay-traces(5));
     - each token's piece: its bytes (GPT-2 byte map inverted; added tokens
       their content; nothing for an id the tokenizer lacks) with every byte that does not belong to a complete
       UTF-8 character (and NUL) written as U+FFFD (memdecay-run(5));
     - attn [S, P+S]: at decode step t, HF's softmax weights
       (output_attentions=True, eager, float32) of the query at position P+t,
       mean or max over heads, then mean over the configuration's layers;
       zero beyond position P+t;
     - prefill [P]: HF's prompt attention summed over the prompt's query
       rows, mean over heads, mean over the layers.

Re-run from the source root (CPU; torch, transformers 5.x, tokenizers, numpy):
    python3 tests/collect/make_fixtures.py
The greedy steps' top-2 logit margins are checked to be far above float32
noise, so that our greedy choices must equal HF's.
"""
import json
import os
import sys

import numpy as np
import tokenizers
import torch
import transformers
from transformers import Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "trace"))
import make_fixtures as trace_fixtures  # noqa: E402  (render with the chat template)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fixture_versions  # noqa: E402  (tests/fixture_versions.py)

MERGES = 230
QWEN25_ADDED = 22  # Qwen2.5's added tokens: ids 151643..151664
DEFAULT_STEPS = 256
MIN_MARGIN = 2e-3

CONFIGS = [
    # name, checkpoint (tests/model/fixtures), layers [begin, end), heads, page size, max steps
    dict(name="theta-mean", checkpoint="theta1e4_f32", layers=(0, 3), heads="mean", page_size=16,
         max_steps=20),
    dict(name="qwen05-max", checkpoint="qwen05_heads_bf16", layers=(1, 2), heads="max", page_size=8,
         max_steps=20),
]


def tiny_tokenizer():
    with open(os.path.join(ROOT, "data", "tokenizer", "qwen", "tokenizer.json"), encoding="utf-8") as f:
        full = json.load(f)
    model = full["model"]
    keep = 256 + MERGES
    vocab = {piece: i for piece, i in model["vocab"].items() if i < keep}
    assert sorted(vocab.values()) == list(range(keep))
    merges = model["merges"][:MERGES]
    for rank, (a, b) in enumerate(merges):
        assert vocab[a + b] == 256 + rank, (a, b)
    added = [dict(t) for t in full["added_tokens"] if t["id"] < 151643 + QWEN25_ADDED]
    assert len(added) == QWEN25_ADDED
    for j, token in enumerate(added):
        token["id"] = keep + j
    tiny = dict(full)
    tiny["added_tokens"] = added
    tiny["model"] = dict(model, vocab=vocab, merges=merges)
    return tiny


def byte_decoder():
    """GPT-2's byte -> unicode map, inverted."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def readable(data):
    """Bytes as text, each byte outside a complete UTF-8 character (and NUL)
    as U+FFFD: the manifest's rule, applied byte by byte."""
    out, i = [], 0
    while i < len(data):
        for k in (1, 2, 3, 4):
            try:
                ch = data[i:i + k].decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(ch) == 1 and ch != "\0":
                out.append(ch)
                i += k
                break
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


def piece(tok_json, tok, token_id, decoder):
    added = {t["id"]: t["content"] for t in tok_json["added_tokens"]}
    if token_id in added:
        return added[token_id]
    s = tok.id_to_token(token_id)
    if s is None:  # a generated id of the model's padded vocabulary: no text
        return ""
    return readable(bytes(decoder[c] for c in s))


def raw_regions(episode, text, encoding):
    """Region of each token: the span holding its first byte."""
    ends, pos = [], 0
    for span in episode["spans"]:
        pos += len(span["text"].encode("utf-8"))
        ends.append((pos, span["region"]))
    regions = []
    for start_char, _ in encoding.offsets:
        start = len(text[:start_char].encode("utf-8"))
        regions.append(next(region for end, region in ends if start < end))
    return regions


def attention_reference(model, ids, prompt_len, steps, generate, cfg):
    """HF attention aggregated as the collector does; greedy tokens when
    `generate`. Returns (ids, attn [steps, P+steps], prefill [P], margins)."""
    begin, end = cfg["layers"]
    width = prompt_len + steps
    attn = np.zeros((steps, width), dtype=np.float64)
    ids = list(ids)
    margins = []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids[:prompt_len]]), use_cache=True, output_attentions=True)
        layers = torch.stack([a[0].double() for a in out.attentions[begin:end]])  # [L, H, P, P]
        prefill = layers.mean(dim=1).sum(dim=1).mean(dim=0).numpy()
        cache, logits = out.past_key_values, out.logits[0, -1]
        for t in range(steps):
            if generate:
                top = torch.topk(logits, 2).values
                margins.append(float(top[0] - top[1]))
                ids.append(int(torch.argmax(logits)))
            out = model(input_ids=torch.tensor([[ids[prompt_len + t]]]), past_key_values=cache,
                        use_cache=True, output_attentions=True)
            cache, logits = out.past_key_values, out.logits[0, -1]
            rows = torch.stack([a[0, :, 0, :].double() for a in out.attentions[begin:end]])  # [L, H, n]
            per_layer = rows.max(dim=1).values if cfg["heads"] == "max" else rows.mean(dim=1)
            attn[t, : prompt_len + t + 1] = per_layer.mean(dim=0).numpy()
    return ids, attn, prefill, margins


def episode_reference(episode, line, tok, tok_json, decoder, engine, model, cfg):
    text = trace_fixtures.render(engine[0], engine[1], episode)
    enc = tok.encode(text, add_special_tokens=False)
    prompt_ids = list(enc.ids)
    cont = episode.get("continuation")
    if cont and "text" in cont:
        forced = tok.encode(cont["text"], add_special_tokens=False).ids
        steps, generate, kind = min(len(forced), cfg["max_steps"]), False, "teacher-forced"
        ids = prompt_ids + forced[:steps]
    else:
        n = cont["generate"] if cont else DEFAULT_STEPS
        steps, generate, kind = min(n, cfg["max_steps"]), True, "generated"
        ids = prompt_ids
    region = (cont or {}).get("region", "scratchpad")
    ids, attn, prefill, margins = attention_reference(model, ids, len(prompt_ids), steps, generate, cfg)
    if margins:
        assert min(margins) > MIN_MARGIN, (episode["id"], min(margins))
    entry = {"id": episode["id"], "line": line, "prompt_tokens": len(prompt_ids),
             "decode_steps": steps, "continuation": kind, "region": region, "ids": ids,
             "regions": raw_regions(episode, text, enc) + [region] * steps if "spans" in episode else None,
             "pieces": [piece(tok_json, tok, i, decoder) for i in ids]}
    return entry, attn, prefill


def build(cfg, tok, tok_json, episodes):
    ckpt = os.path.join(ROOT, "tests", "model", "fixtures", cfg["checkpoint"])
    model = Qwen2ForCausalLM.from_pretrained(ckpt, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with open(os.path.join(ckpt, "config.json")) as f:
        config = json.load(f)
    out_dir = os.path.join(HERE, "fixtures", cfg["name"])
    os.makedirs(out_dir, exist_ok=True)
    engine, decoder = trace_fixtures.template_engine(), byte_decoder()
    entries = []
    for line, episode in episodes:
        entry, attn, prefill = episode_reference(episode, line, tok, tok_json, decoder, engine, model, cfg)
        np.save(os.path.join(out_dir, episode["id"] + ".attn.npy"), attn.astype(np.float32))
        np.save(os.path.join(out_dir, episode["id"] + ".prefill.npy"), prefill.astype(np.float32))
        entries.append(entry)
        print(f"{cfg['name']}: {episode['id']}: P={entry['prompt_tokens']} S={entry['decode_steps']}")
    expected = {"checkpoint": cfg["checkpoint"], "layers": list(cfg["layers"]), "heads": cfg["heads"],
                "page_size": cfg["page_size"], "max_steps": cfg["max_steps"],
                "model": {"layers": config["num_hidden_layers"], "heads": config["num_attention_heads"],
                          "kv_heads": config["num_key_value_heads"], "hidden": config["hidden_size"],
                          "vocab": config["vocab_size"],
                          "max_position_embeddings": config["max_position_embeddings"]},
                "episodes": entries}
    with open(os.path.join(out_dir, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)
        f.write("\n")



def main():
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    tok_json = tiny_tokenizer()
    path = os.path.join(HERE, "fixtures", "tokenizer.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tok_json, f, ensure_ascii=False)
        f.write("\n")
    tok = tokenizers.Tokenizer.from_file(path)
    with open(os.path.join(HERE, "data", "episodes.jsonl"), encoding="utf-8") as f:
        episodes = [(n, json.loads(line)) for n, line in enumerate(f, 1) if line.strip()]
    for cfg in CONFIGS:
        build(cfg, tok, tok_json, episodes)
    fixture_versions.write_versions(os.path.join(HERE, "fixtures"), "tests/collect/make_fixtures.py", [torch, transformers, tokenizers, np])


if __name__ == "__main__":
    sys.exit(main())
