#!/usr/bin/env python3
"""MemDecayPress on a model, against our own eval (not part of CI): the
shipped demo model by default, or a GGUF file (--model FILE.gguf, loaded by
transformers' GGUF support, dequantized to float32), such as the real
Qwen2.5-Coder-0.5B of data/models/fetch_qwen25.py with the config
calibrated for it.

For the first N episodes of a trace file with probes:
  1. runs `memdecay-calibrate collect` (the rendered tokens and their regions:
     manifest.csv) and `memdecay-calibrate eval --policies memdecay` (the
     reference: what our engine kept and recalled);
  2. feeds each episode to the Hugging Face model (eager attention) under
     MemDecayPress as eval feeds it: the prompt message by message (a chunk
     starts at each <|im_start|>), eviction after each chunk, then the
     continuation teacher-forced, one token per step, eviction after each;
  3. asks each probe from a copy of that cache, nothing evicted, greedy, up
     to 32 tokens, stopping at <|im_end|> (eval's protocol), and scores the
     answer as eval does (NFKC, case folding, non-alphanumeric runs to one
     space, whole-word containment);
  4. runs model.generate on the whole prompt under the press and checks
     that the budget holds and that no pinned token was evicted.
Prints the versions, per episode the cache counts and recall of both, and
the comparison.

  press_generate.py --program build/calib/memdecay-calibrate --episodes 3
"""

import argparse
import copy
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unicodedata

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))

import torch  # noqa: E402
import transformers  # noqa: E402
import kvpress  # noqa: E402
from importlib.metadata import version  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache  # noqa: E402

from memdecay.press import MemDecayPress, causal_mask  # noqa: E402

IM_START = "<|im_start|>"


def normalise(s):
    s = unicodedata.normalize("NFKC", s).casefold()
    s = "".join(c if unicodedata.category(c)[0] in "LN" else " " for c in s)
    return " " + re.sub(" +", " ", s).strip() + " "


def recalled(answer, output):
    a = normalise(answer)
    return a.strip() != "" and a in normalise(output)


def feed(model, cache, press, ids, positions):
    cached = (press.core.positions if press.core is not None else []) + positions
    out = model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True,
                cache_position=torch.tensor(positions), position_ids=torch.tensor([positions]),
                attention_mask=causal_mask(cached, positions, dtype=model.dtype))
    return out.logits[0, -1]


def ask(model, tok, cache, press, next_pos, question, max_tokens, im_end):
    ids = tok(f"<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n",
              add_special_tokens=False)["input_ids"]
    cache = copy.deepcopy(cache)
    saved = copy.deepcopy(press._core)
    press.evict_enabled = False
    try:
        logits = feed(model, cache, press, ids, list(range(next_pos, next_pos + len(ids))))
        pos = next_pos + len(ids)
        out = []
        for _ in range(max_tokens):
            t = int(logits.argmax())
            if t == im_end:
                break
            out.append(t)
            logits = feed(model, cache, press, [t], [pos])
            pos += 1
    finally:
        press._core = saved
        press.evict_enabled = True
    return tok.decode(out, skip_special_tokens=True)


