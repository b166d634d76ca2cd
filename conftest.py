"""Repository-level pytest configuration.

The fairness plugin itself (options, fixtures, snapshot extension, gate) is
``fairness_tests.plugin.plugin``, loaded through the ``pytest11`` entry point of
the installed package; registering it here again would load it twice.

Here: the environment every test of this checkout runs under.
"""
import os

# litellm must never fetch its cost map over the network (also at import time).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Hugging Face libraries must never reach a hub from the tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
