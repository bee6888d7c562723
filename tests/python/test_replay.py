#!/usr/bin/env python3
"""The two implementations of runtime/policy.h checked against each other.

A recorded script (appends with regions, attention, eviction points) is
replayed through the C runtime (replay_driver, linked against runtime/) and
through python/memdecay/policy.py; at every eviction point both must evict
exactly the same positions, and every cached token's score must agree within
1e-12 relative (+inf for pinned tokens on both sides).

The script comes from our engine: a run directory that
`memdecay-calibrate collect` wrote for the demo model (data/models/qwen2-tiny)
on the first two episodes of data/traces/agent-450.jsonl, decode capped at 40
steps (data/run, memdecay-run(5)), with the golden config
(data/golden/qwen2-tiny-agent-450.json). The prompt is fed as eval feeds it,
chunk by chunk, with an eviction point after each chunk; the chunks are the
prompt's region runs (close to its messages). A chunk's attention is the
prompt pass's column sums (prefill/EPISODE.npy) on the positions born so far
(the run directory holds the sums over the whole prompt only, not per chunk);
a decode step's is its row of attn/EPISODE.npy. Each replay keeps the cached
positions of a row and rescales them to the chunk's query count, so that one
recording feeds any policy's cache (replay_driver.c states the rule).

Then the mutation checks: the prompt's tokens appended as decoded ones (a
clock that counts every token; on either side) must change the choices, and
a perturbed kappa must change scores beyond the tolerance, so the comparison
is shown to be able to fail.

Needs python3 and numpy only; no network.

  test_replay.py DRIVER
"""

import csv
import math
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.environ.get("MD_SOURCE_ROOT", os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(root, "python"))

try:
    import numpy as np
except ImportError:
    print("numpy is not installed (Debian: python3-numpy; .ci/install-deps installs it)", file=sys.stderr)
    sys.exit(1)

from memdecay import config as mdconfig  # noqa: E402
from memdecay.policy import Policy  # noqa: E402

RUN = os.path.join(here, "data", "run")
CONFIG = os.path.join(root, "data", "golden", "qwen2-tiny-agent-450.json")
RTOL = 1e-12


def load_episodes():
    import json
    with open(os.path.join(RUN, "run.json")) as f:
        run = json.load(f)
    regions = {}
    with open(os.path.join(RUN, "manifest.csv"), newline="") as f:
        for row in csv.DictReader(f):
            regions.setdefault(row["episode"], []).append((int(row["pos"]), row["region"]))
    out = []
    for e in run["episodes"]:
        toks = sorted(regions[e["id"]])
        assert [p for p, _ in toks] == list(range(len(toks)))
        attn = np.load(os.path.join(RUN, "attn", e["id"] + ".npy"))
        prefill = np.load(os.path.join(RUN, "prefill", e["id"] + ".npy"))
        out.append((e["id"], e["prompt_tokens"], [r for _, r in toks], prefill, attn))
    return out


def make_script(prompt_tokens, regions, prefill, attn):
    """The records: ('P', pos, region) for a prompt token, ('A', pos, region)
    for a decoded one, ('O', n_q, row), ('E',)."""
    P, S = prompt_tokens, attn.shape[0]
    recs = []
    start = 0
    while start < P:  # one chunk per run of equal region
        end = start
        while end < P and regions[end] == regions[start]:
            end += 1
        for pos in range(start, end):
            recs.append(("P", pos, regions[pos]))
        recs.append(("O", end - start, prefill[:end]))
        recs.append(("E",))
        start = end
    for t in range(S):
        recs.append(("A", P + t, regions[P + t]))
        recs.append(("O", 1, attn[t, :P + t + 1]))
        recs.append(("E",))
    return recs


def write_script(recs, path):
    with open(path, "w") as f:
        f.write("# memdecay-replay/1\n")
        for r in recs:
            if r[0] in ("A", "P"):
                f.write(f"{r[0]} {r[1]} {r[2]}\n")
            elif r[0] == "O":
                f.write(f"O {r[1]} " + " ".join("%.9g" % float(v) for v in r[2]) + "\n")
            else:
                f.write("E\n")


def replay_python(recs, cfg, policy, page_size, budget):
    """What replay_driver prints, as a list of eviction points
    (k, cached, [(pos, score)], [evicted]) and the final positions."""
    p = Policy(policy, cfg, page_size=page_size)
    cached = set()
    last = -1
    points = []
    for r in recs:
        if r[0] in ("A", "P"):
            (p.append if r[0] == "A" else p.append_prompt)(r[1], r[2])
            cached.add(r[1])
            last = r[1]
        elif r[0] == "O":
            n_q, row = r[1], r[2]
            # the driver's rescale: float32 values, double sum in position
            # order, (float)(x * n_q / sum)
            row32 = [float(np.float32(float("%.9g" % float(v)))) for v in row[:last + 1]]
            keep = [row32[j] for j in range(last + 1) if j in cached]
            s = 0.0
            for v in keep:
                s += v
            rec = np.array([x * float(n_q) / s if s > 0 else 0.0 for x in keep], dtype=np.float32)
            p.observe(rec, n_q)
        else:
            scores = [(j, p.token_score(j)) for j in sorted(cached)]
            n_cached = p.cached_tokens
            ev = p.evict(budget)
            points.append((len(points), n_cached, scores, ev))
            cached.difference_update(ev)
    return points, sorted(cached)


def replay_c(driver, script, policy, page_size, budget, tau=None):
    cmd = [driver, CONFIG, script, policy, str(page_size), str(budget)]
    if tau is not None:
        cmd.append(repr(tau))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    points, final = [], []
    for line in out.splitlines():
        f = line.split()
        if f[0] == "E":
            points.append((int(f[1]), int(f[2]), [], []))
            n_ev = int(f[3])
        elif f[0] == "T":
            points[-1][2].append((int(f[1]), float(f[2])))
        elif f[0] == "X":
            points[-1][3].append(int(f[1]))
        elif f[0] == "F":
            final.append(int(f[1]))
    return points, final


