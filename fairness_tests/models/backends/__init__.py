"""Model backends. ``get_backend(name, **options)`` builds one by name."""
from __future__ import annotations

from fairness_tests.models.backends.base import Backend, get_backend, register_backend

__all__ = ["Backend", "get_backend", "register_backend"]
