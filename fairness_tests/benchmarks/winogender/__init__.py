"""Winogender (Rudinger et al., NAACL 2018), declared: each of the 720 sentences asked as
lm-evaluation-harness's ``winogender_*`` tasks ask it (does the pronoun refer to the
occupation or the participant, by log-likelihood); accuracy per pronoun gender and on
the gotcha subset, the male - female gap paired by template, and the paper's correlation
with the occupations' gender statistics. What computes is in
:mod:`fairness_tests.benchmarks.winogender.family`, imported when a run uses it."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from fairness_tests.benchmarks.winogender.info import WinogenderInfo
from fairness_tests.metrics.schema import Table, register_table
from fairness_tests.pipeline.benchmark import Benchmark, FamilySpec, Shown
from fairness_tests.run.metadata import register_info

if TYPE_CHECKING:
    from fairness_tests.benchmarks.winogender.family import WinogenderFamily
    from fairness_tests.models.requests.request import Request

register_info("winogender", WinogenderInfo)
register_table("winogender", Table(("subset", "gender"), frozenset({
    "winogender_accuracy", "winogender_occupation_rate", "winogender_gap_male_female",
    "winogender_gotcha_gap"})),
    values={"subset": ("all", "gotcha"), "gender": ("male", "female", "neutral", "all")})
register_table("winogender_occupations", Table(("statistic",),
                                               frozenset({"winogender_pearson_r"})),
               values={"statistic": ("bls", "bergsma")})


class Winogender(Benchmark):
    """Every sentence once, in the authors' file order: two loglikelihood requests each."""
    name: ClassVar[str] = "winogender"
    family = FamilySpec(name="winogender", records="winogender", metadata_key="winogender",
                        impl="fairness_tests.benchmarks.winogender.family:WinogenderFamily",
                        gated=True, compared=True, clusters=("template", "item"))
    marker = "Winogender coreference: accuracy per pronoun gender and the male-female gap"
    tables = ("winogender", "winogender_occupations")
    drift_tables = ("winogender", "winogender_occupations")
    shown = (Shown("winogender", tables, "the run has no Winogender tables: the Winogender "
                   "benchmark was not run"),)
    rules = "rules.yaml"
    properties = {
        "test_winogender_gender_gap": {"tables": "winogender",
                                       "metrics": "winogender_gap_male_female"},
        "test_winogender_accuracy": {"tables": "winogender", "metrics": "winogender_accuracy"},
        "test_winogender_gotcha_gap": {"tables": "winogender",
                                       "metrics": "winogender_gotcha_gap"},
    }
    recordings = {"embedded:gemma-3-270m": "recordings/embedded-gemma-3-270m.jsonl.gz"}
    source = "fairness_tests.benchmarks.winogender.data:SOURCE"
    card_schema = "card_schema.yaml"

    def requests(self, family: WinogenderFamily) -> list[Request]:
        return family.requests()
