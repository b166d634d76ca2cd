"""The scorer options of the configuration spec (:mod:`fairness_tests.pipeline.config`):
several scorers of the same generations (lexical rubrics, a judge model, a local
classifier) and their agreement."""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from fairness_tests.core.options import Checked, opt

#: the registered scorers (``fairness_tests.scoring.registry.SCORERS``, which the spec
#: must not import: loading it costs the plugin nothing); a test keeps them equal
SCORER_NAMES = ("published", "strict", "judge", "classifier")
JUDGE = "judge and classifier scorers"


def split_scorers(names: Iterable[str]) -> tuple[str, ...]:
    """``("published,strict", "judge")`` -> ``("published", "strict", "judge")``."""
    return tuple(x.strip() for n in names for x in str(n).split(",") if x.strip())


@dataclass(frozen=True, kw_only=True)
class ScorerOptions(Checked):
    """Several scorers of the same generations: lexical rubrics, a judge model, a local
    classifier; their agreement."""
    scorers: tuple[str, ...] | None = opt(
        None, "scorers of the generations, the first the run's own (its tables and "
        "verdicts), comma- or space-separated: published, strict, judge, classifier or a "
        "lexical rubric file; their agreement is tabulated (default: --rubric, and "
        "--compare-rubric for scorer sensitivity)", metavar="SCORER", group=JUDGE,
        role="input")
    judge_model: str | None = opt(None, "the judge scorer's model: a litellm model id, an "
                                  "OpenAI-compatible server's model (with --judge-api-base) "
                                  "or embedded:gemma-3-270m / a checkpoint directory",
                                  metavar="MODEL", group=JUDGE)
    judge_api_base: str | None = opt(None, "OpenAI-compatible server of the judge model",
                                     metavar="URL", group=JUDGE, regen=True)
    judge_rubric: str | None = opt(None, "judge rubric file: labels and their definitions "
                                   "(default: judge_default, the lexical rubric's refusal, "
                                   "deflection, stereotype, demeaning)", metavar="FILE",
                                   group=JUDGE, role="input")
    judge_temperature: float = opt(0.0, "the judge's sampling temperature", ge=0.0, le=2.0,
                                   metavar="T", group=JUDGE)
    judge_max_tokens: int = opt(128, "new tokens of a judge's answer", ge=8, metavar="N",
                                group=JUDGE)
    judge_repeats: int = opt(1, "judge every text K times at --judge-temperature and report "
                             "how often the judge agrees with itself", ge=1, le=20,
                             metavar="K", group=JUDGE)
    classifier: str | None = opt(None, "the classifier scorer's model: a local "
                                 "transformers text-classification directory",
                                 metavar="DIR", path=True, group=JUDGE)
    classifier_labels: tuple[str, ...] | None = opt(
        None, "the classifier's labels as rubric labels: MODEL_LABEL=RUBRIC_LABEL (e.g. "
        "toxic=demeaning)", metavar="MAP", group=JUDGE)
    classifier_threshold: float = opt(0.5, "a rubric label is 1 when the classifier's score "
                                      "of a label mapped to it reaches this", ge=0.0, le=1.0,
                                      group=JUDGE)

    def scorer_list(self, rubric: str, compare: str | None) -> tuple[str, ...]:
        """The scorers in force: ``--scorers``, else the rubric (and the compared one)."""
        if self.scorers:
            return split_scorers(self.scorers)
        return (rubric,) if not compare or compare == rubric else (rubric, compare)

    def cross_check(self) -> Iterable[tuple[str, str]]:
        names = split_scorers(self.scorers or ())
        for n in names:
            if n not in SCORER_NAMES and not os.path.isfile(n):
                yield "scorers", (f"unknown scorer {n!r}; scorers: {', '.join(SCORER_NAMES)} "
                                  "or a lexical rubric file")
        if len(set(names)) != len(names):
            yield "scorers", f"a scorer is named twice: {' '.join(names)}"
        if "judge" in names and not self.judge_model:
            yield "scorers", "the judge scorer needs a judge model (--judge-model)"
        if "classifier" in names and not (self.classifier and self.classifier_labels):
            yield "scorers", ("the classifier scorer needs a model and its label map "
                              "(--classifier, --classifier-labels)")
