"""memdecay.json as the policies read it.

The same fields, ranges and errors as the C runtime's loader
(md_policy_config_load, runtime/policy.h; the reader is io/formats/config.c
in its strict "policy" mode). Every error names the file and the field, in the
runtime's words, so a config refused by one implementation is refused by the
other with the same field named.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional

FORMAT = "memdecay-config/1"

# Region names: [a-z][a-z0-9_]* (base/regions.h).
_REGION_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")

# The defaults a policy without a config uses (base/policy_defaults.h).
PAGE_SIZE_DEFAULT = 16
TAU_DEFAULT = 1.0
EWMA_BETA_DEFAULT = 0.9
KAPPA_DEFAULT = 1.0

# jansson's json_int_t is 64-bit; the runtime reads page_size as a C int.
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


class ConfigError(ValueError):
    """A memdecay.json the runtime would refuse. `field` names the field at
    fault ("policy.attention_norm.kappa"), or None for the document itself."""

    def __init__(self, message: str, field: Optional[str] = None):
        super().__init__(message)
        self.field = field


@dataclass
class Region:
    name: str
    pinned: bool
    base_priority: float  # b_r, in [0, 1]
    lambda_: float  # per step, finite and >= 0; NaN allowed when pinned
    half_life: float = math.nan  # ln 2 / lambda, in decode steps; NaN for null


@dataclass
class Config:
    """What the policies need of a memdecay.json (md_policy_config)."""

    page_size: int = PAGE_SIZE_DEFAULT
    tau: float = TAU_DEFAULT
    ewma_beta: float = EWMA_BETA_DEFAULT
    alpha: float = 0.0
    kappa: float = KAPPA_DEFAULT
    has_pooled: bool = False
    pooled_lambda: float = math.nan
    regions: list = field(default_factory=list)  # [Region], file order = region index
    path: Optional[str] = None

    def region_index(self, name: str) -> int:
        """The index of region `name`, or -1 (md_policy_config_region)."""
        for i, r in enumerate(self.regions):
            if r.name == name:
                return i
        return -1

    @property
    def region_names(self) -> list:
        return [r.name for r in self.regions]

    def check(self, where: str = "") -> None:
        """The ranges of md_policy_config (check_config in runtime/policy.c);
        `where` prefixes every message ("PATH: " when loading a file)."""
        if isinstance(self.page_size, bool) or not isinstance(self.page_size, int) or self.page_size < 1:
            raise ConfigError(f"{where}policy.page_size: {self.page_size} is not a positive integer",
                              "policy.page_size")
        if not (math.isfinite(self.tau) and self.tau > 0):
            raise ConfigError(f"{where}policy.tau: {_g(self.tau)} is not a positive number", "policy.tau")
        if not (self.ewma_beta >= 0 and self.ewma_beta < 1):
            raise ConfigError(f"{where}policy.ewma_beta: {_g(self.ewma_beta)} is not in [0, 1)",
                              "policy.ewma_beta")
        if math.isnan(self.alpha):
            raise ConfigError(f"{where}policy.alpha: null (not estimable in the calibration); "
                              "memdecay needs it", "policy.alpha")
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ConfigError(f"{where}policy.alpha: {_g(self.alpha)} is not a number >= 0", "policy.alpha")
        if math.isnan(self.kappa):
            raise ConfigError(f"{where}policy.attention_norm.kappa: null (not estimable in the "
                              "calibration); memdecay needs it", "policy.attention_norm.kappa")
        if not (math.isfinite(self.kappa) and self.kappa > 0):
            raise ConfigError(f"{where}policy.attention_norm.kappa: {_g(self.kappa)} is not a positive "
                              "number", "policy.attention_norm.kappa")
        if (self.has_pooled and not math.isnan(self.pooled_lambda)
                and not (math.isfinite(self.pooled_lambda) and self.pooled_lambda >= 0)):
            raise ConfigError(f"{where}pooled.lambda: {_g(self.pooled_lambda)} is not a number >= 0",
                              "pooled.lambda")
        for r in self.regions:
            f = f"regions.{r.name}"
            if not (math.isfinite(r.base_priority) and 0 <= r.base_priority <= 1):
                raise ConfigError(f"{where}{f}.base_priority: {_g(r.base_priority)} is not a number in "
                                  "[0, 1]", f + ".base_priority")
            if r.pinned:
                continue  # lambda is not needed
            if math.isnan(r.lambda_):
                raise ConfigError(f"{where}{f}.lambda: null (not estimable) on an unpinned region; "
                                  "memdecay needs a decay rate for it", f + ".lambda")
            if not (math.isfinite(r.lambda_) and r.lambda_ >= 0):
                raise ConfigError(f"{where}{f}.lambda: {_g(r.lambda_)} is not a number >= 0", f + ".lambda")


def _g(x: float) -> str:
    """C's %g, for messages that read as the runtime's."""
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return "%g" % x


def _kind(v: Any) -> str:
    # json_kind of io/formats/config.c
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if v is None:
        return "null"
    return "something else"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_MISSING = object()


def _number(path: str, fld: str, v: Any, null_ok: bool) -> float:
    """read_number: a number, or NaN for null when allowed."""
    if v is not _MISSING and _is_number(v):
        return float(v)
    if null_ok and v is None:
        return math.nan
    if v is _MISSING:
        raise ConfigError(f"{path}: {fld}: missing", fld)
    raise ConfigError(f"{path}: {fld}: expected a number{' or null' if null_ok else ''}, found {_kind(v)}", fld)


def _int(path: str, fld: str, v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool) and _INT_MIN <= v <= _INT_MAX:
        return v
    if v is _MISSING:
        raise ConfigError(f"{path}: {fld}: missing", fld)
    if isinstance(v, int) and not isinstance(v, bool):
        raise ConfigError(f"{path}: {fld}: {v} is out of range", fld)
    raise ConfigError(f"{path}: {fld}: expected an integer, found "
                      f"{'a fraction' if _is_number(v) else _kind(v)}", fld)


def _interval(path: str, fld: str, v: Any) -> None:
    if v is None:
        return
    if v is _MISSING or not isinstance(v, list) or len(v) != 2:
        raise ConfigError(f"{path}: {fld}: expected [lower, upper] or null, found "
                          f"{'nothing' if v is _MISSING else _kind(v)}", fld)
    for i in range(2):
        _number(path, f"{fld}[{i}]", v[i], True)


def _contradicts_half_life(lam: float, half_life: float) -> bool:
    # The half-life is lambda's summary (ln 2 / lambda): more than 1% apart
    # means the file was edited inconsistently (runtime/policy.c).
    return (math.isfinite(half_life) and half_life > 0 and math.isfinite(lam) and lam >= 0
            and not (abs(lam * half_life / math.log(2.0) - 1.0) <= 0.01))


def _reject_duplicates(pairs):
    # jansson loads with JSON_REJECT_DUPLICATES
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate object key {k!r}")
        out[k] = v
    return out


def _reject_constant(name):
    raise ValueError(f"invalid JSON literal {name}")  # NaN, Infinity: not JSON


def parse(doc: Any, path: str = "<config>") -> Config:
    """Validates a decoded memdecay.json document as md_policy_config_load does."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a JSON object at the top, found {_kind(doc)}")
    fmt = doc.get("format", _MISSING)
    if not isinstance(fmt, str):
        raise ConfigError(f'{path}: format: expected the string "{FORMAT}" (is this a memdecay.json?)', "format")
    if fmt != FORMAT:
        raise ConfigError(f'{path}: format "{fmt}" is not supported (expected "{FORMAT}")', "format")
    warnings = doc.get("warnings", _MISSING)
    if warnings is not _MISSING and not isinstance(warnings, list):
        raise ConfigError(f"{path}: warnings: expected an array, found {_kind(warnings)}", "warnings")
    regions = doc.get("regions", _MISSING)
    if not isinstance(regions, dict):
        raise ConfigError(f"{path}: regions: expected an object, found "
                          f"{'nothing' if regions is _MISSING else _kind(regions)}", "regions")
    out = Config(path=path)
    for name, value in regions.items():
        if not _REGION_NAME.match(name):
            raise ConfigError(f'{path}: regions: "{name}" is not a valid region name', "regions")
        f = f"regions.{name}"
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {f}: expected an object, found {_kind(value)}", f)
        pinned = value.get("pinned", _MISSING)
        if not isinstance(pinned, bool):
            raise ConfigError(f"{path}: {f}.pinned: expected true or false, found "
                              f"{'nothing' if pinned is _MISSING else _kind(pinned)}", f + ".pinned")
        b = _number(path, f + ".base_priority", value.get("base_priority", _MISSING), False)
        hl = _number(path, f + ".half_life", value.get("half_life", _MISSING), True)
        _interval(path, f + ".half_life_ci", value.get("half_life_ci", _MISSING))
        lam = _number(path, f + ".lambda", value.get("lambda", _MISSING), True)
        out.regions.append(Region(name, pinned, b, lam, hl))
    pooled = doc.get("pooled", _MISSING)
    pooled_hl = math.nan
    if pooled is not _MISSING:
        if not isinstance(pooled, dict):
            raise ConfigError(f"{path}: pooled: expected an object, found {_kind(pooled)}", "pooled")
        out.has_pooled = True
        out.pooled_lambda = _number(path, "pooled.lambda", pooled.get("lambda", _MISSING), True)
        pooled_hl = _number(path, "pooled.half_life", pooled.get("half_life", _MISSING), True)
    policy = doc.get("policy", _MISSING)
    if policy is _MISSING:
        raise ConfigError(f"{path}: policy: missing", "policy")
    if not isinstance(policy, dict):
        raise ConfigError(f"{path}: policy: expected an object, found {_kind(policy)}", "policy")
    out.page_size = _int(path, "policy.page_size", policy.get("page_size", _MISSING))
    out.tau = _number(path, "policy.tau", policy.get("tau", _MISSING), False)
    out.ewma_beta = _number(path, "policy.ewma_beta", policy.get("ewma_beta", _MISSING), False)
    out.alpha = _number(path, "policy.alpha", policy.get("alpha", _MISSING), True)
    norm = policy.get("attention_norm", _MISSING)
    if norm is _MISSING:
        raise ConfigError(f"{path}: policy.attention_norm: missing", "policy.attention_norm")
    if not isinstance(norm, dict):
        raise ConfigError(f"{path}: policy.attention_norm: expected an object, found {_kind(norm)}",
                          "policy.attention_norm")
    out.kappa = _number(path, "policy.attention_norm.kappa", norm.get("kappa", _MISSING), True)
    # After the reader, as md_policy_config_load: half-lives, then the ranges.
    if out.has_pooled and _contradicts_half_life(out.pooled_lambda, pooled_hl):
        raise ConfigError(f"{path}: pooled.lambda: {_g(out.pooled_lambda)} contradicts its half_life "
                          f"{_g(pooled_hl)} (lambda = ln 2 / half_life = {_g(math.log(2.0) / pooled_hl)})",
                          "pooled.lambda")
    for r in out.regions:
        if _contradicts_half_life(r.lambda_, r.half_life):
            raise ConfigError(f"{path}: regions.{r.name}.lambda: {_g(r.lambda_)} contradicts its half_life "
                              f"{_g(r.half_life)} (lambda = ln 2 / half_life = {_g(math.log(2.0) / r.half_life)})",
                              f"regions.{r.name}.lambda")
    out.check(f"{path}: ")
    return out


def load(path: str) -> Config:
    """Loads and validates memdecay.json at `path` (md_policy_config_load).
    Raises ConfigError naming the file and the field, or OSError."""
    with open(path, "rb") as fp:
        text = fp.read()
    try:
        doc = json.loads(text.decode("utf-8"), object_pairs_hook=_reject_duplicates,
                         parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"{path}: not valid JSON: {e}") from None
    return parse(doc, str(path))
