#!/usr/bin/env python3
"""Synthetic region-labelled agent traces for memdecay-calibrate.

Writes JSON Lines episodes in the format of memdecay-traces(5): multi-turn
tool-using agents in several domains, every episode using all seven regions
(system, plan, user, tool_in, tool_out, retrieval, scratchpad), a
teacher-forced scratchpad continuation of about 230 tokens that refers back
to earlier regions, and one planted fact per region as a probe.

Deterministic: the same arguments give byte-identical output. Standard
library only; token counts in the summary come from HF `tokenizers` when
--tokenizer names a tokenizer.json (otherwise they are estimates).

    python3 data/traces/generate.py --context 450 --episodes 24 --seed 450 \\
        --out data/traces/agent-450.jsonl --tokenizer PATH/tokenizer.json
    python3 data/traces/generate.py --episodes 2000 --seed 7 --context 450 \\
        --out train-450.jsonl            # a training corpus (not committed)
"""
import argparse
import json
import random
import re
import sys

import domains

REGIONS = ("system", "plan", "user", "tool_in", "tool_out", "retrieval", "scratchpad")
CONTINUATION_TOKENS = 230  # aim; real counts land in about 200-260

# ---- a token estimate, standard library only ---------------------------------
# Approximates Qwen's byte-level BPE: the pre-tokenizer's pieces (a letter run
# with one leading non-letter, single digits, punctuation runs, whitespace),
# long words counted as several tokens. Only used to size episodes; the
# summary reports real counts when a tokenizer is available.
_SPECIAL = re.compile(r"<\|im_start\|>|<\|im_end\|>|</?tool_call>")
_PIECE = re.compile(r"'(?:s|t|re|ve|m|ll|d)|[^\r\n\w]?[^\W\d_]+|\d|[^\s\w]+|\s*[\r\n]+|\s+(?!\S)|\s+|_+")


def estimate_tokens(text):
    count = len(_SPECIAL.findall(text))
    for match in _PIECE.finditer(_SPECIAL.sub(" ", text)):
        piece = match.group(0)
        letters = sum(ch.isalpha() for ch in piece)
        count += 1 + max(0, letters - 4) // 6
    return count


# ---- rendering: Qwen2.5's ChatML, as memdecay-traces(5) describes it ---------

def tojson(value):
    """transformers' tojson filter: json.dumps(value, ensure_ascii=False)."""
    return json.dumps(value, ensure_ascii=False)


def _segments(message):
    content = message.get("content")
    region = message.get("region") or {"system": "system", "user": "user", "assistant": "scratchpad",
                                       "tool": "tool_out"}[message["role"]]
    if content is None:
        return []
    if isinstance(content, str):
        return [(region, content)]
    return [(seg.get("region", region), seg["text"]) for seg in content]


def render(episode):
    """The prompt as (text, region) pieces, template text labelled with the
    region of what it wraps (first / last non-empty piece of the message)."""
    out = []
    messages = episode["messages"]
    for i, message in enumerate(messages):
        segs = [s for s in _segments(message) if s[1]]
        calls = [(c.get("region", "tool_in"), c) for c in message.get("tool_calls") or []]
        own = message.get("region") or {"system": "system", "user": "user", "assistant": "scratchpad",
                                         "tool": "tool_out"}[message["role"]]
        first = segs[0][0] if segs else (calls[0][0] if calls else own)
        last = calls[-1][0] if calls else (segs[-1][0] if segs else first)
        role = message["role"]
        if role == "tool":
            if i == 0 or messages[i - 1]["role"] != "tool":
                out.append(("<|im_start|>user", first))
            out.append(("\n<tool_response>\n", first))
            out += [(text, region) for region, text in segs]
            out.append(("\n</tool_response>", last))
            if i + 1 == len(messages) or messages[i + 1]["role"] != "tool":
                out.append(("<|im_end|>\n", last))
        elif calls:
            out.append(("<|im_start|>assistant" + ("\n" if segs else ""), first))
            out += [(text, region) for region, text in segs]
            for region, call in calls:
                out.append(('\n<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>'
                            % (call["name"], tojson(call["arguments"])), region))
            out.append(("<|im_end|>\n", last))
        else:
            out.append(("<|im_start|>%s\n" % role, first))
            out += [(text, region) for region, text in segs]
            out.append(("<|im_end|>\n", last))
    out.append(("<|im_start|>assistant\n", episode["continuation"]["region"]))
    return out


def prompt_text(episode):
    return "".join(text for text, _ in render(episode))


