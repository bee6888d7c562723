#!/usr/bin/env python3
"""Markdown tables from memdecay-calibrate eval results (memdecay-eval(5)).

    bench/eval_tables.py RESULTS.json [RESULTS.json ...] [--title TEXT]

For each results file and budget: recall per region and policy (the full
cache as the ceiling), all, unpinned, and the probes whose answer was wholly
evicted (recalled anyway / total). Then the figures the paper's claims are
judged by: the random policy's recall as a share of the full cache's, recall
when the answer was evicted, pinned system probes under memdecay and under
recency (streaming), and unpinned recall of memdecay against h2o with the
user-turn facts apart. Standard library only.
"""
import argparse
import json
import sys


def counts(cell):
    return cell["recalled"], cell["total"]


def fmt(rec, tot):
    return f"{rec}/{tot}" if tot else "-"


def evicted_counts(results, policy, budget):
    """Probes whose answer tokens were all evicted, and of those recalled:
    from the summary when written, else from the episodes."""
    for s in results["summary"]:
        if s["policy"] == policy and s["budget"] == budget and "answer_evicted" in s:
            return counts(s["answer_evicted"])
    rec = tot = 0
    for ep in results.get("episodes", []):
        for run in ep["runs"]:
            if run["policy"] != policy or run["budget"] != budget:
                continue
            for p in run["probes"]:
                if p["answer_tokens"] > 0 and p["answer_kept"] == 0:
                    tot += 1
                    rec += p["correct"]
    return rec, tot


def table(results, out):
    full = next(s for s in results["summary"] if s["policy"] == "full")
    budgets = sorted({s["budget"] for s in results["summary"] if s["policy"] != "full"})
    policies = []
    for s in results["summary"]:
        if s["policy"] != "full" and s["policy"] not in policies:
            policies.append(s["policy"])
    regions = [r for r in full["regions"] if full["regions"][r]["total"]]
    pinned = {r["name"]: r["pinned"] for r in results["regions"]} if isinstance(results["regions"], list) \
        else {name: v.get("pinned", False) for name, v in results["regions"].items()}
    for budget in budgets:
        runs = {s["policy"]: s for s in results["summary"] if s["budget"] == budget}
        print(f"\nRecall at a budget of {100 * budget:g}% (recalled/total):\n", file=out)
        print("| region | full | " + " | ".join(policies) + " |", file=out)
        print("| --- | --- |" + " --- |" * len(policies), file=out)
        for r in regions:
            label = r + (" (pinned)" if pinned.get(r) else "")
            print(f"| {label} | {fmt(*counts(full['regions'][r]))} | "
                  + " | ".join(fmt(*counts(runs[p]["regions"][r])) if p in runs else "-" for p in policies)
                  + " |", file=out)
        print(f"| all | {fmt(full['recalled'], full['total'])} | "
              + " | ".join(fmt(runs[p]["recalled"], runs[p]["total"]) if p in runs else "-" for p in policies)
              + " |", file=out)
        print(f"| unpinned | {fmt(*counts(full['unpinned']))} | "
              + " | ".join(fmt(*counts(runs[p]["unpinned"])) if p in runs else "-" for p in policies)
              + " |", file=out)
        print("| answer evicted | | "
              + " | ".join(fmt(*evicted_counts(results, p, budget)) if p in runs else "-" for p in policies)
              + " |", file=out)
    return full, budgets, policies


def share(a, b):
    return f"{100 * a / b:.0f}%" if b else "-"


def claims(results, full, budgets, out):
    runs = {(s["policy"], s["budget"]): s for s in results["summary"]}
    print("\nThe claims, at each budget:\n", file=out)
    for budget in budgets:
        line = [f"budget {100 * budget:g}%:"]
        if ("random", budget) in runs:
            r = runs[("random", budget)]
            line.append(f"random recalls {share(r['recalled'], full['recalled'])} of the full cache's recall")
        evicted = [evicted_counts(results, p, budget) for p, b in runs if b == budget]
        rec = sum(e[0] for e in evicted)
        tot = sum(e[1] for e in evicted)
        line.append(f"answers wholly evicted: recalled {rec}/{tot} ({share(rec, tot)})")
        for policy in ("memdecay", "streaming", "h2o"):
            if (policy, budget) in runs and "system" in runs[(policy, budget)]["regions"]:
                line.append(f"system under {policy} {fmt(*counts(runs[(policy, budget)]['regions']['system']))}")
        for policy in ("memdecay", "h2o"):
            if (policy, budget) in runs:
                s = runs[(policy, budget)]
                user = s["regions"].get("user", {"recalled": 0, "total": 0})
                line.append(f"{policy} unpinned {fmt(*counts(s['unpinned']))} (user-turn facts "
                            f"{fmt(*counts(user))})")
        print("- " + line[0] + " " + "; ".join(line[1:]), file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+")
    args = parser.parse_args(argv)
    for path in args.results:
        with open(path, encoding="utf-8") as f:
            results = json.load(f)
        traces = results.get("traces", {})
        name = traces.get("path", path) if isinstance(traces, dict) else path
        print(f"\n### {path}: {results['episodes_evaluated']} episodes of {name}", file=sys.stdout)
        full, budgets, _ = table(results, sys.stdout)
        claims(results, full, budgets, sys.stdout)


if __name__ == "__main__":
    main()