def main():
    ap = argparse.ArgumentParser()
    root = os.path.join(here, "..", "..")
    ap.add_argument("--program", default=os.path.join(root, "build", "calib", "memdecay-calibrate"))
    ap.add_argument("--model", default=os.path.join(root, "data", "models", "qwen2-tiny"))
    ap.add_argument("--traces", default=os.path.join(root, "data", "traces", "agent-450.jsonl"))
    ap.add_argument("--config", default=os.path.join(root, "data", "golden", "qwen2-tiny-agent-450.json"))
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--budget", default="0.25,0.5")
    ap.add_argument("--max-answer-tokens", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    print(f"versions: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"kvpress {version('kvpress')}, python {sys.version.split()[0]}")

    work = tempfile.mkdtemp(prefix="press-")
    run = os.path.join(work, "run")
    common = ["--model", args.model, "--traces", args.traces, "--max-episodes", str(args.episodes),
              "--threads", "1", "--reproducible", "-q"]
    subprocess.run([args.program, "collect", *common, "--out", run], check=True)
    ev_path = os.path.join(work, "eval.json")
    subprocess.run([args.program, "eval", *common, "--config", args.config, "--policies", "memdecay",
                    "--budget", args.budget, "-o", ev_path], check=True)
    ev = json.load(open(ev_path))
    runj = json.load(open(os.path.join(run, "run.json")))
    rows = {}
    with open(os.path.join(run, "manifest.csv"), newline="") as f:
        for r in csv.DictReader(f):
            rows.setdefault(r["episode"], []).append((int(r["pos"]), int(r["token_id"]), r["region"]))

    # A GGUF file (what our programs take) loads in transformers through its
    # gguf support, dequantized to float32; a directory as it is.
    hf_dir, hf_kw = args.model, {}
    if args.model.endswith(".gguf"):
        hf_dir, hf_kw = os.path.dirname(os.path.abspath(args.model)), {"gguf_file": os.path.basename(args.model)}
    tok = AutoTokenizer.from_pretrained(hf_dir, **hf_kw)
    im_start = tok.convert_tokens_to_ids(IM_START)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    model = AutoModelForCausalLM.from_pretrained(hf_dir, attn_implementation="eager",
                                                 dtype=torch.float32, **hf_kw)
    model.eval()
    press = MemDecayPress(config_path=args.config)
    pinned = {r.name for r in __import__("memdecay").load(args.config).regions if r.pinned}

    totals = {}
    with torch.no_grad(), press(model):
        for e_meta, e_ev in zip(runj["episodes"], ev["episodes"]):
            assert e_meta["id"] == e_ev["id"]
            toks = sorted(rows[e_meta["id"]])
            P = e_meta["prompt_tokens"]
            ids = [t for _, t, _ in toks]
            regions = [g for _, _, g in toks]
            starts = [i for i in range(P) if ids[i] == im_start]
            chunks = [(a, b) for a, b in zip(starts, starts[1:] + [P])]
            if starts[0] != 0:
                chunks.insert(0, (0, starts[0]))
            assert len(chunks) == e_ev["chunks"], (len(chunks), e_ev["chunks"])
            for run_ev in e_ev["runs"]:
                if run_ev["policy"] != "memdecay":
                    continue
                press.budget_pages = run_ev["budget_pages"]
                press.regions = regions
                press.prompt_tokens = P  # regions label the continuation too
                press.decode_region = e_meta["region"]
                press._core = None
                cache = DynamicCache()
                for a, b in chunks:
                    feed(model, cache, press, ids[a:b], list(range(a, b)))
                for p in range(P, len(ids)):
                    feed(model, cache, press, [ids[p]], [p])
                kept = press.core.positions
                lost_pins = [p for p in range(len(ids)) if regions[p] in pinned and p not in set(kept)]
                n_rec = n_same = 0
                for probe, pr_ev in zip(e_ev["probes"], run_ev["probes"]):
                    out = ask(model, tok, cache, press, len(ids), probe["question"], args.max_answer_tokens,
                              im_end)
                    ok = recalled(probe["answer"], out)
                    n_rec += ok
                    n_same += ok == pr_ev["correct"]
                ours = sum(p["correct"] for p in run_ev["probes"])
                st = press.stats
                print(f"{e_meta['id']} budget {run_ev['budget']} ({run_ev['budget_pages']} pages): "
                      f"final cached press {len(kept)} / eval {run_ev['final_cached']}, evicted "
                      f"{st['evicted']} / {run_ev['evicted']}, most cached after an eviction "
                      f"{st['max_cached_after_eviction']} / {run_ev['max_cached_after_eviction']}, "
                      f"pinned tokens lost {len(lost_pins)}, recall {n_rec} / {ours} of "
                      f"{len(run_ev['probes'])}, same outcome on {n_same} probes")
                t = totals.setdefault(run_ev["budget"], [0, 0, 0, 0, 0, 0])
                t[0] += n_rec
                t[1] += ours
                t[2] += len(run_ev["probes"])
                t[3] += abs(len(kept) - run_ev["final_cached"])
                t[4] += len(lost_pins)
                t[5] += n_same

        # model.generate under the press: one prompt chunk, then greedy decoding
        e_meta = runj["episodes"][0]
        toks = sorted(rows[e_meta["id"]])
        P = e_meta["prompt_tokens"]
        press.regions = [g for _, _, g in toks][:P]
        press.decode_region = e_meta["region"]
        press.budget_pages = math.ceil(0.25 * math.ceil(P / 16))
        press._core = None
        prompt = torch.tensor([[t for _, t, _ in toks][:P]])
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=24,
                             do_sample=False, past_key_values=DynamicCache())
        kept = set(press.core.positions)
        lost = [p for p in range(P) if press.regions[p] in pinned and p not in kept]
        pinned_pages = len({p // 16 for p in range(P) if press.regions[p] in pinned})
        print(f"generate: {out.shape[1] - P} tokens, budget {press.budget_pages} pages, "
              f"most pages after an eviction {press.stats['max_pages_after_eviction']} "
              f"(pinned pages {pinned_pages} + the page being written may exceed it), "
              f"cache now {press.core.cached_tokens} tokens ({press.core.cached_pages} pages), "
              f"pinned tokens lost {len(lost)}")
    # The tolerance: HF's eager attention is not our kernels' (float rounding,
    # so near ties may break otherwise and a greedy answer may change), so
    # recall may differ by up to a tenth of the probes (at least 1) per
    # budget; the cache's counts follow from the budget and the pins, and
    # must be equal; no pinned token may be lost.
    ok = True
    for b, (rp, re_, n, dk, lp, same) in totals.items():
        tol = max(1, n // 10)
        good = abs(rp - re_) <= tol and dk == 0 and lp == 0
        ok &= good
        print(f"budget {b}: recall press {rp}/{n}, eval {re_}/{n} (tolerance {tol}), the same outcome "
              f"on {same}/{n} probes; |final cached "
              f"difference| summed {dk}; pinned tokens lost {lp}: {'within' if good else 'OUTSIDE'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