# ---- building an episode from a scenario ------------------------------------------

def _assistant(round_, plan=None):
    content = []
    if plan:
        content.append({"region": "plan", "text": plan})
    if round_.get("think"):
        content.append({"region": "scratchpad", "text": round_["think"]})
    message = {"role": "assistant", "content": content}
    message["tool_calls"] = [{"name": name, "arguments": args} for name, args in round_["calls"]]
    return message


def _tool(text, region):
    message = {"role": "tool", "content": text}
    if region != "tool_out":
        message["region"] = region
    return message


def build(scenario, extras, eid):
    """Messages in order: system, user, then the rounds (each an assistant
    turn with its tool calls and the tool results), the extras inserted
    before core round extras_at and the follow-up user turn before core
    round followup[0]."""
    core = scenario["rounds"]
    followup = scenario.get("followup")
    items = []
    for k, round_ in enumerate(core):
        if k == scenario["extras_at"]:
            items += [("round", extra) for extra in extras]
        if followup and k == followup[0]:
            items.append(("user", followup[1]))
        items.append(("round", round_))
    if scenario["extras_at"] >= len(core):
        items += [("round", extra) for extra in extras]
    messages = [{"role": "system", "content": scenario["system"]},
                {"role": "user", "content": [{"region": r, "text": t} for r, t in scenario["user"]]}]
    first_round = True
    for kind, item in items:
        if kind == "user":
            messages.append({"role": "user", "content": [{"region": r, "text": t} for r, t in item]})
            continue
        messages.append(_assistant(item, scenario["plan"] if first_round else None))
        messages += [_tool(text, region) for text, region in item["results"]]
        first_round = False
    return {"id": eid, "messages": messages,
            "continuation": {"region": "scratchpad", "text": scenario["continuation"]},
            "probes": scenario["probes"]}


def fit_continuation(sentences, filler, rng):
    """Fact-bearing sentences first (in order), generic ones after, until the
    estimate reaches the target."""
    chosen = []
    pool = list(filler)
    rng.shuffle(pool)
    for sentence in sentences + pool:
        if estimate_tokens(" ".join(chosen)) >= CONTINUATION_TOKENS:
            break
        if estimate_tokens(" ".join(chosen + [sentence])) <= CONTINUATION_TOKENS + 25:
            chosen.append(sentence)
    return " ".join(chosen)


def _occurs(answer, text):
    """answer in text as a whole word or phrase, ignoring case."""
    pattern = r"(?<![0-9a-z])(?<![0-9]\.)" + re.escape(answer.lower()) + r"(?![0-9a-z])(?!\.[0-9])"
    return re.search(pattern, text.lower()) is not None


def check_probes(episode):
    """Every planted answer is in its own region and nowhere else in the
    prompt or the continuation (as a whole word, ignoring case), so a probe
    tests that region alone."""
    text_of = {}
    for text, region in render(episode):
        text_of[region] = text_of.get(region, "") + text
    for probe in episode["probes"]:
        answer, home = probe["answer"], probe["region"]
        if not _occurs(answer, text_of.get(home, "")):
            raise AssertionError(f"{episode['id']}: {answer!r} is not in region {home}")
        elsewhere = [r for r, t in text_of.items() if r != home and _occurs(answer, t)]
        if _occurs(answer, episode["continuation"]["text"]):
            elsewhere.append("continuation")
        if elsewhere:
            raise AssertionError(f"{episode['id']}: {home} answer {answer!r} also in {', '.join(elsewhere)}")
    if sorted(text_of) != sorted(REGIONS) or sorted(p["region"] for p in episode["probes"]) != sorted(REGIONS):
        raise AssertionError(f"{episode['id']}: regions {sorted(text_of)}")


def make_episode(domain, rng, target, eid):
    scenario = domain(rng, target)
    scenario["continuation"] = fit_continuation(scenario["continuation"], domains.CONTINUATION_FILLER + scenario.get("filler", []), rng)
    chosen = []
    for extra in scenario["extras"]:
        if estimate_tokens(prompt_text(build(scenario, chosen, eid))) >= target:
            break
        if estimate_tokens(prompt_text(build(scenario, chosen + [extra], eid))) <= target * 1.1:
            chosen.append(extra)  # else a shorter extra further down may still fit
    episode = build(scenario, chosen, eid)
    episode["meta"] = {"domain": scenario["domain"], "generator": "data/traces/generate.py"}
    check_probes(episode)
    return episode


# ---- counting with a real tokenizer (optional) -------------------------------------

