#!/usr/bin/env python3
"""Damages copies of real shard directories the way a user's mistake or
edit would, for shard_merge.sh (what a merge must refuse):

  tamper_shards.py swap DIR_A DIR_B     exchange the two shards' indices
  tamper_shards.py empty DIR            list none of its episodes
  tamper_shards.py move FROM TO         move FROM's first episode to the
                                        end of TO (run.json, manifest rows,
                                        attn and prefill files)
  tamper_shards.py attn DIR FACTOR      multiply its first episode's
                                        attention matrix by FACTOR

Each keeps the directory readable on its own (manifest_bytes, shard.episodes
follow), so only checking the shards against their plan tells."""
import json
import os
import shutil
import sys

import numpy as np


def load(d):
    with open(os.path.join(d, "run.json")) as f:
        return json.load(f)


def save(d, run):
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump(run, f, indent=2)
        f.write("\n")


def manifest(d, run):
    """The header and each listed episode's rows (bytes), in order."""
    with open(os.path.join(d, "manifest.csv"), "rb") as f:
        data = f.read(run["manifest_bytes"])
    # Records end at a line feed outside quotes (a piece may hold one).
    lines, start, quoted = [], 0, False
    for i, byte in enumerate(data):
        if byte == ord('"'):
            quoted = not quoted
        elif byte == ord("\n") and not quoted:
            lines.append(data[start:i + 1])
            start = i + 1
    rows = {}
    for line in lines[1:]:
        rows.setdefault(line.split(b",", 1)[0].decode(), []).append(line)
    return lines[0], rows


def write_manifest(d, run, header, rows):
    data = header + b"".join(b"".join(rows[e["id"]]) for e in run["episodes"])
    with open(os.path.join(d, "manifest.csv"), "wb") as f:
        f.write(data)
    run["manifest_bytes"] = len(data)
    run["shard"]["episodes"] = len(run["episodes"])


def main(op, *args):
    if op == "swap":
        a, b = load(args[0]), load(args[1])
        a["shard"]["index"], b["shard"]["index"] = b["shard"]["index"], a["shard"]["index"]
        save(args[0], a)
        save(args[1], b)
    elif op == "empty":
        run = load(args[0])
        header, rows = manifest(args[0], run)
        run["episodes"] = []
        write_manifest(args[0], run, header, rows)
        save(args[0], run)
    elif op == "move":
        src, dst = args
        a, b = load(src), load(dst)
        ha, ra = manifest(src, a)
        hb, rb = manifest(dst, b)
        episode = a["episodes"].pop(0)
        b["episodes"].append(episode)
        rb[episode["id"]] = ra[episode["id"]]
        for sub in ("attn", "prefill"):
            shutil.copy(os.path.join(src, sub, episode["id"] + ".npy"), os.path.join(dst, sub))
        write_manifest(src, a, ha, ra)
        write_manifest(dst, b, hb, rb)
        save(src, a)
        save(dst, b)
    elif op == "attn":
        run = load(args[0])
        path = os.path.join(args[0], "attn", run["episodes"][0]["id"] + ".npy")
        np.save(path, (np.load(path) * float(args[1])).astype("<f4"))
    else:
        sys.exit("tamper_shards.py: unknown operation " + op)


if __name__ == "__main__":
    main(*sys.argv[1:])
