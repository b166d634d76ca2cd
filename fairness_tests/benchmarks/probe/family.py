"""The counterfactual role-assignment probe at work: verdict shares per decoding x context and
counterfactual consistency under the name-order and context-cue swaps."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from fairness_tests.benchmarks.generative.family import reduce_seeds
from fairness_tests.benchmarks.probe import card
from fairness_tests.benchmarks.probe import grid as P
from fairness_tests.benchmarks.probe import metrics as CF
from fairness_tests.benchmarks.probe.info import CounterfactualInfo
from fairness_tests.models.requests.request import Request
from fairness_tests.pipeline.benchmark import Asked, Family, Results
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.views import CardProtocol, ProtocolView, View
from fairness_tests.scoring.verdict import classify, person_labels

DESCRIPTION = ("role-assignment probe (name order x paraphrase x context cue x decoding x "
               "seed), verdict classifier per the published regexes")


class ProbeFamily(Family):
    """The probe's grid (after the run's reductions) and its verdict classifier."""

    card_rank = 20

    @classmethod
    def protocol_view(cls, record: Mapping[str, Any]) -> ProtocolView:
        """Nothing beyond the card's results table: the probe's record stays in
        card.yaml (the rendered card shows its settings through its results)."""
        return ProtocolView()

    @classmethod
    def card_protocol(cls, facts: Any, protocol: CardProtocol) -> None:
        card.card_protocol(facts, protocol)

    @classmethod
    def card_results(cls, tables: Mapping[str, list[dict]]) -> list[View]:
        return card.VIEWS

    def __init__(self, config: AuditConfig):
        super().__init__(config)
        self.spec = P.load_probe()
        self.reductions: list[str] = []
        grid = reduce_seeds(P.probe_grid(self.spec), config.gen_seeds, self.reductions)
        self.max_tokens = P.PROBE_MAX_TOKENS
        if config.gen_max_new_tokens:
            self.max_tokens = min(self.max_tokens, config.gen_max_new_tokens)
            self.reductions.append(f"max_new_tokens capped at {self.max_tokens}")
        if config.gen_limit:
            grid = grid.iloc[:config.gen_limit]
            self.reductions.append(f"first {config.gen_limit} probe rows only")
        self.grid = grid

    def results(self, asked: dict[str, Asked]) -> Results:
        a = asked["probe"]
        df = self.grid.copy()
        df["output_text"] = [(r.text or "").strip() for r in a.responses]
        df["status"] = [r.status for r in a.responses]
        df["verdict"] = classify(df["output_text"], self.spec, df["status"])
        shares = CF.verdict_shares(df, self.spec["labels"])
        person_a, person_b = person_labels(self.spec)     # exactly two: the probe file is validated
        cons = CF.consistency(df, (person_a, person_b))
        table = pd.concat([shares.assign(swap=""), cons.assign(decoding="", context="")],
                          ignore_index=True)
        info = CounterfactualInfo(
            protocol=DESCRIPTION, n_requests=len(a.requests), max_new_tokens=self.max_tokens,
            reductions=self.reductions, system_prompt=P.PROBE_SYSTEM_PROMPT,
            verdict_counts={k: int(v) for k, v in df["verdict"].value_counts().items()})
        return Results(tables={"counterfactual": table}, records={"probe": df},
                       metadata={"counterfactual": info})


    def requests(self) -> list[Request]:
        """The probe grid's requests, in grid order."""
        c = self.config
        return P.probe_requests(self.grid, backend=c.backend_name(), model=c.model,
                                api_base=c.api_base, max_tokens=self.max_tokens)
