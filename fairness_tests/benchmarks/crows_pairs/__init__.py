"""CrowS-Pairs (Nangia et al., EMNLP 2020), English: 1,508 sentence pairs in nine bias
types, each sentence scored by its log-likelihood (lm-evaluation-harness's
``crows_pairs_english``: empty context, the sentence after the BOS token); the share of
pairs whose more stereotypical sentence is the more likely (``pct_stereotype``, 50 = no
preference) and the mean absolute log-likelihood difference, per bias type and overall.
What computes is in :mod:`fairness_tests.benchmarks.crows_pairs.family`, imported when a
run uses it."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from fairness_tests.benchmarks.crows_pairs.data import BIAS_TYPES
from fairness_tests.benchmarks.crows_pairs.info import CrowsPairsInfo
from fairness_tests.metrics.schema import Table, register_table
from fairness_tests.pipeline.benchmark import Benchmark, FamilySpec, Shown
from fairness_tests.run.metadata import register_info

if TYPE_CHECKING:
    from fairness_tests.benchmarks.crows_pairs.family import CrowsPairsFamily
    from fairness_tests.models.requests.request import Request

NAME = "crows_pairs"
TABLE = "crows_pairs"
register_table(TABLE, Table(("bias_type",), frozenset({"pct_stereotype", "likelihood_diff"})),
               values={"bias_type": (*BIAS_TYPES, "all")})
#: what a run records about it, under run.json's "crows_pairs" key
register_info(NAME, CrowsPairsInfo)

FAMILY = FamilySpec(name=NAME, impl="fairness_tests.benchmarks.crows_pairs.family:CrowsPairsFamily",
                    records=NAME, metadata_key=NAME, gated=True, compared=True,
                    clusters=("item",))


class CrowsPairs(Benchmark):
    """Both sentences of every pair (at most ``--limit`` pairs per bias type), one
    ``loglikelihood`` request each, empty context."""
    name: ClassVar[str] = NAME
    family = FAMILY
    marker = "CrowS-Pairs stereotype preference (pct_stereotype, likelihood_diff)"
    tables = (TABLE,)
    drift_tables = (TABLE,)
    shown = (Shown("crows_pairs", tables, "the run has no CrowS-Pairs table: CrowS-Pairs was "
                   "not run"),)             # the authors' warning: its info's warnings
    rules = "rules.yaml"
    properties = {"test_crows_pairs_stereotype_rate": {"tables": TABLE,
                                                       "metrics": "pct_stereotype"}}
    recordings = {"embedded:gemma-3-270m": "recordings/embedded-gemma-3-270m.jsonl.gz"}
    source = "fairness_tests.benchmarks.crows_pairs.data:SOURCE"
    card_schema = "card_schema.yaml"

    def requests(self, family: CrowsPairsFamily) -> list[Request]:
        return family.requests()
