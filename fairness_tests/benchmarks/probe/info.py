"""What a run records about the counterfactual probe (run.json's ``counterfactual``
key). Light: the benchmark's declaration registers it."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CounterfactualInfo:
    protocol: str
    n_requests: int
    max_new_tokens: int | None
    system_prompt: str | None
    verdict_counts: dict[str, int]
    reductions: list[str] = field(default_factory=list)
