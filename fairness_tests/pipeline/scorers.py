"""What the scorers a configuration names (``--scorers``) need, for every benchmark that
scores text with them (the generative audit's
:func:`fairness_tests.benchmarks.generative.scorers.score_generations`, the templates
benchmark): the judge's backend and store, the classifier's spec
(:func:`scoring_context`, read by :func:`fairness_tests.scoring.registry.score_with`).

The judge's backend: ``embedded:...`` or a checkpoint directory -> the transformers
backend (prompt-and-parse: a local model sends no ``response_format``); anything else ->
litellm (``--judge-api-base`` for an OpenAI-compatible server; the API key from the
provider's environment variable, never stored). Its answers go through the run's store,
so a re-run asks nothing and a replay needs no key.
"""
from __future__ import annotations

import os
from typing import Any

from fairness_tests.models.backends import get_backend
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.pipeline.config import ScorerOptions
from fairness_tests.scoring.classifier import ClassifierSpec, parse_label_map
from fairness_tests.scoring.judge import JudgeSettings, choose_mode
from fairness_tests.scoring.judge_rubric import load_judge_rubric
from fairness_tests.scoring.registry import ScoringContext


def is_local(model: str) -> bool:
    """A model the transformers backend computes here (embedded or a checkpoint)."""
    return model.startswith("embedded:") or os.path.isdir(model)


def judge_backend(c: ScorerOptions) -> tuple[Any, JudgeSettings]:
    """The judge's backend (unstarted) and settings."""
    model = str(c.judge_model)
    local = is_local(model)
    if local:
        be = get_backend("transformers",
                         model="embedded" if model.startswith("embedded:") else model)
    else:
        be = get_backend("litellm", model=model, api_base=c.judge_api_base)
    return be, JudgeSettings(model=model, backend="transformers" if local else "litellm",
                             api_base=None if local else c.judge_api_base,
                             temperature=c.judge_temperature, max_tokens=c.judge_max_tokens,
                             repeats=c.judge_repeats, seed=int(getattr(c, "seed", 0) or 0))


def scoring_context(c: ScorerOptions, names: tuple[str, ...],
                    store: ResponseStore | None, progress: bool | None = False,
                    live: bool = True) -> ScoringContext:
    """What the scorers of ``names`` need, built from ``c``. Not ``live`` (an audit
    without --live): the judge's answers are replayed from the store (asked in the mode
    the live judge would use), a missing one is an error naming how to record it."""
    ctx = ScoringContext(store=store, progress=progress)
    if "judge" in names:
        ctx.judge_backend, ctx.judge = judge_backend(c)
        ctx.judge_rubric = load_judge_rubric(c.judge_rubric)
        if not live and store is not None:
            be = ctx.judge_backend
            if hasattr(be, "load_capabilities"):
                be.load_capabilities(store.capabilities())
            ctx.judge_mode = choose_mode(be)
            ctx.judge_backend = get_backend("replay", store=store, fingerprint=be.fingerprint())
    if "classifier" in names:
        ctx.classifier = ClassifierSpec(str(c.classifier),
                                        parse_label_map(c.classifier_labels),
                                        threshold=c.classifier_threshold)
    return ctx
