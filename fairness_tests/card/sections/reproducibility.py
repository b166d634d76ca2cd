"""Section 8's reproducibility facts: the seeds, the number of samples and the command
that regenerates the run, beside the user's code URL, licence and data release."""
from __future__ import annotations

from typing import Any

from fairness_tests.card.sections.facts import RunFacts
from fairness_tests.card.sections.protocol import protocol_parts


def reproducibility(f: RunFacts, user: dict) -> dict[str, Any]:
    """``seeds``: the seeds of the answers' sampling, ``total_samples``: the answers
    sampled, as the families state them (``CardProtocol.sample_seeds`` /
    ``total_samples``: e.g. the generative seeds, else BBQ's answer-sampling seed; a run
    scored from someone's predictions has none)."""
    rep = {k: v for k, v in (user.get("reproducibility") or {}).items()
           if v is not None and v != ""}
    p = protocol_parts(f)
    if p.sample_seeds is not None:
        rep["seeds"] = list(p.sample_seeds)
    if p.total_samples:
        rep["total_samples"] = p.total_samples
    if f.meta.regen_command:
        rep["regen_command"] = f.meta.regen_command
    return rep
