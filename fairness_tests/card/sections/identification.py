"""Section 1, model and system identification: the generator, the evaluation date, the
system (model, version, backend, surface) and the served-system addendum.

The surface follows from the backend that asked the model (local weights =
``base-model``, an API = ``served-system``) unless the user states it; a run scored from
someone else's answers has no backend, so the surface is the user's to state.
"""
from __future__ import annotations

from typing import Any

from fairness_tests.card.sections.facts import RunFacts
from fairness_tests.card.sections.protocol import protocol_parts
from fairness_tests.core.errors import ConfigError

SURFACE_BY_BACKEND = {"transformers": "base-model", "litellm": "served-system"}
USER_SYSTEM_KEYS = ("known_layers", "checkpoint_url", "precision", "notes")


def identification(f: RunFacts, user: dict, user_source: str | None) -> dict[str, Any]:
    """``generator``, ``evaluation_date``, ``system`` and ``served_system_addendum``."""
    m = f.meta
    out: dict[str, Any] = {"generator": {"name": "fairness_tests",
                                         "version": m.fairness_tests_version}}
    if m.evaluation_date:
        out["evaluation_date"] = m.evaluation_date
    else:
        f.lack("evaluation_date", "identification",
               "run metadata evaluation_date" if f.asked
               else f.unknown("the date the answers were made"))
    out["system"] = _system(f, user, user_source)
    addendum = dict(user.get("served_system_addendum") or {})
    system_prompt = protocol_parts(f).system_prompt
    if system_prompt is not None:
        addendum["system_prompt"] = system_prompt
    if addendum:
        out["served_system_addendum"] = addendum
    return out


def _system(f: RunFacts, user: dict, user_source: str | None) -> dict[str, Any]:
    m = f.meta
    u = dict(user.get("system") or {})
    system: dict[str, Any] = {}
    if m.model:
        system["name"] = m.model
    elif "name" in u:
        system["name"] = str(u["name"])
    else:
        f.lack("system.name", "identification",
               "the run names no model: score it with --model ID, or give system.name")
    if m.backend:
        system["backend"] = m.backend
    version = m.backend_info.version if m.backend_info else None    # the library's version
    if version:
        system["backend_version"] = str(version)
    # the run's model version wins; the user may fill it when the run has none
    if m.model_version:
        if "version" in u and str(u["version"]) != m.model_version:
            raise ConfigError(f"contradicts the run's value {m.model_version!r} "
                              "(run metadata 'model_version')", path=user_source,
                              key="system.version")
        system["version"] = m.model_version
    elif "version" in u:
        system["version"] = str(u["version"])
    if "snapshot_date" in u:
        system["snapshot_date"] = str(u["snapshot_date"])
    if "surface" in u:
        system["surface"], system["surface_source"] = u["surface"], "user"
    elif m.backend in SURFACE_BY_BACKEND:
        system["surface"], system["surface_source"] = SURFACE_BY_BACKEND[m.backend], "run"
    for key in USER_SYSTEM_KEYS:
        if key in u:
            system[key] = u[key]
    return system
