#!/usr/bin/env python3
"""Trains qwen2-tiny, the small Qwen2ForCausalLM checkpoint that ships in
data/models/ for the default run of memdecay-calibrate and for CI, and (with
options) its larger siblings such as qwen2-small.

    python3 data/models/train_tiny_qwen2.py            # from the source root

writes data/models/qwen2-tiny/ (config.json, generation_config.json,
model.safetensors, tokenizer.json, tokenizer_config.json). Needs torch (CPU),
transformers 5.x, tokenizers and safetensors; data/models/README.md states
the recipe, the time it takes and the losses it reached, and the command
lines of the other checkpoints (--hidden, --layers, --heads, --kv-heads,
--intermediate, --corpus, --epochs, --steps, --lr, --answer-weight,
--drill-steps, --copy-drills, --code-steps, --out; without options the
script makes qwen2-tiny as committed). --work DIR keeps the generated
corpus and the state after the copying phase, and reuses them on the next
run; it also keeps the two-phase export (DIR/two-phase, for --from).
--measure-only measures an existing checkpoint (--out) without training.

1. Tokenizer: Qwen2.5's, derived from the Qwen3 files in data/tokenizer/qwen/
   (same byte-level BPE; Qwen2.5's added tokens stop at id 151664, so the four
   Qwen3 adds, 151665-151668, are removed) with Qwen2.5-Instruct's ChatML
   chat template (tests/trace/qwen2.5-chat-template.jinja).
2. Corpus: synthetic agent episodes from data/traces/generate.py with seeds
   other than those of the shipped traces (450, 1700), which are held out.
   Each episode is rendered with the chat template by transformers
   (apply_chat_template, add_generation_prompt=True), tokenised, followed by
   its continuation tokenised on its own (as the collector feeds it) and
   <|im_end|>; the model learns next-token prediction on whole episodes.
3. Model: trained on a compact vocabulary (the ids that occur in the corpus
   and in the shipped traces, in id order), then its embedding rows are
   scattered into the full 151,936-row matrix; every other row is exactly
   zero, so the unused part of the file compresses to nothing.
   An unused id then gets logit 0. The training loss is the cross-entropy of
   the full-vocabulary model, i.e. the softmax also holds (151936 - compact)
   logits fixed at 0, so training pushes the logits of real next tokens far
   above 0 and greedy decoding does not pick an unused id.
   Training runs in two phases. First a copying phase (drill_curriculum):
   short synthetic sequences that state facts ("The cost centre is
   CC-7863.", a JSON field, ...; keys are the corpus's probe key phrases,
   values drawn like the probes' answers) and ask for some of them, a
   single fact per sequence at first and one more allowed every
   --drill-grow steps (a model trained on the corpus alone, or on many-fact
   drills from the start, did not learn to copy a value out of its
   context; data/models/README.md has the runs). Then the corpus, with drills mixed in
   (--copy-drills), the answer tokens weighted (--answer-weight) and the
   attention-entropy term. Then, from that model as exported (BF16), a
   code phase (code_curriculum): drills whose values are mostly in the
   random-character forms of the tool results (locators, pickup codes,
   event ids), whose BPE pieces are a long tail the corpus barely holds,
   with corpus batches spread between them and the embedding's rate a
   multiple of the rest's (--code-steps, --code-share, --code-lr,
   --code-corpus, --code-embedding-scale; --from DIR starts it from a
   two-phase export in DIR instead of training the first two phases). The log reports
   held-out drills and held-out agent-450 probe answers (teacher forced)
   every 100 steps.
4. Export in BF16, like the published Qwen2.5 checkpoints, with config.json
   in their published form; then the held-out losses are measured on the
   exported files with transformers.
5. Probe accuracy by greedy decoding on the shipped tiers (probe_accuracy):
   per episode the prompt and continuation, then per probe (each from that
   same state) "<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n
   <|im_start|>assistant\n" and greedy decoding until <|im_end|> or 32 new
   tokens; right when the normalised answer occurs as whole words in the
   normalised output (NFKC, lower case, runs of non-alphanumerics to one
   space). A per-region table is logged.

Deterministic: fixed seeds, torch.use_deterministic_algorithms(True), a fixed
thread count (--threads, default 2). The same package versions and CPU give
the same files; another CPU's BLAS kernels may round differently.
"""
import argparse
import copy
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import unicodedata

import torch
import transformers
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from transformers import AttentionInterface, AttentionMaskInterface, AutoTokenizer, Qwen2Config, Qwen2ForCausalLM
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
QWEN3_TOKENIZER = os.path.join(ROOT, "data", "tokenizer", "qwen")
CHAT_TEMPLATE = os.path.join(ROOT, "tests", "trace", "qwen2.5-chat-template.jinja")
GENERATOR = os.path.join(ROOT, "data", "traces", "generate.py")
HELD_OUT = [os.path.join(ROOT, "data", "traces", name) for name in ("agent-450.jsonl", "agent-1700.jsonl")]

# Qwen2.5's vocabulary: 151,643 BPE entries, added tokens 151643-151664, the
# embedding padded to 151,936 rows (the published checkpoints' vocab_size).
VOCAB_SIZE = 151936
QWEN3_ONLY_TOKENS = {151665: "<tool_response>", 151666: "</tool_response>", 151667: "<think>",
                     151668: "</think>"}
ENDOFTEXT, IM_END = 151643, 151645

ARCHITECTURE = dict(hidden_size=64, intermediate_size=192, num_hidden_layers=4, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=4096, rms_norm_eps=1e-6,
                    rope_theta=1e6, hidden_act="silu", tie_word_embeddings=True, initializer_range=0.02)

# (--context, --episodes, --seed) of data/traces/generate.py: the training
# corpus (the shipped traces use seeds 450 and 1700).
CORPORA = [(450, 2500, 7), (1700, 700, 8)]

TRAIN = dict(seed=1234, epochs=2, batch_tokens=6144, lr=4e-3, min_lr=4e-4, warmup=30,
             weight_decay=0.1, grad_clip=1.0, betas=(0.9, 0.95), log_every=10, eval_every=100,
             entropy_weight=0.5, entropy_rows=64, steps=None, answer_weight=5.0, copy_drills=2000,
             drill_steps=3000, drill_batch=32, drill_grow=150, drill_facts=16, held_drills=200,
             code_steps=1000, code_share=0.75, code_lr=1e-3, code_corpus=500, code_embedding_scale=3.0)


# ---- tokenizer ------------------------------------------------------------------

