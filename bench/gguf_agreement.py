#!/usr/bin/env python3
"""Top-1 agreement of our engine with HF transformers on a GGUF checkpoint.

    bench/gguf_agreement.py MODEL.gguf TRACES.jsonl [--episodes 4] [--threads N]
                            [--build build]

Runs build/bench/next_token (our engine: every episode rendered and tokenised
as the collector does, its prompt and teacher-forced continuation in one
pass, the argmax after every position), then HF transformers on the same
token ids (AutoModelForCausalLM.from_pretrained(dir, gguf_file=...), which
dequantizes the GGUF file to float32 with the gguf package), and prints per
episode and in all: positions, positions where both choose the same next
token, the share, and the seconds each took. Needs torch, transformers and
gguf and accelerate in the Python that runs it. Records the CPU and the
versions. A benchmark, not a test: the issue's target is >= 99% agreement.
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
    args = ap.parse_args()

    ours_cmd = [os.path.join(args.build, "bench", "next_token"), args.model, args.traces,
                "--episodes", str(args.episodes), "--threads", str(args.threads)]
    started = time.time()
    out = subprocess.run(ours_cmd, check=True, capture_output=True, text=True).stdout
    ours = [json.loads(line) for line in out.splitlines() if line.strip()]
    ours_total = time.time() - started

    import torch
    import transformers
    torch.set_num_threads(args.threads)
    directory, name = os.path.split(os.path.abspath(args.model))
    started = time.time()
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name,
                                                              dtype=torch.float32)
    model.eval()
    load_s = time.time() - started
    print(f"cpu: {cpu_model()}; threads {args.threads}; python {platform.python_version()}, "
          f"torch {torch.__version__}, transformers {transformers.__version__}")
    print(f"model: {args.model}; HF load (dequantize to float32) {load_s:.1f} s")
    print(f"{'episode':32s} {'positions':>9s} {'agree':>7s} {'share':>7s} {'ours s':>7s} {'HF s':>7s}")
    total = agree_total = 0
    for episode in ours:
        ids = torch.tensor([episode["tokens"]])
        started = time.time()
        with torch.no_grad():
            logits = model(ids).logits[0]
        hf_s = time.time() - started
        hf_top1 = logits.argmax(dim=-1).tolist()
        agree = sum(a == b for a, b in zip(hf_top1, episode["top1"]))
        n = len(hf_top1)
        total += n
        agree_total += agree
        print(f"{episode['id']:32s} {n:9d} {agree:7d} {agree / n:7.2%} {episode['seconds']:7.2f} "
              f"{hf_s:7.2f}")
    share = agree_total / total if total else 0.0
    print(f"{'all':32s} {total:9d} {agree_total:7d} {share:7.2%}   (ours in all {ours_total:.1f} s, "
          f"model load included)")
    print(f"verdict: top-1 agreement {share:.2%} {'>=' if share >= 0.99 else '<'} 99%: "
          f"{'PASS' if share >= 0.99 else 'FAIL'}")


if __name__ == "__main__":
    sys.exit(main())
