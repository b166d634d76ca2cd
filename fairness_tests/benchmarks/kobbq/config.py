"""The options of ``fairness-tests kobbq score`` (KoBBQ's own option group, declared with
the configuration spec of :mod:`fairness_tests.pipeline.config`: its command line is
generated from these fields, and every value is checked by the same code)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from fairness_tests.core.options import opt
from fairness_tests.pipeline.config import ScoredRunOptions, StatsOptions


@dataclass(frozen=True, kw_only=True)
class KoBBQScoreConfig(StatsOptions, ScoredRunOptions):
    """``fairness-tests kobbq score FILE``: KoBBQ predictions made elsewhere, scored as the
    audit scores its own answers and judged by the same rules."""
    CLI_FLAGS: ClassVar[dict[str, tuple[str, ...]]] = {"kobbq_cluster": ("--cluster",)}
    predictions: str = opt(None, "the authors' evaluation TSV (a sample_id and a prediction "
                           "column: the test file or their per-order file) or JSONL, one "
                           '{"sample_id": ..., "prediction": ...} a line', positional=True,
                           metavar="FILE", path=True, pytest=False, toml=False)
    prompt_id: int = opt(1, "the authors' evaluation prompt (0_evaluation_prompts.tsv) the "
                         "predictions were made with: its unknown choice is the answer "
                         "'unknown'", ge=1, le=5, metavar="N", pytest=False, toml=False)
    kobbq_cluster: Literal["template", "item"] = opt(
        "template", "bootstrap unit of the intervals: whole templates or single answers",
        pytest=False, toml=False)
    data_dir: str | None = opt(None, "KoBBQ data directory (default: $FAIRNESS_KOBBQ_DIR or "
                               "../shared/benchmarks/kobbq; fairness-tests data fetch "
                               "installs it)", metavar="DIR", path=True, pytest=False,
                               toml=False)