def qwen25_tokenizer_json():
    """Qwen3's tokenizer.json with the four added tokens Qwen2.5 lacks cut out
    of the text; everything else byte for byte as in the source file."""
    with open(os.path.join(QWEN3_TOKENIZER, "tokenizer.json"), encoding="utf-8") as f:
        text = f.read()
    spec = json.loads(text)
    begin = text.index(',\n    {\n      "id": 151665,')
    end = text.index('\n  ],\n  "normalizer"', begin)
    derived = text[:begin] + text[end:]
    expected = dict(spec, added_tokens=[t for t in spec["added_tokens"] if t["id"] not in QWEN3_ONLY_TOKENS])
    removed = {t["id"]: t["content"] for t in spec["added_tokens"] if t["id"] in QWEN3_ONLY_TOKENS}
    assert removed == QWEN3_ONLY_TOKENS and json.loads(derived) == expected
    assert expected["added_tokens"][-1]["id"] == 151664
    return derived


def qwen25_tokenizer_config():
    """Qwen2.5-Instruct's tokenizer_config.json: Qwen3's without the four
    added tokens, with the Qwen2.5 ChatML template (eos <|im_end|>, pad
    <|endoftext|>, no bos, as in Qwen3's file)."""
    with open(os.path.join(QWEN3_TOKENIZER, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(CHAT_TEMPLATE, encoding="utf-8") as f:
        config["chat_template"] = f.read()
    config["added_tokens_decoder"] = {k: v for k, v in config["added_tokens_decoder"].items()
                                      if int(k) not in QWEN3_ONLY_TOKENS}
    assert config["eos_token"] == "<|im_end|>" and config["pad_token"] == "<|endoftext|>"
    assert config["bos_token"] is None
    return json.dumps(config, indent=2, ensure_ascii=False)


def write_text(path, text):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def write_tokenizer(out):
    write_text(os.path.join(out, "tokenizer.json"), qwen25_tokenizer_json())
    write_text(os.path.join(out, "tokenizer_config.json"), qwen25_tokenizer_config())


# ---- corpus -----------------------------------------------------------------------

def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def hf_messages(episode):
    """A trace episode (memdecay-traces(5)) as HF chat messages: segment texts
    joined, tool calls in the OpenAI form (as tests/trace/make_fixtures.py)."""
    messages = []
    for m in episode["messages"]:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(seg["text"] for seg in content)
        message = {"role": m["role"], "content": content}
        calls = [{"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                 for c in m.get("tool_calls") or []]
        if calls:
            message["tool_calls"] = calls
        messages.append(message)
    return messages


class Encoder:
    """Renders with the checkpoint's chat template (transformers) and
    tokenises with its tokenizer.json (HF tokenizers)."""

    def __init__(self, model_dir):
        self.template = AutoTokenizer.from_pretrained(model_dir)
        self.tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))

    def prompt(self, episode):
        return self.template.apply_chat_template(hf_messages(episode), tokenize=False,
                                                 add_generation_prompt=True)

    def encode(self, text):
        return self.tokenizer.encode(text, add_special_tokens=False)

    def episode(self, episode):
        """(prompt ids, continuation ids)."""
        return (self.encode(self.prompt(episode)).ids,
                self.encode(episode["continuation"]["text"]).ids)


def make_corpora(work):
    paths = []
    for context, episodes, seed in CORPORA:
        path = os.path.join(work, f"train-{context}-seed{seed}-{episodes}.jsonl")
        if not os.path.exists(path):
            subprocess.run([sys.executable, GENERATOR, "--context", str(context), "--episodes",
                            str(episodes), "--seed", str(seed), "--out", path, "--quiet"], check=True)
        paths.append(path)
    return paths


def answer_as_in_context(answer, context):
    """The answer as the model would copy it: with the space before it
    when the context writes it after a space (running text: " Jonas Chen",
    whose first token is "ĠJonas"), without one when it follows other
    characters (a JSON value after a quote: "KAGQUH"). The answer occurs
    once in the episode (data/traces/generate.py checks it); scoring
    normalises spaces away, so either form is right."""
    at = context.find(answer)
    return " " + answer if at > 0 and context[at - 1] == " " else answer


def encode_file(encoder, path, seed):
    """Training sequences of a traces file: the prompt, the continuation
    (tokenised on its own, as the collector feeds it), <|im_end|>, then the
    episode's probes as question/answer turns in a random order, in ChatML
    (what the chat template writes for plain user and assistant messages).
    Each item: {"ids", "continuation": (begin, end), "answers": [(begin, end)]}
    with token index ranges."""
    rng = random.Random(seed)
    items = []
    for episode in read_jsonl(path):
        prompt, continuation = encoder.episode(episode)
        ids = prompt + continuation
        item = {"continuation": (len(prompt), len(ids)), "answers": []}
        ids += encoder.encode("<|im_end|>\n").ids
        probes = list(episode["probes"])
        rng.shuffle(probes)
        text = "<|im_end|>\n"
        context = encoder.prompt(episode)
        for probe in probes:
            question = f"<|im_start|>user\n{probe['question']}<|im_end|>\n<|im_start|>assistant\n"
            ids += encoder.encode(question).ids
            said = answer_as_in_context(probe["answer"], context)
            answer = encoder.encode(said).ids
            item["answers"].append((len(ids), len(ids) + len(answer)))
            ids += answer + encoder.encode("<|im_end|>\n").ids
            text += question + said + "<|im_end|>\n"
        # Added tokens split the text first, so the pieces tokenise as the whole does.
        assert ids[len(prompt) + len(continuation):] == encoder.encode(text).ids
        item["ids"] = ids
        items.append(item)
    return items


# ---- copy drills ------------------------------------------------------------------

DRILL_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"


def drill_value(rng):
    """A value of one of the forms the probes' answers take (codes, numbers,
    dates, names), drawn uniformly."""
    kind = rng.randrange(6)
    if kind == 0:
        return "".join(rng.choice(DRILL_LETTERS) for _ in range(2)) + f"-{rng.randint(1000, 99999)}"
    if kind == 1:
        return str(rng.randint(100, 999999))
    if kind == 2:
        return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == 3:
        return "".join(rng.choice(DRILL_LETTERS + "23456789") for _ in range(6))
    if kind == 4:
        if os.path.dirname(GENERATOR) not in sys.path:
            sys.path.insert(0, os.path.dirname(GENERATOR))
        import domains  # the generator's name lists
        return f"{rng.choice(domains.FIRST_NAMES)} {rng.choice(domains.LAST_NAMES)}"
    return f"{rng.randint(10, 999)} EUR"


# How a drill states a fact and asks for it: the forms the episodes use (a
# key phrase, then within a few words its value; running text or a JSON
# field) and questions that repeat the key phrase. A JSON value follows a
# quote, so its answer is copied without the space before it (as
# answer_as_in_context does for the episodes).
DRILL_FACTS = ["The {k} is {v}.", "Note the {k} of {v}.", "{K}: {v}.", '"{k}": "{v}",', "Use {k} {v} here.",
               "The {k} was set to {v}."]
DRILL_QUESTIONS = ["What is the {k}?", "Which {k} was given?", "What {k} does the text state?",
                   "Tell me the {k}.", "What {k} did the agent use?"]


def copy_drill(encoder, keys, rng, most, value=drill_value):
    """One short sequence that teaches looking a value up by its key phrase
    and copying it: a system message of 1 to `most` facts (keys from the
    corpus's probe key phrases, each once, values drawn, forms from
    DRILL_FACTS), then questions about up to 4 of them with their answers,
    in the ChatML of the episodes' probes. The item has the episodes' form
    (no continuation). `value` draws the values (drill_value)."""
    chosen = rng.sample(keys, rng.randint(max(1, most // 2), most))
    facts = [(key, value(rng), rng.choice(DRILL_FACTS)) for key in chosen]
    context = "<|im_start|>system\n" + " ".join(
        form.format(k=k, K=k[:1].upper() + k[1:], v=v) for k, v, form in facts) + "<|im_end|>\n"
    ids = encoder.encode(context).ids
    item = {"continuation": (len(ids), len(ids)), "answers": []}
    for key, value, form in rng.sample(facts, min(4, len(facts))):
        question = rng.choice(DRILL_QUESTIONS).format(k=key)
        ids += encoder.encode(f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n").ids
        answer = encoder.encode(value if form.startswith('"') else " " + value).ids
        item["answers"].append((len(ids), len(ids) + len(answer)))
        ids += answer + encoder.encode("<|im_end|>\n").ids
    item["ids"] = ids
    return item


def copy_drills(encoder, keys, count, seed, most=24):
    """`count` drills of up to `most` facts each."""
    rng = random.Random(seed)
    keys = sorted(keys)
    return [copy_drill(encoder, keys, rng, min(most, len(keys))) for _ in range(count)]


def drill_curriculum(encoder, keys, steps, per_step, grow, seed, most=16):
    """The copying phase that precedes the corpus: `steps` batches of
    `per_step` drills, the first ones of a single fact (the answer is the
    only value in the context: the model learns to copy), one more fact
    allowed every `grow` steps up to `most` (it learns to look the value up
    by its key). Without the single-fact start the look-up is not learned
    (data/models/README.md)."""
    rng = random.Random(seed)
    keys = sorted(keys)
    return [[copy_drill(encoder, keys, rng, min(most, 1 + step // grow)) for _ in range(per_step)]
            for step in range(steps)]


# ---- the code phase ---------------------------------------------------------------

# The random-character forms of the generator's tool results
# (data/traces/domains.py): booking locators (letters(): 6 of CODE_UPPER),
# pickup codes (3 of CODE_UPPER, a hyphen, 4 digits) and calendar event ids
# ("evt_" and 6 of CODE_LOWER).
CODE_UPPER = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LOWER = "abcdefghijkmnopqrstuvwxyz23456789"


def code_value(rng):
    """A value in one of the random-character forms (an event id half the
    time: its lower-case pieces are the longest tail, 2,567 distinct pieces
    in 20,000 draws against 990 for the locators and 746 for the pickup
    codes)."""
    kind = rng.randrange(4)
    if kind < 2:
        return "evt_" + "".join(rng.choice(CODE_LOWER) for _ in range(6))
    if kind == 2:
        return "".join(rng.choice(CODE_UPPER) for _ in range(6))
    return "".join(rng.choice(CODE_UPPER) for _ in range(3)) + f"-{rng.randint(1000, 9999)}"


def code_curriculum(encoder, keys, steps, per_step, share, seed, most=16):
    """The code phase's drills: `steps` batches of `per_step` drills of
    `most` // 2 to `most` facts whose values are code_value with
    probability `share`, drill_value otherwise.

    Why: a copied value comes out of the tied LM head, so a model can only
    copy the BPE pieces whose embedding rows training has made distinct.
    Random letters cut into a long tail of pieces ("evt_75ubhg" is evt, _,
    7, 5, ub, hg) that the corpus and the copying drills hold a few times
    or never; the two-phase model answered every tool_out probe it missed
    up to the first such piece (data/models/README.md)."""
    rng = random.Random(seed)
    keys = sorted(keys)

    def value(r):
        return code_value(r) if r.random() < share else drill_value(r)

    return [[copy_drill(encoder, keys, rng, min(most, len(keys)), value) for _ in range(per_step)]
            for _ in range(steps)]


def load_export(path, more_ids):
    """The model of an exported checkpoint (export's files) on a compact
    vocabulary: the ids whose embedding row is not zero, plus `more_ids`,
    whose rows start at zero (as in the export: their logits 0). Returns
    (model, vocab)."""
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads"):
        if config.get(key) != ARCHITECTURE[key]:
            raise SystemExit(f"{path}/config.json: {key} is {config.get(key)}, the architecture options say "
                             f"{ARCHITECTURE[key]}")
    weights = load_file(os.path.join(path, "model.safetensors"))
    full = weights.pop("model.embed_tokens.weight").to(torch.float32)
    vocab = sorted(set(torch.nonzero(full.abs().sum(1) > 0).flatten().tolist()) | set(more_ids))
    model = Qwen2ForCausalLM(qwen2_config(len(vocab), "sdpa_entropy"))
    state = {name: tensor.to(torch.float32) for name, tensor in weights.items()}
    state["model.embed_tokens.weight"] = full[torch.tensor(vocab, dtype=torch.long)]
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise SystemExit(f"{path}/model.safetensors: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model.train()
    return model, vocab


def code_phase(model, vocab_size, drill_batches, corpus_batches, held_out, held_answers, held_drills, log):
    """The code phase: the drill batches with the corpus batches spread
    evenly between them (so that what the corpus phase taught is kept: on
    drills alone the model lost most of the episodes' probes), a
    fresh AdamW, linear warm-up over `warmup` steps to code_lr, then a
    cosine to code_lr / 10."""
    unused = VOCAB_SIZE - vocab_size
    opt = optimizer(model, TRAIN["code_embedding_scale"])
    rng = random.Random(TRAIN["seed"] + 3)
    phases, placed = [], 0
    for k, batch in enumerate(drill_batches):
        phases.append(("drills", batch))
        while placed < len(corpus_batches) and (placed + 1) * len(drill_batches) <= (k + 1) * len(corpus_batches):
            phases.append(("corpus", corpus_batches[placed]))
            placed += 1
    total = len(phases)
    peak = TRAIN["code_lr"]
    log(f"code phase: {len(drill_batches)} drill batches ({sum(len(b) for b in drill_batches)} drills), "
        f"{len(corpus_batches)} corpus batches between them; compact vocabulary "
        f"{vocab_size}")

    def held_line(step):
        _, drills_right, drills_asked = evaluate(model, held_drills[0], unused, 8192, held_drills[1])
        loss_held, right, asked = evaluate(model, held_out, unused, 8192, held_answers)
        log(f"step {step:4d}  held-out code drills right (teacher forced) {drills_right}/{drills_asked}; "
            f"held-out agent-450: loss {loss_held:.4f}, probe answers right (teacher forced) {right}/{asked}")

    held_line(0)
    start, cpu_start, window = time.time(), time.process_time(), []
    for step, (phase, batch) in enumerate(phases):
        lr = learning_rate(step, total, peak=peak, floor=peak / 10)
        loss, _, entropy = train_step(model, opt, phase, batch, unused, rng, lr)
        window.append((loss.item(), entropy.item()))
        if (step + 1) % TRAIN["log_every"] == 0 or step + 1 == total:
            log(f"step {step + 1:4d}/{total} {phase:7s} loss {sum(w[0] for w in window) / len(window):.4f}  "
                f"lr {lr:.2e}  {time.time() - start:.0f} s (CPU {time.process_time() - cpu_start:.0f} s)")
            window = []
        if (step + 1) % TRAIN["eval_every"] == 0 or step + 1 == total:
            held_line(step + 1)
    return model


# ---- model ------------------------------------------------------------------------

def qwen2_config(vocab_size, attn):
    arch = dict(ARCHITECTURE)
    theta = arch.pop("rope_theta")
    config = Qwen2Config(vocab_size=vocab_size, rope_parameters={"rope_type": "default", "rope_theta": theta},
                         use_sliding_window=False, use_cache=False, bos_token_id=None,
                         eos_token_id=None, pad_token_id=None, **arch)
    config._attn_implementation = attn
    return config


def attention_with_entropy(module, query, key, value, attention_mask, **kwargs):
    """transformers' SDPA attention, plus (in training) the normalised entropy
    of the attention rows of the query positions in module.entropy_rows,
    kept in module.entropy [batch, heads, rows]: entropy / log(visible
    tokens), 1 for uniform attention, 0 for all weight on one token."""
    output = sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    rows = getattr(module, "entropy_rows", None)
    if module.training and rows is not None:
        keys = key.repeat_interleave(module.num_key_value_groups, dim=1)  # query head h uses KV head h // groups
        scores = query[:, :, rows] @ keys.transpose(-1, -2) * kwargs["scaling"]
        future = torch.arange(keys.shape[2])[None, :] > rows[:, None]
        log_p = torch.log_softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        entropy = -(log_p.exp() * log_p.masked_fill(future, 0.0)).sum(dim=-1)
        module.entropy = entropy / torch.log(rows.to(entropy.dtype) + 1.0)
    return output


AttentionInterface.register("sdpa_entropy", attention_with_entropy)
AttentionMaskInterface.register("sdpa_entropy", sdpa_mask)


def full_vocab_loss(model, inputs, targets, unused, weights=None):
    """Mean cross-entropy of the full-vocabulary model: the compact logits
    plus `unused` logits fixed at 0 (the zero rows of the exported
    embedding), which add log(unused) as one more logsumexp term.
    With `weights` (per target position), also the weighted mean, which is
    then the training objective: (loss, count, weighted loss)."""
    hidden = model.model(input_ids=inputs, use_cache=False).last_hidden_state
    logits = hidden @ model.model.embed_tokens.weight.t()
    zeros = torch.full(logits.shape[:-1] + (1,), math.log(unused), dtype=logits.dtype)
    log_norm = torch.logsumexp(torch.cat([logits, zeros], dim=-1), dim=-1)
    mask = targets >= 0
    picked = logits.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    if weights is None:
        return ((log_norm - picked) * mask).sum() / mask.sum(), int(mask.sum())
    nll = (log_norm - picked) * mask
    weights = weights * mask
    return nll.sum() / mask.sum(), int(mask.sum()), (nll * weights).sum() / weights.sum()


def set_entropy_rows(model, rows):
    for layer in model.model.layers:
        layer.self_attn.entropy_rows = rows


def mean_entropy(model, rows, targets):
    """Mean normalised attention entropy over layers, heads and the sampled
    rows that are real tokens of their sequence (not padding)."""
    valid = (targets[:, rows] >= 0).to(torch.float32)  # [batch, rows]
    per_layer = torch.stack([layer.self_attn.entropy for layer in model.model.layers])  # [L, B, H, R]
    return (per_layer.mean(dim=2) * valid).sum() / (valid.sum() * per_layer.shape[0])


def make_batches(lengths, budget, rng):
    """Episodes of similar length together (padded size <= budget tokens),
    in random order."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    order.sort(key=lambda i: lengths[i])  # stable: equal lengths stay shuffled
    batches, current = [], []
    for i in order:
        longest = max([lengths[j] for j in current] + [lengths[i]])
        if current and longest * (len(current) + 1) > budget:
            batches.append(current)
            current = []
        current.append(i)
    batches.append(current)
    rng.shuffle(batches)
    return batches


def answer_weights(answers, width, weight):
    """Per target position: `weight` where the target is a probe answer token
    (answer ranges are token index ranges; position p predicts token p + 1),
    1 elsewhere."""
    weights = torch.ones((len(answers), width), dtype=torch.float32)
    for row, ranges in enumerate(answers):
        for begin, end in ranges:
            weights[row, begin - 1:end - 1] = weight
    return weights


def collate(sequences, pad):
    """Inputs and next-token targets, right-padded; targets -1 where there is
    none. No attention mask is needed: causal attention never lets a real
    token see the padding after it."""
    width = max(len(s) for s in sequences) - 1
    inputs = torch.full((len(sequences), width), pad, dtype=torch.long)
    targets = torch.full((len(sequences), width), -1, dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids = torch.tensor(seq, dtype=torch.long)
        inputs[row, :len(seq) - 1] = ids[:-1]
        targets[row, :len(seq) - 1] = ids[1:]
    return inputs, targets


def learning_rate(step, total, constant=0, peak=None, floor=None):
    """Linear warm-up to `peak` (lr), then the peak rate for the first
    `constant` steps (the copying phase), then a cosine to `floor` (min_lr)
    at `total`."""
    peak = TRAIN["lr"] if peak is None else peak
    floor = TRAIN["min_lr"] if floor is None else floor
    if step < TRAIN["warmup"]:
        return peak * (step + 1) / TRAIN["warmup"]
    start = max(TRAIN["warmup"], constant)
    if step < start:
        return peak
    progress = (step - start) / max(1, total - start)
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * progress))


def optimizer(model, embedding_scale=None):
    """AdamW, weight decay on the matrices other than the embedding. With
    `embedding_scale`, the embedding is a group of its own whose rate is
    that many times the schedule's (train_step reads lr_scale)."""
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed_tokens" not in n]
    if embedding_scale is None:
        other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed_tokens" not in n)]
        groups = [{"params": other, "weight_decay": 0.0}]
    else:
        other = [p for n, p in model.named_parameters() if p.dim() != 2]
        embedding = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed_tokens" in n]
        groups = [{"params": other, "weight_decay": 0.0},
                  {"params": embedding, "weight_decay": 0.0, "lr_scale": embedding_scale}]
    return torch.optim.AdamW([{"params": decay, "weight_decay": TRAIN["weight_decay"]}] + groups,
                             lr=TRAIN["lr"], betas=TRAIN["betas"], eps=1e-8)


@torch.no_grad()
def evaluate(model, sequences, unused, budget, answers):
    """Held-out mean loss, and the probe answers the model gets right in
    every token under teacher forcing (argmax over the compact vocabulary,
    which is the full model's argmax since the unused logits are 0 and a
    real next token's logit is far above)."""
    model.eval()
    total, count, right, asked = 0.0, 0, 0, 0
    for batch in make_batches([len(s) for s in sequences], budget, random.Random(0)):
        inputs, targets = collate([sequences[i] for i in batch], 0)
        loss, n = full_vocab_loss(model, inputs, targets, unused)
        total += float(loss) * n
        count += n
        hidden = model.model(input_ids=inputs, use_cache=False).last_hidden_state
        for row, i in enumerate(batch):
            for begin, end in answers[i]:
                logits = hidden[row, begin - 1:end - 1] @ model.model.embed_tokens.weight.t()
                right += int((logits.argmax(-1) == targets[row, begin - 1:end - 1]).all())
                asked += 1
    model.train()
    return total / count, right, asked


def copying_recipe(vocab_size, drill_batches):
    """Everything the state after the copying phase depends on: the
    architecture, the vocabulary size, the settings the phase reads and the
    drills themselves (a digest of their ids and answer spans, so that a
    change of the drills' forms is a new recipe)."""
    names = ("seed", "lr", "warmup", "weight_decay", "grad_clip", "betas", "answer_weight", "drill_steps",
             "drill_batch", "drill_grow", "drill_facts")
    drills = hashlib.sha256(json.dumps(drill_batches).encode()).hexdigest()
    return dict(ARCHITECTURE, vocab_size=vocab_size, drills=drills, **{name: TRAIN[name] for name in names})


def train_step(model, opt, phase, batch, unused, rng, lr):
    """One optimiser step on a batch of (ids, answer spans) at rate `lr`:
    the answer tokens weighted by answer_weight; for a corpus batch, plus
    entropy_weight x the attention entropy of entropy_rows rows drawn with
    `rng`. Returns (loss, target tokens, entropy)."""
    for group in opt.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
    inputs, targets = collate([ids for ids, _ in batch], 0)
    weights = answer_weights([spans for _, spans in batch], inputs.shape[1], TRAIN["answer_weight"])
    if phase == "corpus":
        rows = torch.tensor(sorted(rng.sample(range(1, inputs.shape[1]), TRAIN["entropy_rows"])))
        set_entropy_rows(model, rows)
    else:
        set_entropy_rows(model, None)
    loss, n, objective = full_vocab_loss(model, inputs, targets, unused, weights)
    entropy = mean_entropy(model, rows, targets) if phase == "corpus" else torch.zeros(())
    opt.zero_grad(set_to_none=True)
    (objective + TRAIN["entropy_weight"] * entropy).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), TRAIN["grad_clip"])
    opt.step()
    return loss, n, entropy


def train(sequences, held_out, vocab_size, log, answers, held_answers, drill_batches=(), held_drills=None,
          work=None):
    """The copying phase (drill_batches: batches of (ids, answers), no
    entropy term), then the corpus (sequences) with the entropy term; the
    answer tokens weighted by answer_weight in both. With `work` (a
    folder), the state after the copying phase is saved there under a name
    derived from copying_recipe, or, when that file exists, loaded from it
    instead of running that phase again (the same result: nothing in the
    corpus phase depends on how it was reached)."""
    unused = VOCAB_SIZE - vocab_size
    torch.manual_seed(TRAIN["seed"])
    model = Qwen2ForCausalLM(qwen2_config(vocab_size, "sdpa_entropy"))
    model.train()
    opt = optimizer(model)
    rng = random.Random(TRAIN["seed"])
    lengths = [len(s) for s in sequences]
    plan = [b for _ in range(TRAIN["epochs"]) for b in make_batches(lengths, TRAIN["batch_tokens"], rng)]
    if TRAIN["steps"] is not None:
        plan = plan[:TRAIN["steps"]]
    phases = [("drills", list(batch)) for batch in drill_batches]
    phases += [("corpus", [(sequences[i], answers[i]) for i in batch]) for batch in plan]
    total, constant = len(phases), len(drill_batches)
    log(f"training: {len(drill_batches)} copying steps ({sum(len(b) for b in drill_batches)} drills, "
        f"{sum(len(ids) for b in drill_batches for ids, _ in b)} tokens), then {len(sequences)} sequences, "
        f"{sum(lengths)} tokens, {len(plan)} steps; compact vocabulary {vocab_size}, "
        f"{sum(p.numel() for p in model.parameters())} parameters")

    def held_line(step):
        parts = []
        if held_drills:
            _, right, asked = evaluate(model, held_drills[0], unused, 8192, held_drills[1])
            parts.append(f"held-out drills right (teacher forced) {right}/{asked}")
        if step > constant:
            loss_held, right, asked = evaluate(model, held_out, unused, 8192, held_answers)
            parts.append(f"held-out agent-450: loss {loss_held:.4f}, probe answers right (teacher forced) "
                         f"{right}/{asked}")
        log(f"step {step:4d}  " + "; ".join(parts))

    start, cpu_start, seen, window = time.time(), time.process_time(), 0, []
    first, checkpoint, recipe = 0, None, copying_recipe(vocab_size, drill_batches)
    if work and constant:
        digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
        checkpoint = os.path.join(work, f"copying-phase-{digest}.pt")
    if checkpoint and os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        assert state["recipe"] == recipe, "checkpoint of another recipe"
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        first = constant
        log(f"copying phase loaded from {checkpoint}")
        held_line(constant)
    for step, (phase, batch) in enumerate(phases):
        if step < first:
            continue
        if step == constant:
            window = []  # the log's means are of one phase
        if checkpoint and step == constant and first == 0:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "recipe": recipe},
                       checkpoint + ".tmp")
            os.replace(checkpoint + ".tmp", checkpoint)
        loss, n, entropy = train_step(model, opt, phase, batch, unused, rng, learning_rate(step, total, constant))
        seen += n
        window.append((loss.item(), entropy.item()))
        if (step + 1) % TRAIN["log_every"] == 0 or step + 1 == total:
            log(f"step {step + 1:4d}/{total} {phase:7s} loss {sum(w[0] for w in window) / len(window):.4f}  "
                f"attention entropy {sum(w[1] for w in window) / len(window):.3f}  "
                f"lr {learning_rate(step, total, constant):.2e}  tokens {seen}  {time.time() - start:.0f} s "
                f"(CPU {time.process_time() - cpu_start:.0f} s)")
            window = []
        if (step + 1) % TRAIN["eval_every"] == 0 or step + 1 in (constant, total):
            held_line(step + 1)
    return model


# ---- export -----------------------------------------------------------------------

def published_config():
    """config.json as the published Qwen2.5 checkpoints spell it
    (transformers 4 style: top-level rope_theta and torch_dtype)."""
    arch = ARCHITECTURE
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": ENDOFTEXT,
        "eos_token_id": IM_END,
        "hidden_act": arch["hidden_act"],
        "hidden_size": arch["hidden_size"],
        "initializer_range": arch["initializer_range"],
        "intermediate_size": arch["intermediate_size"],
        "max_position_embeddings": arch["max_position_embeddings"],
        "max_window_layers": arch["num_hidden_layers"],
        "model_type": "qwen2",
        "num_attention_heads": arch["num_attention_heads"],
        "num_hidden_layers": arch["num_hidden_layers"],
        "num_key_value_heads": arch["num_key_value_heads"],
        "rms_norm_eps": arch["rms_norm_eps"],
        "rope_theta": arch["rope_theta"],
        "sliding_window": arch["max_position_embeddings"],
        "tie_word_embeddings": arch["tie_word_embeddings"],
        "torch_dtype": "bfloat16",
        "transformers_version": transformers.__version__,
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": VOCAB_SIZE,
    }


def generation_config():
    """Greedy decoding; stops at <|im_end|> or <|endoftext|> like Qwen2.5-Instruct."""
    return {"bos_token_id": ENDOFTEXT, "do_sample": False, "eos_token_id": [IM_END, ENDOFTEXT],
            "pad_token_id": ENDOFTEXT, "transformers_version": transformers.__version__}


def export(model, vocab, out):
    """BF16 weights with the compact embedding rows scattered into the full
    matrix (all other rows exactly zero); tied, so no lm_head.weight."""
    state = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight":
            continue
        if name == "model.embed_tokens.weight":
            full = torch.zeros(VOCAB_SIZE, tensor.shape[1], dtype=tensor.dtype)
            full[torch.tensor(vocab, dtype=torch.long)] = tensor
            tensor = full
        state[name] = tensor.to(torch.bfloat16).contiguous()
    save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    write_text(os.path.join(out, "config.json"), json.dumps(published_config(), indent=2) + "\n")
    write_text(os.path.join(out, "generation_config.json"), json.dumps(generation_config(), indent=2) + "\n")


@torch.no_grad()
def measure(out, named_sets, log):
    """The exported checkpoint as transformers loads it (BF16 weights,
    float32 compute), over the full vocabulary: mean loss of whole sequences
    and of the continuation tokens; probe answers under teacher forcing
    (tokens whose argmax is right, answers right in every token); and how
    often the argmax is an id outside the compact vocabulary (a zero row).
    The logits are the tied LM head, 256 positions at a time."""
    model = Qwen2ForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="sdpa")
    model.eval()
    head = model.get_output_embeddings().weight
    used = head.abs().sum(1) > 0
    results = {}
    for name, items in named_sets.items():
        nll_sum = cont_sum = 0.0
        count = cont_count = unused_argmax = answer_tokens = answer_hits = answers = answers_right = 0
        for item in items:
            ids = torch.tensor(item["ids"])
            hidden = model.model(input_ids=ids[None, :-1]).last_hidden_state[0]
            nll, argmax = [], []
            for chunk, target in zip(hidden.split(256), ids[1:].split(256)):
                logits = chunk @ head.t()
                nll.append(torch.nn.functional.cross_entropy(logits, target, reduction="none"))
                argmax.append(logits.argmax(-1))
            nll, argmax = torch.cat(nll), torch.cat(argmax)  # position p predicts token p + 1
            begin, end = item["continuation"]
            nll_sum += float(nll.sum())
            count += nll.numel()
            cont_sum += float(nll[begin - 1:end - 1].sum())
            cont_count += end - begin
            unused_argmax += int((~used[argmax]).sum())
            for begin, end in item["answers"]:
                hits = argmax[begin - 1:end - 1] == ids[begin:end]
                answer_tokens += end - begin
                answer_hits += int(hits.sum())
                answers += 1
                answers_right += int(hits.all())
        results[name] = dict(loss=nll_sum / count, tokens=count, continuation_loss=cont_sum / cont_count,
                             answer_token_accuracy=answer_hits / answer_tokens,
                             answers_right=answers_right, answers=answers, unused_argmax=unused_argmax)
        log(f"{name}: loss {nll_sum / count:.4f} ({count} tokens), continuation {cont_sum / cont_count:.4f} "
            f"({cont_count} tokens), probe answers {answers_right}/{answers} right "
            f"({100 * answer_hits / answer_tokens:.1f}% of their tokens), argmax on an unused id: {unused_argmax}")
    return results


def normalise(text):
    """NFKC, lower case, every run of characters that are not letters or
    digits as one space, trimmed."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join("".join(ch if ch.isalnum() else " " for ch in text).split())


@torch.no_grad()
def probe_accuracy(out, tiers, log, max_new_tokens=32):
    """Full-cache probe accuracy by greedy decoding on the exported files
    (transformers, BF16 weights, float32 compute): per episode the chat
    template's prompt and the continuation, then per probe, each from that
    same KV cache, "<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n
    <|im_start|>assistant\n" and greedy decoding until <|im_end|> or
    max_new_tokens; right when " normalised answer " occurs in " normalised
    output ". Logs a table (right / asked per region and tier), then each
    probe answered wrong with what the model said."""
    model = Qwen2ForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="sdpa")
    model.eval()
    encoder = Encoder(out)
    table, wrong = {}, []
    for name, path in tiers.items():
        counts = table[name] = {region: [0, 0] for region in REGIONS}
        for episode in read_jsonl(path):
            prompt, continuation = encoder.episode(episode)
            state = model(input_ids=torch.tensor([prompt + continuation]), use_cache=True).past_key_values
            for probe in episode["probes"]:
                cache = copy.deepcopy(state)
                text = f"<|im_end|>\n<|im_start|>user\n{probe['question']}<|im_end|>\n<|im_start|>assistant\n"
                step = torch.tensor([encoder.encode(text).ids])
                generated = []
                for _ in range(max_new_tokens):
                    result = model(input_ids=step, past_key_values=cache, use_cache=True)
                    cache = result.past_key_values
                    token = int(result.logits[0, -1].argmax())
                    if token == IM_END:
                        break
                    generated.append(token)
                    step = torch.tensor([[token]])
                output = encoder.tokenizer.decode(generated, skip_special_tokens=False)
                right = f" {normalise(probe['answer'])} " in f" {normalise(output)} "
                counts[probe["region"]][0] += int(right)
                if not right:
                    wrong.append(f"{name} {probe['region']}: {probe['question']} {probe['answer']!r}, "
                                 f"answered {output!r}")
                counts[probe["region"]][1] += 1
    names = list(tiers)
    log("probe accuracy (greedy, full cache): right/asked per region")
    log("| region | " + " | ".join(names) + " |")
    log("| --- |" + " --- |" * len(names))
    for region in REGIONS:
        log(f"| {region} | " + " | ".join(
            f"{table[n][region][0]}/{table[n][region][1]} ({100 * table[n][region][0] / max(1, table[n][region][1]):.0f}%)"
            for n in names) + " |")
    totals = {n: [sum(c[0] for c in table[n].values()), sum(c[1] for c in table[n].values())] for n in names}
    log("| all | " + " | ".join(f"{totals[n][0]}/{totals[n][1]} ({100 * totals[n][0] / totals[n][1]:.1f}%)"
                              for n in names) + " |")
    for line in wrong:
        log("wrong: " + line)
    return table


REGIONS = ("system", "plan", "user", "tool_in", "tool_out", "retrieval", "scratchpad")


def compact(index, items):
    """The items' token ids on a compact vocabulary (index: id -> row)."""
    return [[index[i] for i in item["ids"]] for item in items]


def compact_batch(index, items):
    """A training batch of the items: (compact ids, answer spans) each."""
    return list(zip(compact(index, items), (item["answers"] for item in items)))


def corpus_spec(text):
    context, episodes, seed = (int(x) for x in text.split(":"))
    return context, episodes, seed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(HERE, "qwen2-tiny"))
    parser.add_argument("--work", help="keep the generated corpus and the state after the copying phase "
                                       "here, and reuse them (default: a temporary folder)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--log", help="also write the log to this file")
    parser.add_argument("--hidden", type=int, default=ARCHITECTURE["hidden_size"])
    parser.add_argument("--layers", type=int, default=ARCHITECTURE["num_hidden_layers"])
    parser.add_argument("--heads", type=int, default=ARCHITECTURE["num_attention_heads"])
    parser.add_argument("--kv-heads", type=int, default=ARCHITECTURE["num_key_value_heads"])
    parser.add_argument("--intermediate", type=int, default=ARCHITECTURE["intermediate_size"])
    parser.add_argument("--corpus", type=corpus_spec, action="append",
                        help="CONTEXT:EPISODES:SEED of data/traces/generate.py, repeatable "
                             "(default 450:2500:7 and 1700:700:8)")
    parser.add_argument("--epochs", type=int, default=TRAIN["epochs"])
    parser.add_argument("--steps", type=int, help="stop after this many steps (the schedule ends there)")
    parser.add_argument("--batch-tokens", type=int, default=TRAIN["batch_tokens"])
    parser.add_argument("--lr", type=float, default=TRAIN["lr"])
    parser.add_argument("--min-lr", type=float, default=TRAIN["min_lr"])
    parser.add_argument("--warmup", type=int, default=TRAIN["warmup"])
    parser.add_argument("--answer-weight", type=float, default=TRAIN["answer_weight"],
                        help="loss weight of the probe answer tokens (others 1)")
    parser.add_argument("--entropy-weight", type=float, default=TRAIN["entropy_weight"],
                        help="weight of the attention-entropy term of the objective")
    parser.add_argument("--copy-drills", type=int, default=TRAIN["copy_drills"],
                        help="short look-up-and-copy sequences mixed into the corpus (copy_drills)")
    parser.add_argument("--drill-steps", type=int, default=TRAIN["drill_steps"],
                        help="steps of the copying phase before the corpus (drill_curriculum; 0: none)")
    parser.add_argument("--drill-batch", type=int, default=TRAIN["drill_batch"], help="drills per copying step")
    parser.add_argument("--drill-grow", type=int, default=TRAIN["drill_grow"],
                        help="copying steps per added fact")
    parser.add_argument("--drill-facts", type=int, default=TRAIN["drill_facts"],
                        help="most facts per drill in the copying phase")
    parser.add_argument("--code-steps", type=int, default=TRAIN["code_steps"],
                        help="drill batches of the code phase after the corpus (code_curriculum; 0: none)")
    parser.add_argument("--code-share", type=float, default=TRAIN["code_share"],
                        help="share of the code phase's drill values in the random-character forms")
    parser.add_argument("--code-lr", type=float, default=TRAIN["code_lr"], help="peak rate of the code phase")
    parser.add_argument("--code-embedding-scale", type=float, default=TRAIN["code_embedding_scale"],
                        help="the code phase's embedding rate over its schedule's")
    parser.add_argument("--code-corpus", type=int, default=TRAIN["code_corpus"],
                        help="corpus batches spread between the code phase's drill batches")
    parser.add_argument("--from", dest="start", metavar="DIR",
                        help="skip the copying and corpus phases: run the code phase from the checkpoint "
                             "they exported to DIR (the two-phase model)")
    parser.add_argument("--no-probes", action="store_true", help="skip the greedy probe measurement")
    parser.add_argument("--measure-only", action="store_true",
                        help="only measure the checkpoint in --out (writes nothing there)")
    args = parser.parse_args(argv)
    ARCHITECTURE.update(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.heads,
                        num_key_value_heads=args.kv_heads, intermediate_size=args.intermediate)
    TRAIN.update(epochs=args.epochs, steps=args.steps, batch_tokens=args.batch_tokens, lr=args.lr,
                 min_lr=args.min_lr, warmup=args.warmup, answer_weight=args.answer_weight,
                 copy_drills=args.copy_drills, entropy_weight=args.entropy_weight,
                 drill_steps=args.drill_steps, drill_batch=args.drill_batch, drill_grow=args.drill_grow,
                 drill_facts=args.drill_facts, code_steps=args.code_steps, code_share=args.code_share,
                 code_lr=args.code_lr, code_corpus=args.code_corpus,
                 code_embedding_scale=args.code_embedding_scale)
    if args.corpus:
        CORPORA[:] = args.corpus
    assert all(seed not in (450, 1700) for _, _, seed in CORPORA), "seeds 450 and 1700 are held out"

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    log_file = open(args.log, "w", encoding="utf-8") if args.log else None

    def log(line):
        print(line, flush=True)
        if log_file:
            log_file.write(line + "\n")
            log_file.flush()

    tiers = {os.path.basename(p)[:-len(".jsonl")]: p for p in HELD_OUT}
    if args.measure_only:
        probe_accuracy(args.out, tiers, log)
        return
    log("arguments: " + " ".join(sys.argv[1:] if argv is None else argv))
    os.makedirs(args.out, exist_ok=True)
    write_tokenizer(args.out)
    encoder = Encoder(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        begin = time.time()
        paths = make_corpora(work)
        corpora = [encode_file(encoder, path, seed) for path, (_, _, seed) in zip(paths, CORPORA)]
        held = [encode_file(encoder, path, 0) for path in HELD_OUT]
        keys = {key for path in paths for episode in read_jsonl(path)
                for key in episode["meta"]["probe_keys"].values()}
        if TRAIN["copy_drills"]:
            corpora.append(copy_drills(encoder, keys, TRAIN["copy_drills"], TRAIN["seed"], TRAIN["drill_facts"]))
        curriculum = [] if args.start else drill_curriculum(encoder, keys, TRAIN["drill_steps"], TRAIN["drill_batch"],
                                                            TRAIN["drill_grow"], TRAIN["seed"] + 1, TRAIN["drill_facts"])
        held_drills = copy_drills(encoder, keys, TRAIN["held_drills"], TRAIN["seed"] + 2, TRAIN["drill_facts"])
        code_drills = code_curriculum(encoder, keys, TRAIN["code_steps"], TRAIN["drill_batch"],
                                      TRAIN["code_share"], TRAIN["seed"] + 4, TRAIN["drill_facts"])
        held_code = code_curriculum(encoder, keys, 1, TRAIN["held_drills"], TRAIN["code_share"],
                                    TRAIN["seed"] + 5, TRAIN["drill_facts"])[0]
        log(f"corpus generated and tokenised in {time.time() - begin:.0f} s")
        begin, cpu_begin = time.time(), time.process_time()
        two_phase = args.start or os.path.join(work, "two-phase")
        episodes = [item for items in corpora[:len(CORPORA)] for item in items]
        held_answers = [item["answers"] for item in held[0]]
        if not args.start:
            train_items = [item for items in corpora for item in items]
            vocab = sorted({i for items in corpora + held + [held_drills] for item in items for i in item["ids"]}
                           | {i for batch in curriculum for item in batch for i in item["ids"]})
            index = {token: k for k, token in enumerate(vocab)}
            drill_batches = [compact_batch(index, batch) for batch in curriculum]
            compact_drills = (compact(index, held_drills), [item["answers"] for item in held_drills])
            model = train(compact(index, train_items), compact(index, held[0]), len(vocab), log,
                          [item["answers"] for item in train_items], held_answers, drill_batches,
                          compact_drills, args.work)
            if TRAIN["code_steps"]:
                os.makedirs(two_phase, exist_ok=True)
            export(model, vocab, two_phase if TRAIN["code_steps"] else args.out)
        if TRAIN["code_steps"]:
            # The code phase starts from the two-phase model as exported (BF16), so
            # that --from on those files gives what one run from the start gives.
            more = {i for batch in code_drills for item in batch for i in item["ids"]} | {
                i for item in held_code for i in item["ids"]}
            model, vocab = load_export(two_phase, more)
            index = {token: k for k, token in enumerate(vocab)}
            plan = make_batches([len(item["ids"]) for item in episodes], TRAIN["batch_tokens"],
                                random.Random(TRAIN["seed"] + 6))[:TRAIN["code_corpus"]]
            model = code_phase(
                model, len(vocab),
                [compact_batch(index, batch) for batch in code_drills],
                [compact_batch(index, [episodes[j] for j in batch]) for batch in plan],
                compact(index, held[0]), held_answers,
                (compact(index, held_code), [item["answers"] for item in held_code]), log)
            export(model, vocab, args.out)
    log(f"training took {time.time() - begin:.0f} s (CPU time {time.process_time() - cpu_begin:.0f} s "
        f"on {args.threads} threads)")
    sample = random.Random(0).sample(episodes, min(24, len(episodes)))
    measure(args.out, {"train (24 episodes)": sample, "held-out agent-450": held[0],
                       "held-out agent-1700": held[1]}, log)
    if not args.no_probes:
        begin = time.time()
        probe_accuracy(args.out, tiers, log)
        log(f"probe measurement took {time.time() - begin:.0f} s")
    if log_file:
        log_file.close()


if __name__ == "__main__":
    main()
