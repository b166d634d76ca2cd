"""Section 4, protected attributes and intersectional slices, and how each benchmark
operationalises them: each family's slices and sentence
(:meth:`fairness_tests.pipeline.benchmark.Family.card_protocol`, gathered by
:func:`~fairness_tests.card.sections.protocol.protocol_parts`).
"""
from __future__ import annotations

from typing import Any

from fairness_tests.card.sections.facts import RunFacts
from fairness_tests.card.sections.protocol import protocol_parts
from fairness_tests.card.values import get_path


def protected_attributes(f: RunFacts, user: dict) -> dict[str, Any]:
    p = protocol_parts(f)
    pa: dict[str, Any] = {"slices": list(p.slices)}
    if p.operationalisation:
        pa["operationalisation"] = " ".join(p.operationalisation)
    else:
        f.lack("protected_attributes.operationalisation", "protected_attributes",
               "no protocol in the run")
    notes = get_path(user, "protected_attributes.notes")
    if notes:
        pa["notes"] = notes
    return pa