def same_score(a, b):
    if math.isinf(a) or math.isinf(b):
        return a == b
    return a == b or abs(a - b) <= RTOL * max(abs(a), abs(b))


MAX_REL = [0.0]  # the largest relative score difference seen where both are finite


def compare(c, py, scores=True):
    """None when equal, else the first difference, in words; scores=False
    compares the choices alone."""
    (cp, cf), (pp, pf) = c, py
    if len(cp) != len(pp):
        return f"{len(cp)} eviction points in C, {len(pp)} in Python"
    for (k, nc, cs, ce), (_, npy, ps, pe) in zip(cp, pp):
        if nc != npy:
            return f"point {k}: {nc} cached in C, {npy} in Python"
        if ce != pe:
            return f"point {k}: C evicted {ce[:8]}..., Python {pe[:8]}... ({len(ce)} vs {len(pe)})"
        if [q for q, _ in cs] != [q for q, _ in ps]:
            return f"point {k}: cached positions differ"
        if not scores:
            continue
        for (q, a), (_, b) in zip(cs, ps):
            if not same_score(a, b):
                return f"point {k}: position {q} scores {a!r} in C, {b!r} in Python"
            if math.isfinite(a) and a != b:
                MAX_REL[0] = max(MAX_REL[0], abs(a - b) / max(abs(a), abs(b)))
    if cf != pf:
        return "final caches differ"
    return None


# (policy, page_size, budget fraction of the episode's pages)
CASES = [
    ("memdecay", 0, 0.25), ("memdecay", 0, 0.5), ("memdecay", 1, 0.25), ("memdecay", 4, 0.5),
    ("memdecay-raw", 0, 0.25), ("memdecay-shared", 0, 0.25), ("memdecay-nodecay", 0, 0.25),
    ("memdecay-noattn", 0, 0.25), ("h2o", 0, 0.25), ("h2o", 1, 0.5), ("streaming", 0, 0.25),
    ("streaming-pinned", 0, 0.25), ("tova", 0, 0.25), ("random", 0, 0.25), ("full", 0, 0.25),
]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    driver = sys.argv[1]
    cfg = mdconfig.load(CONFIG)
    failures = 0
    checked_points = checked_scores = 0
    with tempfile.TemporaryDirectory() as tmp:
        episodes = load_episodes()
        scripts = []
        for ep_id, P, regions, prefill, attn in episodes:
            recs = make_script(P, regions, prefill, attn)
            path = os.path.join(tmp, ep_id + ".replay")
            write_script(recs, path)
            scripts.append((ep_id, len(regions), recs, path))
        for ep_id, length, recs, path in scripts:
            for policy, ps, frac in CASES:
                page = ps or cfg.page_size
                budget = math.ceil(frac * math.ceil(length / page))
                c = replay_c(driver, path, policy, ps, budget)
                py = replay_python(recs, cfg, policy, ps, budget)
                diff = compare(c, py)
                evicted = sum(len(pt[3]) for pt in c[0])
                print(f"{'ok  ' if diff is None else 'FAIL'} {ep_id} {policy} page {page} budget {budget} "
                      f"pages: {len(c[0])} eviction points, {evicted} tokens evicted"
                      + ("" if diff is None else ": " + diff))
                if diff is not None:
                    failures += 1
                checked_points += len(c[0])
                checked_scores += sum(len(pt[2]) for pt in c[0])
                if policy not in ("full",) and evicted == 0 and frac < 1:
                    print(f"FAIL {ep_id} {policy}: nothing evicted, the case checks nothing")
                    failures += 1

        largest = MAX_REL[0]  # of the real cases, before the mutations add theirs

        # The mutation checks: the comparison must be able to fail.
        ep_id, length, recs, path = scripts[0]
        budget = math.ceil(0.25 * math.ceil(length / cfg.page_size))
        c = replay_c(driver, path, "memdecay", 0, budget)
        # A mutation of the clock must change the pages chosen: the prompt's
        # tokens appended as decoded tokens (each a step: the token clock the
        # runtime had before dt counted decode steps), on either side. A
        # perturbed kappa must change the scores beyond the tolerance.
        as_decoded = [("A",) + r[1:] if r[0] == "P" else r for r in recs]
        for what, m_recs, m_cfg, scores in (
                ("Python prompt appended as decoded (choices)", as_decoded, cfg, False),
                ("kappa x (1 + 1e-9) (scores)", recs, None, True)):
            if m_cfg is None:
                m_cfg = mdconfig.load(CONFIG)
                m_cfg.kappa = cfg.kappa * (1 + 1e-9)
            diff = compare(c, replay_python(m_recs, m_cfg, "memdecay", 0, budget), scores)
            print(f"{'ok  ' if diff else 'FAIL'} mutation {what}: "
                  + (f"told apart ({diff})" if diff else "not told apart"))
            failures += diff is None
        # and from the C side: the driver fed the script with the prompt
        # appended as decoded tokens
        mutated = path + ".as-decoded"
        write_script(as_decoded, mutated)
        c2 = replay_c(driver, mutated, "memdecay", 0, budget)
        diff = compare(c2, replay_python(recs, cfg, "memdecay", 0, budget), False)
        print(f"{'ok  ' if diff else 'FAIL'} mutation C prompt appended as decoded (choices): "
              + (f"told apart ({diff})" if diff else "not told apart"))
        failures += diff is None
    print(f"{checked_points} eviction points, {checked_scores} token scores compared "
          f"(largest relative difference {largest:.3g}); {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
