"""THE registry of scorers: one declaration per scorer (``@scorer(name)``).

A scorer turns a records table (``output_text``, ``status``, the slice columns) into
the same table with score columns (:data:`~fairness_tests.scoring.lexical.SCORE_COLUMNS`,
NaN where it does not score that label) and says which 0/1 labels it gives (the labels
agreement is computed over) and what a card names of it (:class:`Scored`).

Registered: ``published`` and ``strict`` (the lexical rubrics), ``judge`` (a judge model,
:mod:`.judge`), ``classifier`` (a local text classifier, :mod:`.classifier`). A scorer
name that is not registered but is a lexical rubric file's path scores with that rubric.
What the judge and classifier scorers need (the judge's settings, backend and store; the
classifier's spec) comes in a :class:`ScoringContext`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.io import sha256_file
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.scoring.classifier import ClassifierSpec, classifier_info, classifier_scores
from fairness_tests.scoring.judge import (
    HARM_LABELS,
    JudgeResult,
    JudgeSettings,
    judge_scores,
    run_judge,
    self_consistency,
    unjudged_rate,
)
from fairness_tests.scoring.judge_prompt import TEMPLATE_VERSION, USER_TEMPLATE, JudgeMode
from fairness_tests.scoring.judge_rubric import JudgeRubric, load_judge_rubric
from fairness_tests.scoring.lexical import FLAG_METRICS, score
from fairness_tests.scoring.rubric import BUILTIN, Rubric, load_rubric

#: the 0/1 labels a lexical rubric gives
LEXICAL_LABELS = tuple(FLAG_METRICS)


@dataclass
class ScoringContext:
    """What the model-based scorers need: the judge (``judge`` settings, ``judge_rubric``,
    ``judge_backend``, the ``store`` its answers go through) and the ``classifier``."""
    judge: JudgeSettings | None = None
    judge_rubric: JudgeRubric | None = None
    judge_backend: Any = None
    store: ResponseStore | None = None
    classifier: ClassifierSpec | None = None
    progress: bool | None = False
    #: the judge's mode when its backend cannot tell (a replay of a live judge's answers)
    judge_mode: JudgeMode | None = None


@dataclass
class Scored:
    """A scorer's output: ``scored`` (records + score columns), ``labels`` (its 0/1
    labels), ``info`` (kind, model, version, rubric, prompt: what the card names),
    ``judge`` (the judge's answers, for the judge scorer)."""
    name: str
    scored: pd.DataFrame
    labels: tuple[str, ...]
    info: dict[str, Any] = field(default_factory=dict)
    judge: JudgeResult | None = None


ScorerFn = Callable[[pd.DataFrame, ScoringContext], Scored]
SCORERS: dict[str, ScorerFn] = {}


def scorer(name: str) -> Callable[[ScorerFn], ScorerFn]:
    """Register ``fn(records, context) -> Scored`` as the scorer ``name``."""
    def register(fn: ScorerFn) -> ScorerFn:
        SCORERS[name] = fn
        return fn
    return register


def lexical_scored(records: pd.DataFrame, rubric: Rubric) -> Scored:
    """The lexical scorer of ``rubric`` as a :class:`Scored`."""
    info = {"kind": "lexical", "rubric": rubric.name, "semantics": rubric.semantics,
            "rubric_file": str(rubric.path) if rubric.path else None,
            "rubric_sha256": sha256_file(rubric.path) if rubric.path else None}
    return Scored(rubric.name, score(records, rubric), LEXICAL_LABELS, info)


@scorer("published")
def _published(records: pd.DataFrame, ctx: ScoringContext) -> Scored:
    return lexical_scored(records, load_rubric("published"))


@scorer("strict")
def _strict(records: pd.DataFrame, ctx: ScoringContext) -> Scored:
    return lexical_scored(records, load_rubric("strict"))


@scorer("judge")
def _judge(records: pd.DataFrame, ctx: ScoringContext) -> Scored:
    if ctx.judge is None or ctx.judge_backend is None or ctx.store is None:
        raise ConfigError("the judge scorer needs a judge model", key="--judge-model")
    rubric = ctx.judge_rubric or load_judge_rubric()
    judged = records if "status" not in records else records[records["status"] != "error"]
    result = run_judge(judged["output_text"], rubric, ctx.judge, ctx.judge_backend, ctx.store,
                       mode=ctx.judge_mode, progress=ctx.progress)
    scored = judge_scores(records, result)
    s = ctx.judge
    info = {"kind": "judge", "model": s.model, "backend": s.backend,
            "version": _backend_version(ctx.judge_backend),
            "rubric": rubric.name, "rubric_version": rubric.version,
            "rubric_file": str(rubric.path) if rubric.path else None,
            "rubric_sha256": rubric.content_sha256, "prompt": TEMPLATE_VERSION,
            "prompt_template": USER_TEMPLATE, "mode": result.mode,
            "temperature": s.temperature, "max_tokens": s.max_tokens, "repeats": s.repeats,
            "unjudged_rate": unjudged_rate(scored), "usage": result.usage(),
            "self_consistency": self_consistency(result), "notes": list(result.notes),
            "failed": result.failed, "first_error": result.first_error}
    return Scored("judge", scored, with_derived(rubric.label_names), info, result)


@scorer("classifier")
def _classifier(records: pd.DataFrame, ctx: ScoringContext) -> Scored:
    if ctx.classifier is None:
        raise ConfigError("the classifier scorer needs --classifier PATH and "
                          "--classifier-labels", key="--classifier")
    spec = ctx.classifier
    return Scored("classifier", classifier_scores(records, spec),
                  with_derived(spec.rubric_labels),
                  {"kind": "classifier", **classifier_info(spec)})


def with_derived(labels: tuple[str, ...]) -> tuple[str, ...]:
    """``labels`` + ``pilot_harm`` (their OR) when they hold all four harm labels."""
    if all(h in labels for h in HARM_LABELS) and "pilot_harm" not in labels:
        return (*labels, "pilot_harm")
    return labels


def _backend_version(backend: Any) -> str | None:
    try:
        return backend.info().version
    except Exception:        # a backend that cannot say without loading: unknown
        return None


def check_scorers(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``names`` checked: registered scorers or lexical rubric files; no repeats."""
    out = []
    for n in names:
        if n not in SCORERS and n not in BUILTIN and not Path(n).is_file():
            raise ConfigError(f"unknown scorer {n!r}; scorers: {', '.join(SCORERS)} or a "
                              f"lexical rubric file", key="--scorers")
        if n in out:
            raise ConfigError(f"scorer {n!r} named twice", key="--scorers")
        out.append(n)
    return tuple(out)


def scorer_infos(by: Mapping[str, Scored]) -> list[dict[str, Any]]:
    """What a run records of each of its scorers (``by``: :func:`score_with`'s answer):
    the name first, then the scorer's info (kind, model, version, rubric, prompt; a
    judge's ``failed`` requests, ``first_error`` and ``notes``, which say when the run is
    incomplete)."""
    return [{"name": n, **s.info} for n, s in by.items()]


def score_with(names: tuple[str, ...] | list[str], records: pd.DataFrame,
               ctx: ScoringContext) -> dict[str, Scored]:
    """Every scorer of ``names`` over ``records``, by name, in the order given."""
    out = {}
    for n in check_scorers(names):
        fn = SCORERS.get(n)
        s = fn(records, ctx) if fn is not None else lexical_scored(records, load_rubric(n))
        out[s.name if fn is None else n] = s
    return out
