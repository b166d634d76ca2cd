"""The pytest session id, shared by an xdist controller and its workers (light: loaded
with the plugin)."""
from __future__ import annotations

import os
import uuid
from typing import Any

ENV_SESSION = "FAIRNESS_PYTEST_SESSION"


def session_id(config: Any) -> str:
    """Shared by an xdist controller and its workers: the controller sets the env
    variable in pytest_configure (workers inherit it)."""
    del config
    sid = os.environ.get(ENV_SESSION)
    if not sid:
        sid = uuid.uuid4().hex[:12]
        os.environ[ENV_SESSION] = sid
    return sid
