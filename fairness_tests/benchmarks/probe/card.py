"""The counterfactual probe on the card's results (:meth:`ProbeFamily.card_results
<fairness_tests.pipeline.benchmark.Family.card_results>`): its table, under its name."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fairness_tests.benchmarks.probe.info import CounterfactualInfo
from fairness_tests.pipeline.views import CardProtocol, View

VIEWS = [View("Counterfactual probe", "res_counterfactual", "counterfactual")]


def card_protocol(f: Any, card: CardProtocol) -> None:
    """The probe's record under ``evaluation_protocol.counterfactual``: its run metadata
    as recorded (:meth:`fairness_tests.pipeline.benchmark.Family.card_protocol`)."""
    info = f.meta.info("counterfactual", CounterfactualInfo)
    if info is not None:
        card.record["counterfactual"] = asdict(info)
