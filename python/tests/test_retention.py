"""memdecay.retention: the mapping worked by hand (steps 1-4)."""

import unittest

from memdecay import config as mdconfig
from memdecay.retention import RetentionError, region_setting, retention_settings

from .util import hand_config

# The hand config: system pinned; user b 0.5, half-life 100 steps; tool_out
# b 0.25, 40 steps; scratchpad b 0.9, 20 steps. With step_ms 10:
#   system      P 100                          D null
#   user        P 1 + floor(98 * 0.5 + 0.5)  = 50, D 100 * 10 = 1000 ms
#   tool_out    P 1 + floor(24.5 + 0.5)      = 26, D 400 ms
#   scratchpad  P 1 + floor(88.2 + 0.5)      = 89, D 200 ms
CFG = mdconfig.parse(hand_config(), "hand.json")
PROMPT = ["system"] * 3 + ["user"] * 4 + ["tool_out"] * 3  # N = 10


class Step1(unittest.TestCase):
    def test_settings(self):
        self.assertEqual(region_setting(CFG, "system", 10), (100, None))
        self.assertEqual(region_setting(CFG, "user", 10), (50, 1000))
        self.assertEqual(region_setting(CFG, "tool_out", 10), (26, 400))
        self.assertEqual(region_setting(CFG, "scratchpad", 10), (89, 200))
        # a duration rounds half up and is at least 1 ms
        self.assertEqual(region_setting(CFG, "scratchpad", 0.0125), (89, 1))
        self.assertEqual(region_setting(CFG, "scratchpad", 0.025), (89, 1))
        self.assertEqual(region_setting(CFG, "scratchpad", 0.075), (89, 2))  # 1.5 -> 2


class TrtLLM(unittest.TestCase):
    def test_block_alignment(self):
        # B 4: block 0 [0, 4) holds system and user: the larger, system's;
        # block 1 [4, 8) user and tool_out: user's; block 2 [8, 10) tool_out.
        line, warnings = retention_settings(CFG, PROMPT, "scratchpad", "trtllm", 4, 10, "r1")
        self.assertEqual(warnings, [])
        self.assertEqual(line, {
            "id": "r1", "format": "trtllm", "prompt_tokens": 10, "block_size": 4,
            "kv_cache_retention_config": {
                "token_range_retention_configs": [
                    {"token_start": 0, "token_end": 4, "priority": 100, "duration_ms": None},
                    {"token_start": 4, "token_end": 8, "priority": 50, "duration_ms": 1000},
                    {"token_start": 8, "token_end": 10, "priority": 26, "duration_ms": 400}],
                "decode_retention_priority": 89, "decode_duration_ms": 200}})

    def test_blocks_merge(self):
        # B 8: block 0 [0, 8) system's, block 1 [8, 10) tool_out's; B 16: one
        # block, one range of system's setting over the whole prompt.
        line, _ = retention_settings(CFG, PROMPT, "scratchpad", "trtllm", 8, 10)
        r = line["kv_cache_retention_config"]["token_range_retention_configs"]
        self.assertEqual([(x["token_start"], x["token_end"], x["priority"]) for x in r],
                         [(0, 8, 100), (8, 10, 26)])
        line, _ = retention_settings(CFG, PROMPT, "scratchpad", "trtllm", 16, 10)
        r = line["kv_cache_retention_config"]["token_range_retention_configs"]
        self.assertEqual([(x["token_start"], x["token_end"], x["priority"]) for x in r], [(0, 10, 100)])

    def test_runs_input_equals_tokens(self):
        a = retention_settings(CFG, PROMPT, "scratchpad", "trtllm", 4, 10, "r", True)
        b = retention_settings(CFG, [("system", 0, 3), ("user", 3, 7), ("tool_out", 7, 10)],
                               "scratchpad", "trtllm", 4, 10, "r", True)
        self.assertEqual(a, b)
        self.assertEqual(a[0]["runs"], [{"region": "system", "start": 0, "end": 3},
                                        {"region": "user", "start": 3, "end": 7},
                                        {"region": "tool_out", "start": 7, "end": 10}])
        self.assertEqual(a[0]["decode_region"], "scratchpad")

    def test_default_block_size(self):
        line, _ = retention_settings(CFG, PROMPT, format="trtllm", step_ms=10)
        self.assertEqual(line["block_size"], 32)


