import json
import os
import tempfile


def hand_config(**policy):
    """A small memdecay.json (as a dict) for hand-worked examples."""
    doc = {
        "format": "memdecay-config/1",
        "policy": {"page_size": 4, "tau": 1.0, "ewma_beta": 0.5, "alpha": 0.5,
                   "attention_norm": {"kind": "uniform", "kappa": 2.0}},
        "regions": {
            "system": {"pinned": True, "base_priority": 1.0, "half_life": None, "half_life_ci": None, "lambda": None},
            "user": {"pinned": False, "base_priority": 0.5, "half_life": 100.0, "half_life_ci": None, "lambda": 0.006931471805599453},
            "tool_out": {"pinned": False, "base_priority": 0.25, "half_life": 40.0, "half_life_ci": None, "lambda": 0.01732867951399863},
            "scratchpad": {"pinned": False, "base_priority": 0.9, "half_life": 20.0, "half_life_ci": None, "lambda": 0.034657359027997264},
        },
    }
    doc["policy"].update(policy)
    return doc


def write_json(doc, text=None):
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(text if text is not None else json.dumps(doc))
    return path
