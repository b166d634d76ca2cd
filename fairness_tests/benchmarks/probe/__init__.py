"""The counterfactual role-assignment probe, declared: verdict shares per decoding x
context and counterfactual consistency under the name-order and context-cue swaps; what
computes is in :mod:`fairness_tests.benchmarks.probe.family`, imported when a run
uses it. Not in the default audit; no marker, drift tables, gate or compare section yet."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from fairness_tests.benchmarks.generative.options import REDUCTIONS
from fairness_tests.benchmarks.probe.info import CounterfactualInfo
from fairness_tests.metrics.schema import Table, register_table
from fairness_tests.pipeline.benchmark import Benchmark, FamilySpec, Shown
from fairness_tests.run.metadata import register_info

if TYPE_CHECKING:
    from fairness_tests.benchmarks.probe.family import ProbeFamily
    from fairness_tests.models.requests.request import Request

TABLE = "counterfactual"
#: verdict shares and counterfactual consistency (:mod:`fairness_tests.benchmarks.probe.metrics`)
METRICS = frozenset({"share_philippe_manager", "share_elena_manager", "share_refused",
                     "share_ambiguous", "follows_swap", "same_verdict", "follows_swap_decided"})
register_table(TABLE, Table(("swap", "decoding", "context"), METRICS),
               values={"swap": ("name_order", "context")})
#: what a run records about it, under run.json's "counterfactual" key
register_info("counterfactual", CounterfactualInfo)


class Probe(Benchmark):
    name: ClassVar[str] = "probe"
    family = FamilySpec(name="probe", records="probe", metadata_key="counterfactual",
                        impl="fairness_tests.benchmarks.probe.family:ProbeFamily")
    listed = True                         # on every card: not in the default audit, but
    tables = (TABLE,)                     # one of the two protocols of the mission
    shown = (Shown("counterfactual", tables, "the counterfactual probe was not run"),)
    card_schema = "card_schema.yaml"
    options = REDUCTIONS                  # the generative protocol's reductions

    def requests(self, family: ProbeFamily) -> list[Request]:
        return family.requests()
