"""The protocol registry: what an audit can ask, by name.

A protocol is a registered :class:`~fairness_tests.pipeline.protocols.base.AuditProtocol`
(its requests); protocols that share their data, records and tables belong to one
:class:`~fairness_tests.pipeline.protocols.base.Family` (BBQ and consistency share the BBQ
items and the one BBQ table builder). The audit and the dry run iterate the registry;
nothing else names a protocol. A new protocol is one module and one line here.

The entries name their class as ``"module:Class"`` and are imported when a run uses them:
the configuration and the pytest plugin read the names without importing pandas.
"""
from __future__ import annotations

import importlib
from typing import Any

REGISTRY: dict[str, str] = {
    "bbq": "fairness_tests.pipeline.protocols.bbq:BBQ",
    "consistency": "fairness_tests.pipeline.protocols.bbq:Consistency",
    "generative": "fairness_tests.pipeline.protocols.generative:Generative",
    "probe": "fairness_tests.pipeline.protocols.probe:Probe",
}
PROTOCOL_NAMES: tuple[str, ...] = tuple(REGISTRY)


def protocol(name: str) -> Any:
    """The registered protocol class of ``name`` (imported on first use)."""
    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)
