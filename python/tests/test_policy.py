"""memdecay.policy by hand (the exact agreement with the C runtime is
tests/python/test_replay.py's)."""

import math
import unittest

from memdecay import config as mdconfig
from memdecay.policy import Policy, PolicyError

from .util import hand_config

CFG = mdconfig.parse(hand_config(), "hand.json")  # page_size 4, tau 1, beta 0.5, alpha 0.5, kappa 2


class MemDecay(unittest.TestCase):
    def test_scores_refresh_and_order(self):
        p = Policy("memdecay", CFG)
        regions = ["system"] * 4 + ["user"] * 4 + ["tool_out"] * 4 + ["user"]
        for pos, g in enumerate(regions[:12]):
            p.append(pos, g)
        # a chunk of 12 queries with uniform rows, scaled by 1.001: token s
        # receives 1.001 u_s (u_s = sum over queries j >= s of 1/(j+1)), so
        # r_s = 1.001 >= tau (exactly 1 could round below it in float32):
        # every token refreshed at t = 12, e = 0.5 * 0 + 0.5 * 1.001
        recv = [1.001 * sum(1.0 / (j + 1) for j in range(s, 12)) for s in range(12)]
        p.observe(recv, 12)
        self.assertTrue(math.isinf(p.token_score(0)))  # pinned
        # user at dt 0: 0.5 * 1 + 0.5 * 0.5005 / 2 = 0.625125; tool_out 0.25 + 0.125125
        self.assertAlmostEqual(p.token_score(4), 0.625125, places=6)  # float32 attention
        self.assertAlmostEqual(p.token_score(8), 0.375125, places=6)
        p2 = Policy("memdecay", CFG)  # not refreshed (r < tau): dt = 12 - 5 for token 4
        for pos, g in enumerate(regions[:12]):
            p2.append(pos, g)
        p2.observe([0.5 * x for x in recv], 12)
        self.assertAlmostEqual(p2.token_score(4), 0.5 * math.exp(-CFG.regions[1].lambda_ * 7)
                               + 0.5 * (0.5 * 0.5005) / 2, places=6)
        p.append(12, "user")  # page 3, the newest: never evictable
        self.assertEqual(p.cached_pages, 4)
        # budget 3: the lowest evictable page goes: tool_out's (page 2)
        self.assertEqual(p.evict(3), [8, 9, 10, 11])
        self.assertEqual(p.positions, [0, 1, 2, 3, 4, 5, 6, 7, 12])
        # budget 0: only page 1 is evictable (0 pinned, 3 newest)
        self.assertEqual(p.evict(0), [4, 5, 6, 7])
        self.assertEqual(p.cached_pages, 2)
        self.assertEqual(p.evict(0), [])

    def test_ties_oldest_first(self):
        p = Policy("memdecay-noattn", CFG)
        for pos in range(12):
            p.append(pos, "user")
        # unobserved tokens: dt differs by birth, so the oldest page decays most
        self.assertEqual(p.evict(2), [0, 1, 2, 3])
        q = Policy("memdecay-nodecay", CFG)
        for pos in range(12):
            q.append(pos, "user")
        # equal scores b_r: the tie goes oldest first
        self.assertEqual(q.evict(1), [0, 1, 2, 3, 4, 5, 6, 7])

    def test_bad_calls(self):
        p = Policy("memdecay", CFG)
        p.append(5, "user")
        self.assertRaises(PolicyError, p.append, 5, "user")
        self.assertRaises(PolicyError, p.append, 6, "plan")
        self.assertRaises(PolicyError, p.observe, [1.0, 1.0], 1)
        self.assertRaises(PolicyError, p.observe, [1.0], 2)
        self.assertRaises(PolicyError, p.observe, [float("nan")], 1)
        self.assertRaises(PolicyError, p.evict, -1)
        self.assertRaises(PolicyError, Policy, "memdecay")
        self.assertRaises(PolicyError, Policy, "snapkv", CFG)
        self.assertRaises(PolicyError, Policy, "memdecay-shared", CFG)  # no pooled fit


class Baselines(unittest.TestCase):
    def test_h2o_streaming(self):
        h = Policy("h2o", page_size=1)
        for pos in range(6):
            h.append(pos)
        h.observe([5, 1, 3, 0.5, 2, 1], 6)
        # budget 4: the 2 newest kept; of positions 0..3 the lightest go
        self.assertEqual(h.evict(4), [1, 3])
        s = Policy("streaming", page_size=2, sink_tokens=2)
        for pos in range(10):
            s.append(pos)
        self.assertEqual(s.evict(3), [2, 3, 4, 5])


if __name__ == "__main__":
    unittest.main()
