"""MemDecay's calibrated KV-cache eviction for Python stacks.

memdecay.config     memdecay.json, validated as the C runtime validates it
memdecay.policy     the runtime's eviction policies (runtime/policy.h), in Python
memdecay.retention  a config and a region-labelled prompt to serving stacks'
                    retention settings (TensorRT-LLM, vLLM, SGLang, Dynamo)
memdecay.press      MemDecayPress for NVIDIA kvpress (needs torch, transformers,
                    kvpress; imported on its own)
"""

from .config import Config, ConfigError, Region, load
from .policy import CLASSES, Policy, PolicyError

__version__ = "0.1.0"
__all__ = ["Config", "ConfigError", "Region", "load", "Policy", "PolicyError", "CLASSES"]
