"""The options of BBQ's own commands, ``fairness-tests bbq filter`` and ``bbq score``
(declared with the configuration spec of :mod:`fairness_tests.pipeline.config`: their
command lines are generated from these fields, and every value is checked by the same
code; ``[tool.fairness_tests]`` keys are checked against them through ``Benchmark.configs``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from fairness_tests.benchmarks.bbq.options import BBQClusterOption, BBQDataOptions
from fairness_tests.core.options import opt
from fairness_tests.pipeline.config import ScoredRunOptions, StatsOptions


@dataclass(frozen=True, kw_only=True)
class BBQFilterConfig(BBQDataOptions):
    """``fairness-tests bbq filter``: item counts per dataset, context and polarity."""
    CLI_FLAGS: ClassVar[dict[str, tuple[str, ...]]] = {
        "bbq_dir": ("--data", "--bbq-dir"), "bbq_filter": ("--filter", "--bbq-filter"),
        "bbq_cluster": ("--cluster", "--bbq-cluster")}
    format: Literal["table", "json"] = opt("table", "output format", pytest=False, toml=False)
    require_official: bool = opt(False, "fail unless every file's sha256 is the official "
                                 "release's", pytest=False)


@dataclass(frozen=True, kw_only=True)
class BBQScoreConfig(BBQFilterConfig, StatsOptions, BBQClusterOption, ScoredRunOptions):
    """``fairness-tests bbq score``: anyone's BBQ predictions, scored and judged."""
    predictions: str = opt(None, "JSONL, one answer a line (an option index, a letter or "
                           "the answer text), or lm-evaluation-harness --log_samples output "
                           "of its bbq task", metavar="FILE", path=True, pytest=False,
                           toml=False)
    answer_field: str | None = opt(None, "the field of a line that holds the answer "
                                   "(default: answer; the BBQ authors' results files: "
                                   "unifiedqa-t5-11b_pred_race, _arc or _qonly)", metavar="NAME",
                                   pytest=False, toml=False)
    conventions: Literal["project", "bbq-authors"] = opt(
        "project", "scoring conventions: project (every answer and item counts, an unmatched "
        "answer is wrong) or bbq-authors (the BBQ authors' analysis: unmatched answers and "
        "items without a target dropped, unknown by the chosen option's tag, name-proxy "
        "items as separate rows)", pytest=False)
    concentration: float = opt(1.0, "Dirichlet concentration of smoothed DF", gt=0)
    min_group_n: int = opt(30, "groups with fewer items get a warning", ge=1, metavar="N")
