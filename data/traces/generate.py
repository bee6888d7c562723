#!/usr/bin/env python3
"""Synthetic region-labelled agent traces for memdecay-calibrate.

Writes JSON Lines episodes in the format of memdecay-traces(5): multi-turn
tool-using agents in several domains, every episode using all seven regions
(system, plan, user, tool_in, tool_out, retrieval, scratchpad), a
teacher-forced scratchpad continuation of about 230 tokens that refers back
to earlier regions, and one planted fact per region as a probe whose answer
is drawn per episode.

Every episode and the file as a whole are checked before anything is
written (check_probes, check_answer_spread); --check runs the same checks
on existing files.

Deterministic: the same arguments give byte-identical output. Standard
library only; token counts in the summary come from HF `tokenizers` when
--tokenizer names a tokenizer.json (otherwise they are estimates).

    python3 data/traces/generate.py --context 450 --episodes 24 --seed 450 \\
        --out data/traces/agent-450.jsonl --tokenizer PATH/tokenizer.json
    python3 data/traces/generate.py --episodes 2000 --seed 7 --context 450 \\
        --out train-450.jsonl            # a training corpus (not committed)
    python3 data/traces/generate.py --check data/traces/agent-450.jsonl
"""
import argparse
import collections
import json
import random
import re
import sys
import unicodedata

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
    probes = scenario["probes"]
    return {"id": eid, "messages": messages,
            "continuation": {"region": "scratchpad", "text": scenario["continuation"]},
            "probes": [{"region": p["region"], "question": p["question"], "answer": str(p["answer"])} for p in probes],
            "meta": {"domain": scenario["domain"], "generator": "data/traces/generate.py",
                     "probe_keys": {p["region"]: p["key"] for p in probes},
                     "answer_spaces": {p["region"]: getattr(p["answer"], "space", 1) for p in probes}}}


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


# ---- the probe checks --------------------------------------------------------------

# An answer must come from at least MIN_SPACE equally likely values, and in a
# file no (domain, region) slot with at least SHARE_MIN_EPISODES episodes may
# give one answer to more than MAX_SHARE of them: otherwise a model can
# answer without the context and a probe does not measure what the cache kept.
MIN_SPACE = 200
MAX_SHARE = 0.10
SHARE_MIN_EPISODES = 20
# How many words may stand between a key phrase and its answer ("badge
# number is 48213"): close enough for a small model to copy from.
MAX_KEY_GAP = 3


class ProbeError(AssertionError):
    pass


class ChanceCollision(ProbeError):
    """An answer occurs more than once: two drawn values (or a drawn value
    and fixed text) coincided; make_episode draws the episode again."""


def normalise(text):
    """As eval scores answers (memdecay-calibrate(1)): NFKC, case folding,
    every run of characters other than letters and digits one space, a space
    at both ends; so an occurrence is one of whole words."""
    words = re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()
    return f" {words} " if words else " "


def _count(needle, haystack):
    """Occurrences of normalised needle in normalised haystack."""
    n, at = 0, haystack.find(needle)
    while at >= 0:
        n, at = n + 1, haystack.find(needle, at + 1)
    return n


def _follows(answer, key, text):
    """Whether answer starts within MAX_KEY_GAP words after the (first) key
    phrase in text; all three normalised."""
    at = text.find(key)
    if at < 0:
        return False
    after = text[at + len(key) - 1:].split()[:MAX_KEY_GAP + len(answer.split())]
    return answer in " " + " ".join(after) + " "


