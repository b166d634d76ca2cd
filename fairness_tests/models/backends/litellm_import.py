"""litellm, imported on first use: it is heavy (about a second) and must never fetch its
cost map over the network, so nothing imports it at module load."""
from __future__ import annotations

import os
from typing import Any


def load_litellm() -> Any:
    """The ``litellm`` module, with the local cost map and offline mode set first."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm  # noqa: PLC0415  heavy optional dependency, loaded on first use
    litellm.suppress_debug_info = True
    return litellm
