"""KoBBQ (Jin et al., TACL 2024: Korean BBQ), declared: the authors' test split (2,280
samples, 12 categories) asked with one of the authors' five evaluation prompts
(``--kobbq-prompt``, default 1) under the three circulant option orders of their
preprocessing, scored as their evaluation script scores
it (accuracy in ambiguous and disambiguated contexts, the out-of-choice rate, the
KoBBQ diff-bias scores), BBQ's s_DIS / s_AMB beside them; what computes is in
:mod:`fairness_tests.benchmarks.kobbq.family`, imported when a run uses it; its own
command, ``fairness-tests kobbq score``, in :mod:`fairness_tests.benchmarks.kobbq.cli`."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from fairness_tests.benchmarks.kobbq.info import KoBBQInfo
from fairness_tests.metrics.schema import Table, register_table
from fairness_tests.pipeline.benchmark import Benchmark, FamilySpec, Shown
from fairness_tests.run.metadata import register_info

if TYPE_CHECKING:
    from fairness_tests.benchmarks.kobbq.family import KoBBQFamily
    from fairness_tests.models.requests.request import Request

CATEGORIES = ("age", "disability_status", "domestic_area_of_origin", "educational_background",
              "family_structure", "gender_identity", "physical_appearance",
              "political_orientation", "race_ethnicity_nationality", "religion", "ses",
              "sexual_orientation")
LABELS = ("NC", "ST", "TM")       # template labels: newly created, simply transferred, modified
METRICS = frozenset({
    "kobbq_ooc_rate", "kobbq_accuracy", "kobbq_diff_bias", "kobbq_acc_biased",
    "kobbq_acc_counterb", "kobbq_biased_rate", "kobbq_counterb_rate", "kobbq_bbq_s_dis",
    "kobbq_bbq_s_amb"})
CONTEXTS = ("amb", "dis", "all")
register_table("kobbq", Table(("category", "context"), METRICS),
               values={"category": (*CATEGORIES, "all"), "context": CONTEXTS})
register_table("kobbq_labels", Table(("label", "context"), METRICS),
               values={"label": (*LABELS, "all"), "context": CONTEXTS})
#: what a run records about it, under run.json's "kobbq" key
register_info("kobbq", KoBBQInfo)


class KoBBQ(Benchmark):
    """Every test sample under the three option orders, the prompt ``--kobbq-prompt``
    (default 1, the authors' default)."""
    name: ClassVar[str] = "kobbq"
    family = FamilySpec(name="kobbq", impl="fairness_tests.benchmarks.kobbq.family:KoBBQFamily",
                        records="kobbq", metadata_key="kobbq", gated=True, compared=True,
                        clusters=("template", "item"))
    default = False
    marker = "KoBBQ (Korean BBQ) accuracy and bias-score properties"
    tables = ("kobbq", "kobbq_labels")
    drift_tables = ("kobbq",)
    shown = (Shown("kobbq", tables, "the run has no KoBBQ tables: KoBBQ was not run"),)
    rules = "rules.yaml"
    properties = {
        "test_kobbq_bias_score": {"tables": "kobbq", "metrics": "kobbq_diff_bias"},
        "test_kobbq_accuracy": {"tables": "kobbq", "metrics": "kobbq_accuracy"},
        "test_kobbq_out_of_choice": {"tables": "kobbq", "metrics": "kobbq_ooc_rate"},
    }
    recordings = {"embedded:gemma-3-270m": "recordings/embedded-gemma-3-270m.jsonl.gz"}
    source: ClassVar[str | None] = "fairness_tests.benchmarks.kobbq.data:SOURCE"
    commands: ClassVar[str | None] = "fairness_tests.benchmarks.kobbq.cli"
    option_group: ClassVar[str | None] = "fairness_tests.benchmarks.kobbq.options:KoBBQOptions"
    configs: ClassVar[tuple[str, ...]] = (
        "fairness_tests.benchmarks.kobbq.config:KoBBQScoreConfig",)
    card_schema: ClassVar[str | None] = "card_schema.yaml"

    def requests(self, family: KoBBQFamily) -> list[Request]:
        return family.requests()
