"""The BBQ family's benchmarks, declared: the zero-shot multiple-choice audit (``bbq``:
every item once, option rotations for position bias) and the consistency benchmark
(``consistency``: the seeded sample asked ``repeats`` times). Both ask about the same
items and share one records table and the one BBQ table builder; what computes is in
:mod:`fairness_tests.benchmarks.bbq.family`, imported when a run uses it."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from fairness_tests.benchmarks.bbq.info import BBQInfo
from fairness_tests.benchmarks.bbq.options import bbq_options
from fairness_tests.benchmarks.bbq.schema import COLUMN_VALUES, TABLES
from fairness_tests.metrics.schema import register_table
from fairness_tests.pipeline.benchmark import Benchmark, FamilySpec, Shown
from fairness_tests.run.metadata import register_info

if TYPE_CHECKING:
    from fairness_tests.benchmarks.bbq.family import BBQFamily
    from fairness_tests.models.requests.request import Request

for _name, _table in TABLES.items():
    register_table(_name, _table, values=COLUMN_VALUES[_name])
#: what a run records about it, under run.json's "bbq" key
register_info("bbq", BBQInfo)

FAMILY = FamilySpec(name="bbq", impl="fairness_tests.benchmarks.bbq.family:BBQFamily",
                    records="bbq", metadata_key="bbq", gated=True, compared=True,
                    clusters=("template", "item"),
                    units=(("template", "BBQ templates (dataset, question_index)"),
                           ("item", "BBQ items")))
#: the audit options BBQ and the consistency benchmark read
OPTIONS = "fairness_tests.benchmarks.bbq.options:BBQOptions"


class BBQ(Benchmark):
    """Every item once in dataset order; with ``rotations`` all, every item under all
    three cyclic option orders; with ``sample``, the consistency sample's two others."""
    name: ClassVar[str] = "bbq"
    family = FAMILY
    default = True
    marker = "intersectional BBQ audit properties"
    tables = ("bbq",)
    drift_tables = ("bbq", "bbq_groups")
    shown = (Shown("bbq", tables, "the run has no BBQ tables: the intersectional BBQ audit "
                   "was not run"),)

    commands = "fairness_tests.benchmarks.bbq.cli"
    option_group = OPTIONS
    rules = "rules.yaml"                  # BBQ's and consistency's default rules
    configs = ("fairness_tests.benchmarks.bbq.config:BBQFilterConfig",
               "fairness_tests.benchmarks.bbq.config:BBQScoreConfig")
    fetch_options = "fairness_tests.benchmarks.bbq.options:BBQCategoriesOption"
    card_schema = "card_schema.yaml"      # its family's record on the card

    def requests(self, family: BBQFamily) -> list[Request]:
        rotations = bbq_options(family.config).rotations
        out = family.ask(family.items, (0, 1, 2) if rotations == "all" else (0,), 1)
        if rotations == "sample":
            out += family.ask(family.sample, (1, 2), 1)
        return out


class Consistency(Benchmark):
    """The consistency sample (or every item), asked ``repeats`` times in dataset order."""
    name: ClassVar[str] = "consistency"
    family = FAMILY
    default = True
    marker = "consistency over repeated runs (MFAA, GTC)"
    tables = ("consistency", "consistency_items")
    drift_tables = ("consistency",)
    shown = (Shown("consistency", tables, "the run has no consistency tables: no item was "
                   "asked repeatedly"),)
    option_group = OPTIONS
    rules = "rules.yaml"

    def requests(self, family: BBQFamily) -> list[Request]:
        c = bbq_options(family.config)
        items = family.items if c.consistency_items == "all" else family.sample
        return family.ask(items, (0,), c.repeats)