def check_probes(episode):
    """Every planted answer occurs exactly once in the episode (prompt and
    continuation, as whole words ignoring case and punctuation, as eval
    matches answers), in its own region, and not in its question, so that a
    probe tests that region alone. With the episode's meta.probe_keys (the
    generator writes them), also: the key phrase occurs once in the episode,
    in the answer's region, the answer follows it within MAX_KEY_GAP words,
    and the question repeats it."""
    pieces = render(episode)
    by_region = {}
    for text, region in pieces:
        by_region.setdefault(region, []).append(text)
    region_text = {region: normalise("\n".join(texts)) for region, texts in by_region.items()}
    prompt = normalise("".join(text for text, _ in pieces))
    continuation = normalise(episode["continuation"]["text"])
    keys = (episode.get("meta") or {}).get("probe_keys") or {}
    eid = episode["id"]
    if sorted(region_text) != sorted(REGIONS) or sorted(p["region"] for p in episode["probes"]) != sorted(REGIONS):
        raise ProbeError(f"{eid}: regions {sorted(region_text)}, probes in {sorted(p['region'] for p in episode['probes'])}")
    for probe in episode["probes"]:
        home, answer = probe["region"], normalise(probe["answer"])
        if answer == " ":
            raise ProbeError(f"{eid}: {home} answer {probe['answer']!r} has no letters or digits")
        if _count(answer, region_text[home]) == 0:
            raise ProbeError(f"{eid}: {probe['answer']!r} is not in region {home}")
        if _count(answer, normalise(probe["question"])):
            raise ProbeError(f"{eid}: {home} answer {probe['answer']!r} is in its question")
        times = _count(answer, prompt) + _count(answer, continuation)
        if times != 1:
            where = [r for r in REGIONS if _count(answer, region_text[r])]
            where += ["continuation"] if _count(answer, continuation) else []
            raise ChanceCollision(f"{eid}: {home} answer {probe['answer']!r} occurs {times} times (in {', '.join(where)})")
        if home not in keys:
            continue
        key = normalise(keys[home])
        if _count(key, prompt) + _count(key, continuation) != 1:
            raise ProbeError(f"{eid}: {home} key {keys[home]!r} occurs {_count(key, prompt) + _count(key, continuation)} times")
        if not _count(key, region_text[home]) or not _follows(answer, key, region_text[home]):
            raise ProbeError(f"{eid}: {home} answer {probe['answer']!r} does not follow its key {keys[home]!r} in its region")
        if not _count(key, normalise(probe["question"])):
            raise ProbeError(f"{eid}: {home} question {probe['question']!r} does not repeat its key {keys[home]!r}")


def check_answer_spread(episodes):
    """Across a file: each (domain, region) slot's answers come from a
    declared space of at least MIN_SPACE values (meta.answer_spaces; a
    file without them is checked on its answers alone), and in a slot of at
    least SHARE_MIN_EPISODES episodes no answer takes more than MAX_SHARE of
    them. Returns the problems found, one line each."""
    answers = collections.defaultdict(collections.Counter)
    spaces = {}
    for episode in episodes:
        meta = episode.get("meta") or {}
        domain = meta.get("domain", "?")
        for probe in episode["probes"]:
            slot = (domain, probe["region"])
            answers[slot][normalise(probe["answer"])] += 1
            if "answer_spaces" in meta:
                space = meta["answer_spaces"].get(probe["region"], 1)
                spaces[slot] = min(spaces.get(slot, space), space)
    problems = []
    for slot in sorted(answers):
        name = "/".join(slot)
        if slot in spaces and spaces[slot] < MIN_SPACE:
            problems.append(f"{name}: answers drawn from {spaces[slot]} values, fewer than {MIN_SPACE}")
        n = sum(answers[slot].values())
        answer, top = answers[slot].most_common(1)[0]
        if n >= SHARE_MIN_EPISODES and top > MAX_SHARE * n:
            problems.append(f"{name}: answer {answer.strip()!r} in {top} of {n} episodes, more than {MAX_SHARE:.0%}")
    return problems


MAX_DRAWS = 10  # draws of one episode before a collision counts as built in


