"""The options every benchmark family reads through the configuration spec
(:mod:`fairness_tests.pipeline.config`): the resampling unit of its tables' intervals
(``--cluster FAMILY=UNIT``, its ``FamilySpec.clusters``; the gate takes the same)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from fairness_tests.core.options import Checked, opt
from fairness_tests.core.registry import cluster_choices, cluster_units, units_text


@dataclass(frozen=True, kw_only=True)
class BenchmarkClusterOption(Checked):
    cluster: tuple[str, ...] | None = opt(
        None, "bootstrap unit of a benchmark family's intervals: FAMILY=UNIT, or UNIT for all "
        f"families with it ({units_text()}; default: the first; BBQ and the generative audit "
        "also read --bbq-cluster / --gen-cluster)", metavar="[FAMILY=]UNIT", regen=False)

    def cluster_of(self, family: str) -> str:
        """The unit ``family``'s tables resample: ``--cluster``'s, else its first."""
        chosen = cluster_units(self.cluster)
        return chosen.get(family) or cluster_choices().get(family, ("item",))[0]

    def cross_check(self) -> Iterable[tuple[str, str]]:
        try:
            cluster_units(self.cluster)
        except ValueError as exc:
            yield "cluster", str(exc)


@dataclass(frozen=True, kw_only=True)
class BBQClusterOption(Checked):
    bbq_cluster: Literal["template", "item"] = opt(
        "template", "BBQ bootstrap unit: whole templates or single items")


@dataclass(frozen=True, kw_only=True)
class GenClusterOption(Checked):
    gen_cluster: Literal["prompt", "row"] = opt(
        "prompt", "generative bootstrap unit: whole prompts or single generations")
