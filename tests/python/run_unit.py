#!/usr/bin/env python3
"""Runs the Python package's unit tests (python/tests); fails without
numpy, which the package needs (Debian: python3-numpy)."""
import os
import sys
import unittest

try:
    import numpy  # noqa: F401
except ImportError:
    print("numpy is not installed (Debian: python3-numpy; .ci/install-deps installs it)", file=sys.stderr)
    sys.exit(1)

root = os.path.join(os.environ.get("MD_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", "..")),
                    "python")
suite = unittest.defaultTestLoader.discover(os.path.join(root, "tests"), top_level_dir=root)
result = unittest.TextTestRunner(verbosity=2).run(suite)
sys.exit(0 if result.wasSuccessful() else 1)
