"""MemDecayPress: MemDecay's eviction inside Hugging Face transformers,
through NVIDIA's kvpress (PyPI kvpress 0.5.5).

The press hooks every attention layer (kvpress's BasePress.forward_hook,
registered by `with press(model):`). Each layer's hook takes the layer's
attention weights (eager attention: shape [batch, heads, queries, keys]),
averages them over heads and sums them over the forward pass's queries: the
attention each cached token received, as our engine captures it. The last
layer's hook averages that over the layers, feeds it to memdecay.policy (the
same core that tests/python checks against the C runtime, so the same
formulas decide: refresh at r >= tau, the EWMA, b_r exp(-lambda_r dt) +
alpha e / kappa, pinned pages kept, whole pages lowest score first), and
drops the evicted positions' keys and values from every layer's cache. One
forward pass is one observe call and one eviction point, as in eval: a
prompt chunk (or generate's whole prompt), then every decode step.

Region labels are per example: set `press.regions` (the region name of each
prompt token, template tokens included) before each sequence; tokens past
its end (decoded ones) take `decode_region`. The prompt's tokens enter the
policy as prompt tokens (born at the current step), the others as decoded
tokens (one step each: the decay counts decode steps, runtime/policy.h,
Time); `prompt_tokens` sets where the prompt ends when `regions` labels
decoded tokens too (default: len(regions)). A forward pass whose
cache_position starts at 0 begins a new sequence.

Kept tokens keep the rotary positions they were written with (generate's
cache_position counts on from the original length): as in our engine.

What differs from our engine: the attention comes from HF's eager
attention (softmax in float32 of the model's dtype), not from our kernels,
so scores and choices may differ at near ties; batch size 1 only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
from kvpress.presses.base_press import BasePress

from . import config as mdconfig
from .policy import Policy


@dataclass
class MemDecayPress(BasePress):
    """config_path: memdecay.json (None: memdecay.json in the model's
    directory). budget_pages: evict down to this many pages after every
    forward pass (None: never evict, observe only). policy: any of
    memdecay.policy.CLASSES. page_size: 0 for the config's."""

    config_path: Optional[str] = None
    budget_pages: Optional[int] = None
    policy: str = "memdecay"
    page_size: int = 0
    decode_region: str = "scratchpad"
    regions: Optional[list] = None
    prompt_tokens: Optional[int] = None  # None: len(regions), or 0 without regions
    evict_enabled: bool = True  # False: observe, do not evict (eval asks its probes so)

    # what happened, for the caller
    stats: dict = field(default_factory=dict)

    def post_init_from_model(self, model):
        path = self.config_path
        if path is None:
            path = os.path.join(getattr(model.config, "_name_or_path", "") or ".", "memdecay.json")
        self.config = mdconfig.load(path)
        impl = getattr(model.config, "_attn_implementation", None)
        if impl != "eager":
            raise ValueError(f"MemDecayPress needs the attention weights: load the model with "
                             f"attn_implementation='eager' (it has {impl!r})")
        self.n_layers = model.config.num_hidden_layers
        self._core = None
        self._received = None

    # the sequence ---------------------------------------------------------------

    def new_sequence(self):
        self._core = Policy(self.policy, self.config, page_size=self.page_size)
        self._received = None
        self.stats = {"evicted": 0, "max_cached": 0, "max_cached_after_eviction": 0,
                      "eviction_points": 0, "max_pages_after_eviction": 0}

    @property
    def core(self) -> Policy:
        """The policy's state: positions cached, scores."""
        return self._core

    def _region(self, position: int) -> str:
        if self.regions is not None and position < len(self.regions):
            return self.regions[position]
        return self.decode_region

    # the hook ------------------------------------------------------------------

    def forward_hook(self, module, input, kwargs, output):
        hidden_states = kwargs["hidden_states"]
        if hidden_states.shape[0] != 1:
            raise ValueError("MemDecayPress: batch size 1 only (region labels are per example)")
        cache = kwargs["past_key_values"]
        cache_position = kwargs["cache_position"]
        layer = module.layer_idx
        attn = output[1]
        if attn is None:
            raise ValueError("MemDecayPress: no attention weights (eager attention needed)")
        if layer == 0:
            if int(cache_position[0]) == 0 or self._core is None:
                self.new_sequence()
            self._received = None
        # heads averaged, the pass's queries summed: [keys]
        r = attn[0].float().mean(dim=0).sum(dim=0).double()
        self._received = r if self._received is None else self._received + r
        if layer != self.n_layers - 1:
            return output
        received = (self._received / self.n_layers).cpu().numpy()
        positions = cache_position.tolist()
        core = self._core
        prompt_end = self.prompt_tokens if self.prompt_tokens is not None else \
            (len(self.regions) if self.regions is not None else 0)
        for p in positions:
            (core.append_prompt if p < prompt_end else core.append)(p, self._region(p))
        if core.cached_tokens != received.shape[0]:
            raise RuntimeError(f"MemDecayPress: {received.shape[0]} keys but {core.cached_tokens} tokens "
                               "tracked (was the cache changed outside the press?)")
        core.observe(received.astype(np.float32), len(positions))
        self.stats["max_cached"] = max(self.stats["max_cached"], core.cached_tokens)
        if self.budget_pages is None or not self.evict_enabled:
            return output
        before = core.positions
        evicted = core.evict(self.budget_pages)
        self.stats["eviction_points"] += 1
        self.stats["max_cached_after_eviction"] = max(self.stats["max_cached_after_eviction"],
                                                      core.cached_tokens)
        self.stats["max_pages_after_eviction"] = max(self.stats["max_pages_after_eviction"],
                                                     core.cached_pages)
        if evicted:
            self.stats["evicted"] += len(evicted)
            gone = set(evicted)
            keep = torch.tensor([i for i, p in enumerate(before) if p not in gone],
                                dtype=torch.long, device=hidden_states.device)
            for cl in cache.layers:  # every layer: one decision for all, as our engine
                cl.keys = cl.keys.index_select(2, keep)
                cl.values = cl.values.index_select(2, keep)
        return output


def causal_mask(cached_positions, chunk_positions, dtype=torch.float32, device=None):
    """The additive 4-D mask [1, 1, chunk, cached] of a chunk fed after an
    eviction: query j sees the cached keys at positions <= its own.
    (transformers' own causal mask compares cache slots with positions,
    which lets a chunk's queries see later tokens of the chunk once earlier
    tokens were evicted.)"""
    kp = torch.tensor(cached_positions, device=device).view(1, -1)
    qp = torch.tensor(chunk_positions, device=device).view(-1, 1)
    m = torch.zeros(len(chunk_positions), len(cached_positions), dtype=dtype, device=device)
    m.masked_fill_(kp > qp, torch.finfo(dtype).min)
    return m.view(1, 1, len(chunk_positions), len(cached_positions))
