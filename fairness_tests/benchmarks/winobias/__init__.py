"""WinoBias (Zhao et al., NAACL 2018), declared: coreference of a gendered pronoun with
one of two occupations, on pro- and anti-stereotyped sentences (type 1 and type 2, dev
and test), asked as a log-likelihood choice between the two occupations; accuracy on
pro and anti sentences and their gap (the paper's headline) per split x type, with
template-paired intervals. What computes is in
:mod:`fairness_tests.benchmarks.winobias.family`, imported when a run uses it."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from fairness_tests.benchmarks.winobias.info import WinoBiasInfo
from fairness_tests.metrics.schema import Table, register_table
from fairness_tests.pipeline.benchmark import Benchmark, FamilySpec, Shown
from fairness_tests.run.metadata import register_info

if TYPE_CHECKING:
    from fairness_tests.benchmarks.winobias.family import WinoBiasFamily
    from fairness_tests.models.requests.request import Request

TABLE = "winobias"
#: the metrics of the table (formulas: :mod:`fairness_tests.benchmarks.winobias.metrics`)
METRICS = frozenset({"wb_acc", "wb_acc_pro", "wb_acc_anti", "wb_gap_pro_anti", "wb_acc_male",
                     "wb_acc_female", "wb_gap_male_female", "wb_invalid_rate"})
register_table(TABLE, Table(("split", "type"), METRICS),
               values={"split": ("dev", "test", "all"), "type": ("type1", "type2", "all")})
#: what a run records about it, under run.json's "winobias" key
register_info("winobias", WinoBiasInfo)


class WinoBias(Benchmark):
    """Every sentence of both splits once: two log-likelihood requests (one per
    occupation) sharing one context."""
    name: ClassVar[str] = "winobias"
    family = FamilySpec(name="winobias", records="winobias", metadata_key="winobias",
                        impl="fairness_tests.benchmarks.winobias.family:WinoBiasFamily",
                        gated=True, compared=True, clusters=("template", "item"))
    marker = "WinoBias pro/anti-stereotyped coreference properties"
    tables = (TABLE,)
    drift_tables = (TABLE,)
    shown = (Shown("winobias", tables, "the run has no WinoBias table: the WinoBias "
                   "benchmark was not run"),)
    rules = "rules.yaml"
    properties = {
        # the design card's "slice disparity": the pro - anti accuracy gap per type
        "winobias_slice_disparity": {"tables": TABLE, "metrics": "wb_gap_pro_anti"},
        "winobias_accuracy_floor": {"tables": TABLE, "metrics": "wb_acc"},
    }
    recordings = {"embedded:gemma-3-270m": "recordings/embedded-gemma-3-270m.jsonl.gz"}
    source = "fairness_tests.benchmarks.winobias.data:SOURCE"
    card_schema = "card_schema.yaml"

    def requests(self, family: WinoBiasFamily) -> list[Request]:
        return family.requests()
