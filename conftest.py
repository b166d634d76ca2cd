"""Repository-level pytest configuration.

The fairness plugin itself (options, fixtures, snapshot extension, gate) is
``fairness_tests.plugin.plugin``, loaded through the ``pytest11`` entry point of
the installed package; registering it here again would load it twice.

Here: the environment every test of this checkout runs under.
"""
import os
import sys

# litellm must never fetch its cost map over the network (also at import time).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Hugging Face libraries must never reach a hub from the tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Cache the rewritten test modules (and the package's compiled modules) in __pycache__
# (gitignored) even where PYTHONDONTWRITEBYTECODE is set, as on the shared development
# machine: otherwise every pytest process, each xdist worker included, compiles and
# rewrites all ~90 test modules again (about 6 s of CPU a process there, of ~13 s of
# collection). pytest and Python write these files atomically and check them against
# the source's mtime, so a stale one is never used.
sys.dont_write_bytecode = False