def make_episode(domain, rng, target, eid):
    """The episode and how many times it was drawn again after a chance
    collision of its drawn values."""
    for attempt in range(MAX_DRAWS):
        scenario = domain(rng, target)
        scenario["continuation"] = fit_continuation(scenario["continuation"], domains.CONTINUATION_FILLER + scenario.get("filler", []), rng)
        chosen = []
        for extra in scenario["extras"]:
            if estimate_tokens(prompt_text(build(scenario, chosen, eid))) >= target:
                break
            if estimate_tokens(prompt_text(build(scenario, chosen + [extra], eid))) <= target * 1.1:
                chosen.append(extra)  # else a shorter extra further down may still fit
        episode = build(scenario, chosen, eid)
        try:
            check_probes(episode)
        except ChanceCollision as collision:
            if attempt + 1 == MAX_DRAWS:
                raise ProbeError(f"{collision} (in each of {MAX_DRAWS} draws: not by chance)") from None
            continue
        return episode, attempt


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


def summary(episodes, tokenizer_path, out, redrawn=0):
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
    spaces = [space for ep in episodes for space in ep["meta"]["answer_spaces"].values()]
    print(f"probe answers: drawn from {min(spaces)} to {max(spaces):.3g} values each; "
          f"{redrawn} episode(s) drawn again after a chance collision of drawn values", file=out)


def check_files(paths):
    """--check: the probe checks on existing files; the exit status says
    whether they passed."""
    failed = False
    for path in paths:
        with open(path, encoding="utf-8") as f:
            episodes = [json.loads(line) for line in f if line.strip()]
        problems = []
        for episode in episodes:
            try:
                check_probes(episode)
            except ProbeError as error:
                problems.append(str(error))
        problems += check_answer_spread(episodes)
        note = "" if all("answer_spaces" in (ep.get("meta") or {}) for ep in episodes) else " (no declared answer spaces)"
        print(f"{path}: {len(episodes)} episodes, " + (f"{len(problems)} problem(s)" if problems else "probe checks passed") + note)
        for problem in problems:
            print(f"  {problem}")
        failed |= bool(problems)
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--context", type=int, default=450, help="target prompt length in tokens")
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--seed", type=int, default=450)
    parser.add_argument("--out", help="output .jsonl ('-' for stdout)")
    parser.add_argument("--tokenizer", help="a Qwen tokenizer.json, for real token counts in the summary")
    parser.add_argument("--quiet", action="store_true", help="no summary")
    parser.add_argument("--check", nargs="+", metavar="FILE", help="only check the probes of existing files")
    args = parser.parse_args(argv)
    if args.check:
        return check_files(args.check)
    if not args.out:
        parser.error("--out is required (or --check)")
    if args.context < 400 or args.episodes < 1:
        parser.error("--context must be at least 400 (the compact episodes are about 390 to 510 tokens) "
                     "and --episodes at least 1")
    rng = random.Random(args.seed)
    width = max(3, len(str(args.episodes - 1)))
    episodes, redrawn = [], 0
    for i in range(args.episodes):
        domain = domains.ALL[i % len(domains.ALL)]
        eid = f"ep{args.context}-{i:0{width}d}-{domain.__name__}"
        try:
            episode, again = make_episode(domain, random.Random(rng.getrandbits(64)), args.context, eid)
        except ProbeError as error:
            sys.exit(f"generate.py: {error}")
        episodes.append(episode)
        redrawn += again > 0
    problems = check_answer_spread(episodes)
    if problems:
        sys.exit("generate.py: probe answers a model could guess:\n  " + "\n  ".join(problems))
    lines = "".join(json.dumps(ep, ensure_ascii=False) + "\n" for ep in episodes)
    if args.out == "-":
        sys.stdout.write(lines)
    else:
        with open(args.out, "w", encoding="utf-8", newline="\n") as f:
            f.write(lines)
    if not args.quiet:
        summary(episodes, args.tokenizer, sys.stderr if args.out == "-" else sys.stdout, redrawn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
