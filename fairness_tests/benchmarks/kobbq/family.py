"""The KoBBQ family at work: the test split's samples (``--limit N``: the first N sample ids
per category x context x question type), their requests (the authors' evaluation prompt
``--kobbq-prompt N``, default 1, under the three circulant orders), the answers as the
authors' evaluation file holds them, the metric tables, the per-answer records and the
run metadata; and the gate's part."""
from __future__ import annotations

from typing import Any

import pandas as pd

from fairness_tests.benchmarks.kobbq import KoBBQ, card
from fairness_tests.benchmarks.kobbq import data as D
from fairness_tests.benchmarks.kobbq import metrics as M
from fairness_tests.benchmarks.kobbq import prompt as P
from fairness_tests.benchmarks.kobbq.info import KoBBQInfo
from fairness_tests.benchmarks.kobbq.options import kobbq_options
from fairness_tests.core.paths import display_path
from fairness_tests.metrics.gate import GateMetric
from fairness_tests.metrics.sum_stats import accuracy_stat, diff_stat
from fairness_tests.models.requests.request import Decoding, Request, Response
from fairness_tests.pipeline.benchmark import Asked, Family, GatePart, Results
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.views import CardProtocol

KEY = ["sample_id", "permutation"]
CELL = ["category", "context_kind", "question_type"]
RECORD_COLUMNS = [
    "sample_id", "permutation", "prompt_id", "category", "template_id", "label_annotation",
    "context_kind", "context_type", "question_type", "context", "question", "shown_a",
    "shown_b", "shown_c", "answer", "biased_answer", "prediction", "letter", "letter_probs",
    "letter_mass", "status", *M.FLAGS]
DECODING = Decoding()        # the answer is the most probable letter: T only shapes letter_probs


