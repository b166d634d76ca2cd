"""The counterfactual probe on the card's results (:meth:`ProbeFamily.card_results
<fairness_tests.pipeline.benchmark.Family.card_results>`): its table, under its name."""
from __future__ import annotations

from fairness_tests.pipeline.views import View

VIEWS = [View("Counterfactual probe", "res_counterfactual", "counterfactual")]
