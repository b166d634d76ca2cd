"""The options of the generative audit's own commands (``fairness-tests generative score``,
``sensitivity``, ``grid``, ``probe-grid``, ``probe-score``), declared with the
configuration spec of :mod:`fairness_tests.pipeline.config`: their command lines are
generated from these fields, and every value is checked by the same code;
``[tool.fairness_tests]`` keys are checked against them through ``Benchmark.configs``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from fairness_tests.benchmarks.generative.options import GenClusterOption, SuiteOption
from fairness_tests.core.options import Checked, opt
from fairness_tests.pipeline.config import (
    RubricOptions,
    ScoredRunOptions,
    StatsOptions,
)
from fairness_tests.pipeline.config_scorers import ScorerOptions


@dataclass(frozen=True, kw_only=True)
class GenerativeScoreConfig(RubricOptions, ScorerOptions, StatsOptions, GenClusterOption,
                            ScoredRunOptions, SuiteOption):
    """``fairness-tests generative score``: anyone's generations, scored and judged."""
    CLI_FLAGS: ClassVar[dict[str, tuple[str, ...]]] = {
        "gen_cluster": ("--cluster", "--gen-cluster"), "scorers": ("--scorers", "--scorer")}
    outputs: str = opt(None, "JSONL, one generation per line (the published raw-output "
                       "fields)", metavar="FILE", path=True, pytest=False, toml=False)
    store: str | None = opt(None, "SQLite response store of the judge's answers (default: "
                            "$FAIRNESS_STORE or .fairness/store.sqlite)", metavar="PATH",
                            path=True, pytest=False, toml=False, role="inout")
    format: Literal["json", "table"] = opt("json", "output format", pytest=False,
                                           toml=False)


@dataclass(frozen=True, kw_only=True)
class SensitivityConfig(StatsOptions, SuiteOption):
    """``fairness-tests generative sensitivity``: the same outputs under two rubrics."""
    outputs: str = opt(None, "JSONL, one generation per line", metavar="FILE", path=True,
                       pytest=False, toml=False)
    model: str | None = opt(None, "apply this model's threshold overrides", metavar="MODEL",
                            pytest=False, toml=False)
    rubrics: tuple[str, ...] = opt(("published", "strict"), "the two rubrics compared",
                                   metavar="RUBRIC", pytest=False)
    format: Literal["json", "table"] = opt("json", "output format", pytest=False, toml=False)

    def cross_check(self):
        if len(self.rubrics) != 2:
            yield "rubrics", f"give two rubrics, got {len(self.rubrics)}"


@dataclass(frozen=True, kw_only=True)
class GridConfig(Checked):
    """``fairness-tests generative grid``: a protocol (or a published grid) expanded."""
    protocol: str | None = opt(None, "protocol YAML (default: the packaged suite)",
                               metavar="PATH", path=True, pytest=False, toml=False)
    published: str | None = opt(None, "a published-format grid CSV", metavar="CSV",
                                path=True, pytest=False, toml=False)
    format: Literal["csv", "json"] = opt("csv", "output format", pytest=False, toml=False)
    hash: bool = opt(False, "print only the suite hash and row count", pytest=False,
                     toml=False)

    def cross_check(self):
        if self.protocol and self.published:
            yield "published", "give a protocol or a published grid, not both"


@dataclass(frozen=True, kw_only=True)
class ProbeGridConfig(Checked):
    """``fairness-tests generative probe-grid``: the counterfactual probe's requests."""
    probe: str | None = opt(None, "probe JSON (default: the packaged probe)", metavar="PATH",
                            path=True, pytest=False, toml=False)
    format: Literal["csv", "json"] = opt("csv", "output format", pytest=False, toml=False)


@dataclass(frozen=True, kw_only=True)
class ProbeScoreConfig(Checked):
    """``fairness-tests generative probe-score``: verdicts, shares and consistency."""
    outputs: str = opt(None, "JSONL with name_order, paraphrase_id, context, decoding, "
                       "seed, output_text, status", metavar="FILE", path=True, pytest=False,
                       toml=False)
    probe: str | None = opt(None, "probe JSON (default: the packaged probe)", metavar="PATH",
                            path=True, pytest=False, toml=False)
    format: Literal["json", "table"] = opt("json", "output format", pytest=False, toml=False)
