"""Section 8's reproducibility facts: the seeds, the number of samples and the command
that regenerates the run, beside the user's code URL, licence and data release."""
from __future__ import annotations

from typing import Any

from fairness_tests.card.sections.facts import RunFacts


def reproducibility(f: RunFacts, user: dict) -> dict[str, Any]:
    """``seeds``: the generative seeds, else the BBQ answer-sampling seed (a run scored
    from someone's predictions has none); ``total_samples``: generations + BBQ answers."""
    rep = {k: v for k, v in (user.get("reproducibility") or {}).items()
           if v is not None and v != ""}
    g, b = f.gen, f.bbq
    if g is not None and g.seeds:
        rep["seeds"] = sorted(g.seeds)
    elif b is not None and f.asked:
        rep["seeds"] = [b.seed]
    total = (g.n_generations if g is not None else 0) + (b.n_answers if b is not None else 0)
    if total:
        rep["total_samples"] = total
    if f.meta.regen_command:
        rep["regen_command"] = f.meta.regen_command
    return rep