class VLLM(unittest.TestCase):
    def test_clamp_decode(self):
        # The decode directive (scratchpad, P 89) follows tool_out's 26:
        # lowered to 26, with a warning naming the region.
        line, warnings = retention_settings(CFG, PROMPT, "scratchpad", "vllm", 4, 10, "r2")
        self.assertEqual(line["retention_directives"], [
            {"start": 0, "end": 4, "priority": 100, "duration": None},
            {"start": 4, "end": 8, "priority": 50, "duration": 1.0},
            {"start": 8, "end": 10, "priority": 26, "duration": 0.4},
            {"start": 10, "end": None, "priority": 26, "duration": 0.2}])
        self.assertEqual(warnings, ["request r2: region scratchpad tokens [10, end): priority 89 lowered to 26 "
                                    "(vLLM requires priorities non-increasing with position)"])

    def test_clamp_prompt(self):
        # tool_out (26) then user (50): user's range is lowered to 26, the
        # decode directive (89) too; priorities never rise with position.
        prompt = ["tool_out"] * 4 + ["user"] * 4
        line, warnings = retention_settings(CFG, prompt, "scratchpad", "vllm", 4, 10, "r3")
        self.assertEqual([d["priority"] for d in line["retention_directives"]], [26, 26, 26])
        self.assertEqual([d["duration"] for d in line["retention_directives"]], [0.4, 1.0, 0.2])
        self.assertEqual(len(warnings), 2)
        self.assertIn("region user tokens [4, 8): priority 50 lowered to 26", warnings[0])
        self.assertEqual(line["block_size"], 4)

    def test_default_block_size(self):
        line, _ = retention_settings(CFG, PROMPT, format="vllm", step_ms=10)
        self.assertEqual(line["block_size"], 16)


class OnePriority(unittest.TestCase):
    def test_sglang_dynamo(self):
        # (3 * 100 + 4 * 50 + 3 * 26) / 10 = 57.8 -> 58; no durations needed
        line, _ = retention_settings(CFG, PROMPT, "scratchpad", "sglang", 64, request_id="r4")
        self.assertEqual(line, {"id": "r4", "format": "sglang", "prompt_tokens": 10, "block_size": 1,
                                "priority": 58})
        line, _ = retention_settings(CFG, PROMPT, "scratchpad", "dynamo")
        self.assertEqual(line["nvext"], {"agent_hints": {"priority": 58}})


class BadInput(unittest.TestCase):
    def test_errors(self):
        with self.assertRaisesRegex(RetentionError, "region 'plan' is not in the config"):
            retention_settings(CFG, ["plan"], format="sglang")
        with self.assertRaisesRegex(RetentionError, "region 'retrieval' is not in the config"):
            retention_settings(CFG, PROMPT, "retrieval", "sglang")
        with self.assertRaisesRegex(RetentionError, "block size 0"):
            retention_settings(CFG, PROMPT, format="trtllm", block_size=0, step_ms=10)
        with self.assertRaisesRegex(RetentionError, "needs step_ms"):
            retention_settings(CFG, PROMPT, format="vllm")
        with self.assertRaisesRegex(RetentionError, "no prompt tokens"):
            retention_settings(CFG, [], format="sglang")
        with self.assertRaisesRegex(RetentionError, "format 'x'"):
            retention_settings(CFG, PROMPT, format="x")
        with self.assertRaisesRegex(RetentionError, "without gaps"):
            retention_settings(CFG, [("user", 0, 3), ("system", 4, 6)], format="sglang")


if __name__ == "__main__":
    unittest.main()
