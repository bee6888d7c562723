#!/usr/bin/env python3
"""data/traces/generate.py: the shipped traces are exactly what it writes
(the README's commands, without --tokenizer, which only changes the
summary), they pass its probe checks (--check), and the checks fail where
a probe would not measure the cache:

- check_probes: an answer restated in the continuation, in another region,
  in its question, missing from its region; a key phrase that occurs twice
  or that the question does not repeat; an answer too far from its key;
- check_answer_spread and the generator: a fixed answer (a plain string: a
  draw space of 1) fails even in a short file; a fixed answer declared with
  a large space fails once its slot has 20 episodes, on the share of the
  most common answer.

Standard library only, like the generator.
"""
import contextlib
import copy
import filecmp
import io
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("MD_SOURCE_ROOT") or os.path.dirname(os.path.dirname(HERE))
TRACES = os.path.join(ROOT, "data", "traces")
sys.path.insert(0, TRACES)
import domains  # noqa: E402
import generate  # noqa: E402

failures = 0


def check(condition, message):
    global failures
    if not condition:
        failures += 1
        print(f"FAIL: {message}")


def quiet(function, *args):
    """function(*args) with its output captured: (result or SystemExit
    message, output)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            result = function(*args)
        except SystemExit as exit_:
            result = exit_.code
    return result, out.getvalue()


def rejects(episode, what, expected):
    """check_probes must refuse episode with a message containing expected."""
    try:
        generate.check_probes(episode)
    except generate.ProbeError as error:
        check(expected in str(error), f"{what}: message {str(error)!r} lacks {expected!r}")
        return
    check(False, f"{what}: check_probes accepted it")


def shipped_files_are_the_generators_output(work):
    for context in (450, 1700):
        name = f"agent-{context}.jsonl"
        out = os.path.join(work, name)
        code, log = quiet(generate.main, ["--context", str(context), "--episodes", "24", "--seed", str(context),
                                          "--out", out, "--quiet"])
        check(code == 0, f"{name}: the generator failed: {code} {log}")
        check(os.path.exists(out) and filecmp.cmp(out, os.path.join(TRACES, name), shallow=False),
              f"{name}: the generator writes different bytes (regenerate with the README's command)")
    code, log = quiet(generate.main, ["--check"] + [os.path.join(TRACES, f"agent-{c}.jsonl") for c in (450, 1700)])
    check(code == 0 and log.count("probe checks passed") == 2, f"--check on the shipped files: {code} {log}")


def check_probes_fails():
    with open(os.path.join(TRACES, "agent-450.jsonl"), encoding="utf-8") as f:
        episode = json.loads(f.readline())
    generate.check_probes(episode)  # the unmodified episode passes
    by_region = {p["region"]: p for p in episode["probes"]}
    keys = episode["meta"]["probe_keys"]

    bad = copy.deepcopy(episode)
    bad["continuation"]["text"] += " As a reminder: " + by_region["tool_out"]["answer"] + "."
    rejects(bad, "an answer restated in the continuation", "occurs 2 times (in tool_out, continuation)")

    bad = copy.deepcopy(episode)
    bad["messages"][0]["content"] += " Note " + by_region["retrieval"]["answer"] + "."
    rejects(bad, "an answer in a second region", "occurs 2 times (in system, retrieval)")

    bad = copy.deepcopy(episode)
    probe = next(p for p in bad["probes"] if p["region"] == "user")
    probe["question"] += " Is it " + probe["answer"] + "?"
    rejects(bad, "an answer in its question", "is in its question")

    bad = copy.deepcopy(episode)
    next(p for p in bad["probes"] if p["region"] == "plan")["answer"] = "XQ-0000"
    rejects(bad, "an answer missing from its region", "is not in region plan")

    bad = copy.deepcopy(episode)
    bad["continuation"]["text"] += f" The {keys['system']} matters."
    rejects(bad, "a key phrase twice", f"system key {keys['system']!r} occurs 2 times")

    bad = copy.deepcopy(episode)
    next(p for p in bad["probes"] if p["region"] == "tool_in")["question"] = "What did the agent search for?"
    rejects(bad, "a question without its key", "does not repeat its key")

    bad = copy.deepcopy(episode)
    system = bad["messages"][0]
    answer = by_region["system"]["answer"]
    system["content"] = system["content"].replace(answer, "well above one hour, namely " + answer)
    rejects(bad, "an answer far from its key", "does not follow its key")


def with_fixed_answer(space):
    """domains.travel with the retrieval answer (the change fee) replaced
    by the same value in every episode, declared with `space` values (None:
    a plain string)."""
    travel = domains.travel

    def replace(value, old, new):
        if isinstance(value, str):  # whole words: "87 EUR" is not in "387 EUR"
            return re.sub(r"(?<![\w.])" + re.escape(old) + r"(?!\w)", new, value)
        if isinstance(value, (list, tuple)):
            return type(value)(replace(v, old, new) for v in value)
        if isinstance(value, dict):
            return {k: replace(v, old, new) for k, v in value.items()}
        return value

    def fixed(r, target):
        scenario = travel(r, target)
        probe = next(p for p in scenario["probes"] if p["region"] == "retrieval")
        new = "1234 EUR" if space is None else domains.Drawn("1234 EUR", space)
        probes = scenario.pop("probes")
        scenario = replace(scenario, str(probe["answer"]), "1234 EUR")
        probe["answer"] = new
        scenario["probes"] = probes
        return scenario

    fixed.__name__ = "travel"
    return fixed


def fixed_answers_fail(work):
    saved = list(domains.ALL)
    out = os.path.join(work, "fixed.jsonl")
    try:
        domains.ALL[0] = with_fixed_answer(None)
        code, log = quiet(generate.main, ["--context", "450", "--episodes", "24", "--seed", "450", "--out", out, "--quiet"])
        check(isinstance(code, str) and "travel/retrieval: answers drawn from 1 values, fewer than 200" in code,
              f"a fixed answer in 3 episodes: {code!r} {log}")
        check(not os.path.exists(out), "a failed check still wrote the file")

        domains.ALL[0] = with_fixed_answer(10 ** 6)
        code, log = quiet(generate.main, ["--context", "450", "--episodes", "160", "--seed", "7", "--out", out, "--quiet"])
        check(isinstance(code, str) and "travel/retrieval: answer '1234 eur' in 20 of 20 episodes, more than 10%" in code,
              f"a fixed answer declared with a large space: {code!r} {log}")
    finally:
        domains.ALL[:] = saved

    # On answers alone (no declared spaces, as in files of other generators).
    episodes = [{"meta": {"domain": "d"}, "probes": [{"region": "user", "answer": str(k % 9)}]} for k in range(40)]
    check(generate.check_answer_spread(episodes) == ["d/user: answer '0' in 5 of 40 episodes, more than 10%"],
          f"check_answer_spread on 9 values: {generate.check_answer_spread(episodes)}")
    episodes = [{"meta": {"domain": "d"}, "probes": [{"region": "user", "answer": str(k % 19)}]} for k in range(19)]
    check(generate.check_answer_spread(episodes) == [], "check_answer_spread: fewer than 20 episodes are not judged on shares")


def main():
    with tempfile.TemporaryDirectory() as work:
        shipped_files_are_the_generators_output(work)
        check_probes_fails()
        fixed_answers_fail(work)
    print("test_generator: " + ("OK" if not failures else f"{failures} failure(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
