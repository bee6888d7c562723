"""memdecay.config: what md_policy_config_load accepts and refuses, errors
naming the field as the runtime's do."""

import copy
import json
import os
import unittest

from memdecay import config as mdconfig

from .util import hand_config, write_json

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
GOLDEN = os.path.join(ROOT, "data", "golden", "qwen2-tiny-agent-450.json")


class Load(unittest.TestCase):
    def test_golden(self):
        c = mdconfig.load(GOLDEN)
        self.assertEqual(c.page_size, 16)
        self.assertEqual(c.region_names, ["system", "plan", "user", "tool_in", "tool_out", "retrieval",
                                          "scratchpad"])
        self.assertTrue(c.regions[0].pinned)
        self.assertTrue(c.has_pooled)
        self.assertEqual(c.region_index("user"), 2)
        self.assertEqual(c.region_index("nope"), -1)

    def refused(self, mutate, field, pattern, text=None):
        doc = hand_config()
        mutate(doc)
        path = write_json(doc, text)
        try:
            with self.assertRaises(mdconfig.ConfigError) as cm:
                mdconfig.load(path)
        finally:
            os.unlink(path)
        self.assertEqual(cm.exception.field, field)
        self.assertRegex(str(cm.exception), pattern)
        self.assertTrue(str(cm.exception).startswith(path + ": "))

    def test_refused(self):
        def set_(path, value):
            def f(doc):
                d = doc
                for k in path[:-1]:
                    d = d[k]
                if value is KeyError:
                    del d[path[-1]]
                else:
                    d[path[-1]] = value
            return f
        cases = [
            (("policy", "attention_norm", "kappa"), KeyError, "policy.attention_norm.kappa", "missing"),
            (("policy", "attention_norm", "kappa"), None, "policy.attention_norm.kappa", "null .*memdecay needs it"),
            (("policy", "attention_norm", "kappa"), 0, "policy.attention_norm.kappa", "0 is not a positive number"),
            (("policy", "alpha"), None, "policy.alpha", "null"),
            (("policy", "alpha"), -1, "policy.alpha", "-1 is not a number >= 0"),
            (("policy", "page_size"), 16.0, "policy.page_size", "expected an integer, found a fraction"),
            (("policy", "page_size"), 0, "policy.page_size", "0 is not a positive integer"),
            (("policy", "page_size"), True, "policy.page_size", "found a boolean"),
            (("policy", "tau"), "1", "policy.tau", "expected a number, found a string"),
            (("policy", "ewma_beta"), 1.0, "policy.ewma_beta", r"not in \[0, 1\)"),
            (("regions", "user", "base_priority"), 1.5, "regions.user.base_priority", r"not a number in \[0, 1\]"),
            (("regions", "user", "lambda"), None, "regions.user.lambda", "null .* unpinned region"),
            (("regions", "user", "lambda"), 0.01, "regions.user.lambda", "contradicts its half_life 100"),
            (("regions", "user", "pinned"), 1, "regions.user.pinned", "expected true or false"),
            (("regions", "user", "half_life_ci"), [1], "regions.user.half_life_ci", r"\[lower, upper\]"),
            (("format",), "memdecay-config/2", "format", "not supported"),
            (("pooled",), {"lambda": -1, "half_life": None}, "pooled.lambda", "-1 is not a number >= 0"),
            (("policy",), KeyError, "policy", "missing"),
        ]
        for path, value, field, pattern in cases:
            with self.subTest(path=path, value=value):
                self.refused(set_(path, value), field, pattern)

    def test_pinned_null_lambda_and_no_pooled(self):
        c = mdconfig.parse(hand_config(), "x")  # system: pinned, lambda null; no pooled
        self.assertFalse(c.has_pooled)

    def test_bad_json(self):
        for text in ('{"format": 1, "format": 2}', '{"a": NaN}', "[1,"):
            path = write_json(None, text)
            try:
                with self.assertRaises(mdconfig.ConfigError):
                    mdconfig.load(path)
            finally:
                os.unlink(path)
        self.assertRaises(mdconfig.ConfigError, mdconfig.parse, [], "x")


if __name__ == "__main__":
    unittest.main()
