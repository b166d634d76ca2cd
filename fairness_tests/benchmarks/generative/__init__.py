"""The generative audit, declared: open-ended prompts over slices x occupations x prompt
families x paraphrases x decoding regimes x seeds, scored by a lexical rubric (and a
second one for scorer sensitivity); what computes is in
:mod:`fairness_tests.benchmarks.generative.family`, imported when a run uses it."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from fairness_tests.benchmarks.generative.info import GenerativeInfo
from fairness_tests.benchmarks.generative.schema import TABLES
from fairness_tests.metrics.schema import register_table
from fairness_tests.pipeline.benchmark import Benchmark, FamilySpec, Shown
from fairness_tests.run.metadata import register_info

if TYPE_CHECKING:
    from fairness_tests.benchmarks.generative.family import GenerativeFamily
    from fairness_tests.models.requests.request import Request

#: its tables (:mod:`fairness_tests.benchmarks.generative.schema`)
for _name, (_table, _values) in TABLES.items():
    register_table(_name, _table, values=_values)
#: what a run records about it, under run.json's "generative" key
register_info("generative", GenerativeInfo)


class Generative(Benchmark):
    name: ClassVar[str] = "generative"
    family = FamilySpec(
        name="generative", records="generative", metadata_key="generative", gated=True,
        compared=True, impl="fairness_tests.benchmarks.generative.family:GenerativeFamily",
        clusters=("prompt", "row"),
        units=(("prompt", "generative prompts (family x paraphrase x occupation x slice)"),
               ("row", "generative rows")))
    default = True
    scored = True
    option_group = "fairness_tests.benchmarks.generative.options:GenerativeOptions"
    rules = "rules.yaml"
    commands = "fairness_tests.benchmarks.generative.cli"
    configs = tuple(f"fairness_tests.benchmarks.generative.config:{name}" for name in (
        "GenerativeScoreConfig", "SensitivityConfig", "GridConfig", "ProbeGridConfig",
        "ProbeScoreConfig"))
    protocol_cells = "fairness_tests.benchmarks.generative.cells:CELLS"
    card_schema = "card_schema.yaml"
    marker = "generative audit properties"
    tables = ("generative_by_slice", "generative_cells", "generative_summary")
    drift_tables = ("generative_by_slice", "generative_by_slice_family",
                    "generative_by_slice_decoding")
    shown = (
        Shown("generative", tables, "the run has no generative tables: the generative audit "
              "was not run"),
        Shown("scorer_sensitivity", ("scorer_sensitivity", "rubric_flips"),
              "outputs were scored with one rubric only"),
        Shown("protocol_sensitivity", ("protocol_sensitivity",),
              "no protocol-sensitivity analysis in the run"),
    )

    def requests(self, family: GenerativeFamily) -> list[Request]:
        return family.requests()
