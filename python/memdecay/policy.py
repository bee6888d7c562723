"""The eviction policies of the MemDecay reference runtime, in Python.

runtime/policy.h (the C header) is the specification; this module is a
second implementation of it, checked against the C one (runtime/policy.c,
runtime/policies/) by the fixture test tests/python: on recorded attention
the two choose the same pages at every eviction point and give the same
scores. The arithmetic follows the C code operation by operation, in double
precision, with the attention taken as float32 as the C runtime takes it, so
that the scores agree to rounding and ties break the same way.

Time: one step per appended token. Attention: observe(received, n_queries)
after the forward pass of the last n_queries appended tokens, received[s]
for each cached token in position order (each query's softmax row, column
summed over the chunk's queries, averaged over heads and captured layers).
From it, per cached token: refresh when r >= tau, the EWMAs e (of r) and
e_raw (of w), H2O's accumulator. Scores (memdecay):
b_r exp(-lambda_r dt) + alpha e / kappa, +inf for a pinned region.
Eviction: whole pages (position // page_size); never the newest token's
page; ties by page index, oldest first.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence, Union

import numpy as np

from .config import EWMA_BETA_DEFAULT, KAPPA_DEFAULT, PAGE_SIZE_DEFAULT, TAU_DEFAULT, Config

_M64 = (1 << 64) - 1


class PolicyError(ValueError):
    """Bad arguments to a policy call (md_policy_* returning MD_E_INVALID):
    nothing was changed."""


# ---- the classes ----------------------------------------------------------------
# Each class of runtime/policies/ as the score of a token and the order the
# evictable pages go. uses_regions: the class needs a config, every token a
# region index of it, and pages holding a pinned region's token stay.

_RATE_REGION, _RATE_POOLED, _RATE_NONE = 0, 1, 2


class _Class:
    name = ""
    uses_regions = False
    scored = False

    def init(self, p: "Policy") -> None:
        pass

    def reset(self, p: "Policy", seed: int) -> None:
        pass

    def on_append(self, p: "Policy") -> None:
        pass

    def on_observe(self, p: "Policy", received: list) -> None:
        pass

    def score(self, p: "Policy", i: int) -> float:
        return 0.0

    def choose(self, p: "Policy", pages: list, budget: int, excess: int) -> Optional[list]:
        """Indices into `pages` of the evictable pages in the order they go;
        None: never evicts (full)."""
        return None


def _order_by_score(pages: list, begin: int, end: int) -> list:
    # md_policy_order_by_score: lowest score first, ties by page index.
    cand = [(pages[j].score, pages[j].page, j) for j in range(begin, end) if pages[j].evictable]
    cand.sort(key=lambda c: (c[0], c[1]))
    return [c[2] for c in cand]


def _memdecay_score(p: "Policy", i: int, rate: int, attention: bool) -> float:
    # md_memdecay_score (runtime/policies/memdecay.c), the same operations.
    r = p._region[i]
    if p._pinned[r]:
        return math.inf
    decay = p._b[r]
    if rate != _RATE_NONE:
        lam = p._pooled_lambda if rate == _RATE_POOLED else p._lambda[r]
        decay *= math.exp(-lam * float(p._step - p._refresh[i]))
    return decay + p._alpha * (p._e[i] / p._kappa) if attention else decay


class _Full(_Class):
    name = "full"


class _ByScore(_Class):
    scored = True

    def choose(self, p, pages, budget, excess):
        return _order_by_score(pages, 0, len(pages))


class _MemDecay(_ByScore):
    name = "memdecay"
    uses_regions = True

    def score(self, p, i):
        return _memdecay_score(p, i, _RATE_REGION, True)


class _MemDecayRaw(_ByScore):
    name = "memdecay-raw"
    uses_regions = True

    def score(self, p, i):
        return _memdecay_score(p, i, _RATE_REGION, False) + p._alpha * p._e_raw[i]


class _MemDecayShared(_ByScore):
    name = "memdecay-shared"
    uses_regions = True

    def init(self, p):
        if not p._has_pooled:
            raise PolicyError("policy memdecay-shared: pooled.lambda: the config has no pooled fit (a "
                              "config written before fit computed one): fit the events again; "
                              "memdecay-shared needs it")
        if math.isnan(p._pooled_lambda):
            raise PolicyError("policy memdecay-shared: pooled.lambda: null (not estimable: no observed "
                              "event among the unpinned regions); memdecay-shared needs it")

    def score(self, p, i):
        return _memdecay_score(p, i, _RATE_POOLED, True)


class _MemDecayNoDecay(_ByScore):
    name = "memdecay-nodecay"
    uses_regions = True

    def score(self, p, i):
        return _memdecay_score(p, i, _RATE_NONE, True)


class _MemDecayNoAttn(_ByScore):
    name = "memdecay-noattn"
    uses_regions = True

    def score(self, p, i):
        return _memdecay_score(p, i, _RATE_REGION, False)


class _H2O(_Class):
    name = "h2o"
    scored = True

    def score(self, p, i):
        return p._acc[i]

    def choose(self, p, pages, budget, excess):
        recent = budget // 2 + budget % 2  # ceil(budget / 2) most recent pages kept
        return _order_by_score(pages, 0, len(pages) - recent) if len(pages) > recent else []


class _Streaming(_Class):
    name = "streaming"

    def reset(self, p, seed):
        p._sinks_seen = 0
        p._sink_last = -1

    def on_append(self, p):
        if p._sinks_seen < p.sink_tokens:
            p._sinks_seen += 1
            p._sink_last = p._pos[-1]

    def choose(self, p, pages, budget, excess):
        out = []
        for j, pg in enumerate(pages):
            sink = p._sink_last >= 0 and pg.page <= p._sink_last // p.page_size
            if pg.evictable and not sink:
                out.append(j)  # oldest first
        return out


class _StreamingPinned(_Streaming):
    name = "streaming-pinned"
    uses_regions = True


class _Tova(_ByScore):
    name = "tova"

    def reset(self, p, seed):
        p._tova = {}

    def on_observe(self, p, received):
        p._tova = dict(zip(p._pos, received))

    def score(self, p, i):
        return p._tova.get(p._pos[i], 0.0)


def _splitmix64(p: "Policy") -> int:
    p._rng = (p._rng + 0x9E3779B97F4A7C15) & _M64
    z = p._rng
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


class _Random(_Class):
    name = "random"

    def reset(self, p, seed):
        p._rng = seed & _M64

    def choose(self, p, pages, budget, excess):
        order = [j for j, pg in enumerate(pages) if pg.evictable]
        n = len(order)
        for k in range(min(n, excess)):  # a partial Fisher-Yates shuffle
            m = n - k
            threshold = ((1 << 64) - m) % m  # 2^64 mod m: rejection, no modulo bias
            while True:
                x = _splitmix64(p)
                if x >= threshold:
                    break
            pick = k + x % m
            order[k], order[pick] = order[pick], order[k]
        return order


CLASSES = {c.name: c for c in (_Full, _Random, _Streaming, _H2O, _Tova, _MemDecay, _MemDecayRaw,
                                _MemDecayShared, _MemDecayNoDecay, _MemDecayNoAttn, _StreamingPinned)}
"""The policies this module implements, by their runtime names (snapkv is
not one of them)."""


class _Page:
    __slots__ = ("page", "first", "count", "evictable", "score")

    def __init__(self, page, first):
        self.page, self.first, self.count, self.evictable, self.score = page, first, 0, True, 0.0


class Policy:
    """One sequence's eviction state under one policy (md_policy).

    config: a memdecay.config.Config; needed by the region-aware policies
    (memdecay and its ablations, streaming-pinned). page_size: 0 for the
    config's (16 without one). seed: random's. sink_tokens: streaming's,
    0 for 4.
    """

    def __init__(self, name: str = "memdecay", config: Optional[Config] = None, page_size: int = 0,
                 seed: int = 0, sink_tokens: int = 0):
        cls = CLASSES.get(name)
        if cls is None:
            raise PolicyError(f"policy {name!r}: not implemented here (have: {', '.join(CLASSES)})")
        self._cls = cls()
        self.name = name
        if self._cls.uses_regions and config is None:
            raise PolicyError(f"policy {name}: needs a memdecay.json config")
        if page_size < 0:
            raise PolicyError(f"policy {name}: page_size {page_size} is negative")
        if sink_tokens < 0:
            raise PolicyError(f"policy {name}: sink_tokens {sink_tokens} is negative")
        if config is not None:
            config.check("")
        self.config = config
        self.page_size = page_size or (config.page_size if config is not None else PAGE_SIZE_DEFAULT)
        self.sink_tokens = sink_tokens or 4
        if config is not None:
            self._b = [r.base_priority for r in config.regions]
            self._lambda = [r.lambda_ for r in config.regions]
            self._pinned = [r.pinned for r in config.regions]
            self._tau, self._beta = config.tau, config.ewma_beta
            self._alpha, self._kappa = config.alpha, config.kappa
            self._has_pooled = config.has_pooled
            self._pooled_lambda = config.pooled_lambda if config.has_pooled else math.nan
        else:
            # h2o and the others need no constants; tau and beta still drive
            # the (unused) refresh and EWMA bookkeeping: the config defaults.
            self._b, self._lambda, self._pinned = [], [], []
            self._tau, self._beta, self._alpha, self._kappa = TAU_DEFAULT, EWMA_BETA_DEFAULT, 0.0, KAPPA_DEFAULT
            self._has_pooled, self._pooled_lambda = False, math.nan
        self._cls.init(self)
        self.reset(seed)

    # ---- sequence state ---------------------------------------------------------

    def reset(self, seed: int = 0) -> None:
        """Forgets every token: a new sequence (t = 0), random reseeded."""
        self._pos, self._region, self._refresh = [], [], []
        self._e, self._e_raw, self._acc = [], [], []
        self._step = 0
        self._last_position = -1
        self._pages = 0
        self._pending = 0
        self._first_pending = 0
        self._cls.reset(self, seed)

    def region_index(self, region: Union[int, str, None]) -> int:
        if region is None:
            return -1
        if isinstance(region, str):
            i = self.config.region_index(region) if self.config is not None else -1
            if i < 0:
                raise PolicyError(f"policy {self.name}: region {region!r} is not in the config")
            return i
        return int(region)

    def append(self, position: int, region: Union[int, str, None] = -1) -> None:
        """A decoded token enters the cache at original position `position`
        (strictly increasing since the last reset), in `region` (an index of
        the config's regions or a name; -1/None for the classes without
        regions). One step: t counts decoded tokens (runtime/policy.h, Time)."""
        self._append(position, region, True)

    def append_prompt(self, position: int, region: Union[int, str, None] = -1) -> None:
        """The same for a prompt token (one of a prefilled chunk): born at the
        current step, which does not move."""
        self._append(position, region, False)

    def _append(self, position, region, decoded: bool) -> None:
        position = int(position)
        region = self.region_index(region)
        n_regions = len(self._b)
        if position < 0 or position <= self._last_position:
            raise PolicyError(f"policy {self.name}: position {position} after {self._last_position} "
                              "(positions must increase strictly from 0)")
        if self._cls.uses_regions:
            if region < 0 or region >= n_regions:
                raise PolicyError(f"policy {self.name}: region {region} is not an index of the config's "
                                  f"{n_regions} regions")
        elif region < -1 or (self.config is not None and region >= n_regions):
            raise PolicyError(f"policy {self.name}: region {region} is neither -1 nor an index of the "
                              f"config's {n_regions} regions")
        if not self._pos or self._pos[-1] // self.page_size != position // self.page_size:
            self._pages += 1
        if decoded:
            self._step += 1
        self._pos.append(position)
        self._region.append(region)
        self._refresh.append(self._step)  # born now: dt = 0
        self._e.append(0.0)
        self._e_raw.append(0.0)
        self._acc.append(0.0)
        if self._pending == 0:
            self._first_pending = position
        self._pending += 1
        self._last_position = position
        self._cls.on_append(self)

    def observe(self, received: Sequence[float], n_queries: int = 1) -> None:
        """The attention of the forward pass of the last n_queries appended
        tokens: received[s] per cached token, position order."""
        n = len(self._pos)
        # The runtime takes float32 (md_policy_observe's const float *).
        a32 = np.asarray(received, dtype=np.float32).reshape(-1)
        if a32.shape[0] != n:
            raise PolicyError(f"policy {self.name}: attention on {a32.shape[0]} tokens, but {n} are cached")
        if n_queries < 1 or n_queries > self._pending:
            raise PolicyError(f"policy {self.name}: {n_queries} queries, but {self._pending} tokens were "
                              "appended (and are still cached) since the last observe")
        bad = ~(np.isfinite(a32) & (a32 >= 0))
        if bad.any():
            s = int(np.argmax(bad))
            raise PolicyError(f"policy {self.name}: received[{s}] = {float(a32[s]):g} is not a number >= 0")
        a = a32.astype(np.float64).tolist()
        # suffix[k] = sum over the chunk's queries j >= k of 1/v_j, v_j = n - n_q + j + 1;
        # u_s = suffix[max(s - (n - n_q), 0)].
        first_query = n - n_queries
        suffix = [0.0] * (n_queries + 1)
        for k in range(n_queries - 1, -1, -1):
            suffix[k] = suffix[k + 1] + 1.0 / float(first_query + k + 1)
        beta, tau, step = self._beta, self._tau, self._step
        e, e_raw, acc, refresh = self._e, self._e_raw, self._acc, self._refresh
        for s in range(n):
            k = s - first_query if s > first_query else 0
            x = a[s]
            r = x / suffix[k]
            w = x / float(n_queries - k)
            if r >= tau:
                refresh[s] = step
            e[s] = beta * e[s] + (1 - beta) * r
            e_raw[s] = beta * e_raw[s] + (1 - beta) * w
            acc[s] += x
        self._pending = 0
        self._cls.on_observe(self, a)

    # ---- pages and eviction -------------------------------------------------------

    def _token_score(self, i: int) -> float:
        return self._cls.score(self, i) if self._cls.scored else 0.0

    def _build_pages(self) -> list:
        pages = []
        pins = self._cls.uses_regions
        i, n = 0, len(self._pos)
        while i < n:
            page = self._pos[i] // self.page_size
            pg = _Page(page, i)
            total = 0.0
            while i < n and self._pos[i] // self.page_size == page:
                pg.count += 1
                if pins and self._pinned[self._region[i]]:
                    pg.evictable = False
                if self._cls.scored:
                    total += self._token_score(i)
                i += 1
            pg.score = total / float(pg.count) if pg.evictable and self._cls.scored else 0.0
            pages.append(pg)
        if pages:
            pages[-1].evictable = False  # the newest token's page is being written
        return pages

    def evict(self, budget_pages: int) -> list:
        """Evicts whole pages until at most budget_pages pages hold cached
        tokens, as far as the policy allows; returns the evicted positions,
        ascending."""
        budget_pages = int(budget_pages)
        if budget_pages < 0:
            raise PolicyError(f"policy {self.name}: budget of {budget_pages} pages")
        excess = self._pages - budget_pages
        if excess <= 0:
            return []
        pages = self._build_pages()
        order = self._cls.choose(self, pages, budget_pages, excess)
        if not order:
            return []
        chosen = set(order[:min(excess, len(order))])
        keep = []
        removed = []
        for j, pg in enumerate(pages):
            rng = range(pg.first, pg.first + pg.count)
            if j in chosen:
                removed.extend(self._pos[i] for i in rng)
            else:
                keep.extend(rng)
        for pos in removed:
            if self._pending > 0 and pos >= self._first_pending:
                self._pending -= 1
        for attr in ("_pos", "_region", "_refresh", "_e", "_e_raw", "_acc"):
            old = getattr(self, attr)
            setattr(self, attr, [old[i] for i in keep])
        self._pages -= len(chosen)
        return removed

    # ---- queries ------------------------------------------------------------------

    @property
    def cached_tokens(self) -> int:
        return len(self._pos)

    @property
    def cached_pages(self) -> int:
        return self._pages

    @property
    def step(self) -> int:
        return self._step

    @property
    def positions(self) -> list:
        """The cached positions, ascending (= cache slot order)."""
        return list(self._pos)

    def _index(self, position: int) -> int:
        import bisect
        i = bisect.bisect_left(self._pos, position)
        return i if i < len(self._pos) and self._pos[i] == position else -1

    def token_score(self, position: int) -> float:
        """The score of the cached token at `position` at the current step;
        NaN when not cached."""
        i = self._index(position)
        return self._token_score(i) if i >= 0 else math.nan

    def page_score(self, page: int) -> float:
        """The mean of page `page`'s cached tokens' scores; NaN when none."""
        import bisect
        lo = bisect.bisect_left(self._pos, page * self.page_size)
        total, count = 0.0, 0
        i = lo
        while i < len(self._pos) and self._pos[i] < (page + 1) * self.page_size:
            total += self._token_score(i)
            count += 1
            i += 1
        return total / float(count) if count else math.nan

    def token_scores(self) -> list:
        """Every cached token's score, position order."""
        return [self._token_score(i) for i in range(len(self._pos))]