def load_tokenizer(path):
    """Qwen2.5's tokenizer from a Qwen tokenizer.json: Qwen2.5 lacks Qwen3's
    added tokens 151665-151668 (<tool_response>, </tool_response>, <think>,
    </think>), so they are dropped; the BPE is the same."""
    from tokenizers import Tokenizer
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["id"] < 151665]
    return Tokenizer.from_str(json.dumps(spec))


def count_regions(tokenizer, episode):
    pieces = render(episode)
    text = "".join(t for t, _ in pieces)
    starts, at = [], 0
    for piece_text, region in pieces:
        starts.append((at, region))
        at += len(piece_text)
    encoding = tokenizer.encode(text, add_special_tokens=False)
    per_region = dict.fromkeys(REGIONS, 0)
    k = 0
    for begin, _ in encoding.offsets:  # character offsets; a token takes its first character's region
        while k + 1 < len(starts) and starts[k + 1][0] <= begin:
            k += 1
        per_region[starts[k][1]] = per_region.get(starts[k][1], 0) + 1
    continuation = len(tokenizer.encode(episode["continuation"]["text"], add_special_tokens=False).ids)
    return len(encoding.ids), continuation, per_region


def summary(episodes, tokenizer_path, out):
    tokenizer = load_tokenizer(tokenizer_path) if tokenizer_path else None
    kind = "tokens (Qwen2.5 tokenizer)" if tokenizer else "tokens (estimate; pass --tokenizer for real counts)"
    print(f"{len(episodes)} episodes; {kind}", file=out)
    print(f"{'id':24} {'domain':12} {'msgs':>4} {'calls':>5} {'context':>7} {'cont':>5}  "
          + " ".join(f"{r[:7]:>7}" for r in REGIONS), file=out)
    totals = {"context": [], "continuation": [], "regions": dict.fromkeys(REGIONS, 0)}
    for ep in episodes:
        calls = sum(len(m.get("tool_calls") or []) for m in ep["messages"])
        if tokenizer:
            context, continuation, per_region = count_regions(tokenizer, ep)
        else:
            context = estimate_tokens(prompt_text(ep))
            continuation = estimate_tokens(ep["continuation"]["text"])
            per_region = dict.fromkeys(REGIONS, 0)
            for text, region in render(ep):
                per_region[region] += estimate_tokens(text)
        totals["context"].append(context)
        totals["continuation"].append(continuation)
        for region in REGIONS:
            totals["regions"][region] += per_region.get(region, 0)
        print(f"{ep['id']:24} {ep['meta']['domain']:12} {len(ep['messages']):4d} {calls:5d} {context:7d} "
              f"{continuation:5d}  " + " ".join(f"{per_region.get(r, 0):7d}" for r in REGIONS), file=out)
    for name in ("context", "continuation"):
        values = totals[name]
        print(f"{name}: min {min(values)}, mean {sum(values) / len(values):.0f}, max {max(values)}", file=out)
    total = sum(totals["regions"].values())
    print("context by region: " + ", ".join(
        f"{r} {100 * totals['regions'][r] / total:.1f}%" for r in REGIONS), file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--context", type=int, default=450, help="target prompt length in tokens")
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--seed", type=int, default=450)
    parser.add_argument("--out", required=True, help="output .jsonl ('-' for stdout)")
    parser.add_argument("--tokenizer", help="a Qwen tokenizer.json, for real token counts in the summary")
    parser.add_argument("--quiet", action="store_true", help="no summary")
    args = parser.parse_args(argv)
    if args.context < 400 or args.episodes < 1:
        parser.error("--context must be at least 400 (the compact episodes are 380 to 530 tokens) "
                     "and --episodes at least 1")
    rng = random.Random(args.seed)
    width = max(3, len(str(args.episodes - 1)))
    episodes = []
    for i in range(args.episodes):
        domain = domains.ALL[i % len(domains.ALL)]
        eid = f"ep{args.context}-{i:0{width}d}-{domain.__name__}"
        episodes.append(make_episode(domain, random.Random(rng.getrandbits(64)), args.context, eid))
    lines = "".join(json.dumps(ep, ensure_ascii=False) + "\n" for ep in episodes)
    if args.out == "-":
        sys.stdout.write(lines)
    else:
        with open(args.out, "w", encoding="utf-8", newline="\n") as f:
            f.write(lines)
    if not args.quiet:
        summary(episodes, args.tokenizer, sys.stderr if args.out == "-" else sys.stdout)


if __name__ == "__main__":
    main()
