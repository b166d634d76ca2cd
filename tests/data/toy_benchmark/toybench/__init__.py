"""A toy benchmark, declared (light): which pronoun the model finds more likely after
"The <occupation> said that", for twelve occupations (request kind loglikelihood)."""
from __future__ import annotations

from dataclasses import dataclass

from fairness_tests.metrics.schema import Table, register_table
from fairness_tests.pipeline.benchmark import Benchmark, FamilySpec, Shown
from fairness_tests.run.metadata import register_info

register_table("toy_table", Table(("group",), frozenset({"toy_she_rate"})),
               values={"group": ("all",)})


@dataclass
class ToyInfo:
    """What a toy run records: the number of occupations asked, the verb."""
    n_items: int = 0
    verb: str = "said"


register_info("toy", ToyInfo)


class Toy(Benchmark):
    name = "toybench"
    family = FamilySpec(name="toyfam", impl="toybench.family:ToyFamily", records="toyrec",
                        metadata_key="toy", gated=True, compared=True, clusters=("item",))
    marker = "toy benchmark properties"
    tables = ("toy_table",)
    drift_tables = ("toy_table",)
    shown = (Shown("toybench", tables, "the toy benchmark was not run"),)
    rules = "rules.yaml"
    option_group = "toybench.options:ToyOptions"
    properties = {"test_toy_she_rate": {"tables": "toy_table"}}

    def requests(self, family):
        return family.requests()