def limit_samples(samples: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    """At most ``limit`` samples per category x context x question type, the first by
    sample id (all when None or 0); in sample-id order."""
    if not limit:
        return samples
    return (samples.sort_values("sample_id").groupby(CELL, sort=True).head(limit)
            .sort_values("sample_id").reset_index(drop=True))


def answers_frame(samples: pd.DataFrame, requests: list[Request],
                  responses: list[Response], unknown: str) -> pd.DataFrame:
    """One row per answered request (a failed request has none), the sample's columns
    (choices and answer with the prompt's ``unknown``) and the flags of
    :func:`~.metrics.answer_flags`."""
    rows = []
    for q, r in zip(requests, responses, strict=True):
        pred, letter = P.prediction_of(q, r)
        if pred is None:
            continue
        a, b, c = q.meta["shown"]
        rows.append({"sample_id": q.meta["sample_id"], "permutation": q.meta["permutation"],
                     "prompt_id": q.meta["prompt_id"], "shown_a": a, "shown_b": b,
                     "shown_c": c, "prediction": pred, "letter": letter,
                     "letter_probs": r.letter_probs, "letter_mass": r.letter_mass,
                     "status": r.status})
    ans = pd.DataFrame(rows, columns=["sample_id", "permutation", "prompt_id", "shown_a",
                                      "shown_b", "shown_c", "prediction", "letter",
                                      "letter_probs", "letter_mass", "status"])
    return flagged(samples, ans, unknown)


def flagged(samples: pd.DataFrame, ans: pd.DataFrame, unknown: str) -> pd.DataFrame:
    """``ans`` (``sample_id``, ``prediction``, ...) joined with its samples, the unknown
    choice replaced by ``unknown``, the flags added; in sample id x order order."""
    choices = pd.Series([P.with_unknown(c, unknown) for c in samples["choices"]],
                        index=samples.index, dtype=object)
    s = samples.assign(choices=choices,
                       answer=[P.with_unknown([a], unknown)[0] for a in samples["answer"]])
    j = ans.merge(s.drop(columns=["prediction"]), on="sample_id", how="left",
                  validate="many_to_one")
    return M.answer_flags(j, unknown).sort_values(KEY).reset_index(drop=True)


def mean_mass(flags: pd.DataFrame) -> float | None:
    """The answers' mean ``letter_mass`` (None: no backend gave one)."""
    m = pd.to_numeric(flags["letter_mass"], errors="coerce").dropna()
    return round(float(m.mean()), 6) if len(m) else None


class KoBBQFamily(Family):
    """The samples of a run and how a KoBBQ request is made (the authors' prompt
    ``--kobbq-prompt``, default 1); the tables' resampling unit is ``--cluster
    kobbq=template`` (the default) or ``kobbq=item``."""

    def __init__(self, config: AuditConfig):
        super().__init__(config)
        self.cluster = config.cluster_of(KoBBQ.family.name)    # --cluster kobbq=item|template
        self.prompt_id = kobbq_options(config).kobbq_prompt
        self.data = D.load()
        self.samples = limit_samples(self.data.samples, config.limit)
        self.row = P.prompt_row(self.data.prompts, self.prompt_id)

    def requests(self) -> list[Request]:
        c = self.config
        return P.build_requests(self.samples, self.data.prompts, self.prompt_id, DECODING,
                                backend=c.backend_name(), model=c.model,
                                api_base=c.api_base, seed=c.seed)

    def results(self, asked: dict[str, Asked]) -> Results:
        c = self.config
        requests = [r for a in asked.values() for r in a.requests]
        responses = [r for a in asked.values() for r in a.responses]
        flags = answers_frame(self.samples, requests, responses, self.row["unknown"])
        tables = {
            "kobbq": M.kobbq_table(flags, "category", "category", self.cluster, c.n_boot,
                                   c.seed),
            "kobbq_labels": M.kobbq_table(flags, "label_annotation", "label", self.cluster,
                                          c.n_boot, c.seed)}
        info = KoBBQInfo(
            source=f"{D.REPO} @ {D.COMMIT}", warnings=list(D.WARNINGS),
            data_dir=display_path(self.data.directory), sha256=dict(self.data.sha256),
            release=dict(self.data.release), prompt_id=self.prompt_id,
            notes=[f"asked with {P.prompt_note(self.prompt_id, self.row)}"],
            prompt=P.query_text(self.row, "{context}", "{question}", ("{a}", "{b}", "{c}")),
            unknown=self.row["unknown"], answer_prefix=P.answer_format(self.row)[0],
            n_samples=len(self.samples), n_answers=len(flags),
            n_failed=len(requests) - len(flags), limit=c.limit,
            mean_letter_mass=mean_mass(flags), cluster=self.cluster,
            n_boot=c.n_boot, seed=c.seed, n_prompts=len({q.prompt_key() for q in requests}),
            temperature=DECODING.temperature, top_p=DECODING.top_p,
            subset="" if len(self.samples) == len(self.data.samples) else
            f"--limit {c.limit}: the first {c.limit} sample ids per category x context x "
            "question type")
        return Results(tables=tables, records={"kobbq": flags[RECORD_COLUMNS]},
                       metadata={"kobbq": info})

    @classmethod
    def card_protocol(cls, facts: Any, protocol: CardProtocol) -> None:
        """KoBBQ's prompt, decoding, out-of-choice answers, parser and record (:mod:`.card`)."""
        card.card_protocol(facts, protocol)

    @classmethod
    def gate_parts(cls) -> list[GatePart]:
        """Paired per answer (sample id x order), per category x context, templates
        resampled (``item``: answers)."""
        return [GatePart(frame=lambda rec: rec, key=tuple(KEY), by=("category", "context_kind"),
                         metrics=gate_metrics,
                         cluster_columns={"template": "template_id", "item": None},
                         carry=("template_id",))]


def _cols(names: tuple[str, ...], stat):
    return lambda g: (g[[f"{c}_b" for c in names]].to_numpy(float),
                      g[[f"{c}_c" for c in names]].to_numpy(float), stat)


def _abs(f):
    return lambda s: abs(f(s))


def _ctx(ctx: str):
    return lambda key: bool(key) and key[-1] == ctx


def gate_metrics() -> list[GateMetric]:
    """The gated KoBBQ metrics, each a function of column sums of the per-answer flags
    (:mod:`.metrics`): accuracy per context, |diff-bias| per context, out-of-choice rate."""
    return [
        GateMetric("kobbq_accuracy", _cols(("correct", "valid"), accuracy_stat), True, 0.02,
                   {"amb": "kobbq_accuracy_floor_amb", "dis": "kobbq_accuracy_floor_dis"}),
        GateMetric("kobbq_abs_diff_bias_amb",
                   _cols(("biased", "counterb", "valid"), _abs(M.diff_bias_stat)), False,
                   0.02, "kobbq_diff_bias_amb_bound", _ctx("amb")),
        GateMetric("kobbq_abs_diff_bias_dis",
                   _cols(("correct_b", "valid_b", "correct_c", "valid_c"), _abs(diff_stat)),
                   False, 0.02, "kobbq_diff_bias_dis_bound", _ctx("dis")),
        GateMetric("kobbq_ooc_rate", _cols(("ooc", "one"), accuracy_stat), False, 0.02,
                   "kobbq_ooc_rate_bound"),
    ]
