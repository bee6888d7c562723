#!/usr/bin/env python3
"""Top-1 agreement of our engine with HF transformers and llama.cpp on a GGUF checkpoint.

    bench/gguf_agreement.py MODEL.gguf TRACES.jsonl [--episodes 4] [--threads N]
                            [--build build] [--peers hf,llama.cpp]

Runs build/bench/next_token (our engine: every episode rendered and tokenised
as the collector does, its prompt and teacher-forced continuation in one
pass, the argmax after every position), then HF transformers on the same
token ids (AutoModelForCausalLM.from_pretrained(dir, gguf_file=...), which
dequantizes the GGUF file to float32 with the gguf package), and prints per
episode and in all: positions, positions where both choose the same next
token, the share, and the seconds each took. Needs torch, transformers and
gguf and accelerate in the Python that runs it. With llama.cpp among the
peers (--peers), also llama-cpp-python's Llama on the same file and the
same ids (logits_all: the logits after every position, computed on the
quantized weights as llama.cpp does), its agreement with ours and its
seconds beside ours: side by side in one run, the same threads. Records the
CPU and the versions. A benchmark, not a test: the target is >= 99%
agreement with HF (float32); llama.cpp multiplies the quantized blocks with
8-bit activations, so its agreement is a measurement, not a target.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("traces")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--build", default="build")
    ap.add_argument("--peers", default="hf", help="comma-separated: hf, llama.cpp")
    args = ap.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    for p in peers:
        if p not in ("hf", "llama.cpp"):
            ap.error(f"--peers: unknown peer {p!r} (hf, llama.cpp)")

    ours_cmd = [os.path.join(args.build, "bench", "next_token"), args.model, args.traces,
                "--episodes", str(args.episodes), "--threads", str(args.threads)]
    started = time.time()
    out = subprocess.run(ours_cmd, check=True, capture_output=True, text=True).stdout
    ours = [json.loads(line) for line in out.splitlines() if line.strip()]
    ours_total = time.time() - started

    print(f"cpu: {cpu_model()}; threads {args.threads}; python {platform.python_version()}")
    print(f"model: {args.model}; ours in all {ours_total:.1f} s (model load included)")
    for peer in peers:
        top1, seconds = (hf_top1 if peer == "hf" else llama_top1)(args, ours)
        print(f"\n{peer}: {top1.pop('about')}")
        print(f"{'episode':32s} {'positions':>9s} {'agree':>7s} {'share':>7s} {'ours s':>7s} "
              f"{peer + ' s':>11s}")
        total = agree_total = 0
        for episode in ours:
            theirs = top1[episode["id"]]
            agree = sum(a == b for a, b in zip(theirs, episode["top1"]))
            n = len(theirs)
            total += n
            agree_total += agree
            print(f"{episode['id']:32s} {n:9d} {agree:7d} {agree / n:7.2%} {episode['seconds']:7.2f} "
                  f"{seconds[episode['id']]:11.2f}")
        share = agree_total / total if total else 0.0
        print(f"{'all':32s} {total:9d} {agree_total:7d} {share:7.2%}")
        if peer == "hf":
            print(f"verdict: top-1 agreement with HF {share:.2%} {'>=' if share >= 0.99 else '<'} 99%: "
                  f"{'PASS' if share >= 0.99 else 'FAIL'}")


def hf_top1(args, ours):
    import torch
    import transformers
    torch.set_num_threads(args.threads)
    directory, name = os.path.split(os.path.abspath(args.model))
    started = time.time()
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name,
                                                              dtype=torch.float32)
    model.eval()
    top1, seconds = {}, {}
    load_s = time.time() - started
    for episode in ours:
        ids = torch.tensor([episode["tokens"]])
        started = time.time()
        with torch.no_grad():
            logits = model(ids).logits[0]
        seconds[episode["id"]] = time.time() - started
        top1[episode["id"]] = logits.argmax(dim=-1).tolist()
    top1["about"] = (f"torch {torch.__version__}, transformers {transformers.__version__}; "
                     f"load (dequantize to float32) {load_s:.1f} s")
    return top1, seconds


def llama_top1(args, ours):
    from importlib.metadata import version
    import llama_cpp
    longest = max(len(e["tokens"]) for e in ours)
    started = time.time()
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=longest + 8, n_batch=512, logits_all=True,
                          n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    load_s = time.time() - started
    top1, seconds = {}, {}
    for episode in ours:
        llm.reset()
        started = time.time()
        llm.eval(episode["tokens"])
        seconds[episode["id"]] = time.time() - started
        top1[episode["id"]] = [int(i) for i in llm.scores[:len(episode["tokens"])].argmax(axis=-1)]
    top1["about"] = f"llama-cpp-python {version('llama-cpp-python')}; load {load_s:.1f} s"
    return top1, seconds


if __name__ == "__main__":
    sys.exit(main())
