"""Winogender at work: the sentences of a run, their requests, and the tables, records
and run metadata from the answers (:mod:`.metrics`)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.winogender import card
from fairness_tests.benchmarks.winogender import data as D
from fairness_tests.benchmarks.winogender import metrics as M
from fairness_tests.benchmarks.winogender import prompt as P
from fairness_tests.benchmarks.winogender.gate import gate_part
from fairness_tests.benchmarks.winogender.info import WinogenderInfo
from fairness_tests.core.paths import benchmark_data_dir, display_path
from fairness_tests.models.requests.request import Request
from fairness_tests.pipeline.benchmark import Asked, Family, GatePart, Results
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.views import CardProtocol
from fairness_tests.run.metadata import Bootstrap

RECORD_COLUMNS = ["sentid", "template", "occupation", "participant", "gender", "pronoun",
                  "gotcha", "label", "target", "sentence", "prompt", "prompt_id",
                  "ll_occupation", "ll_participant", "pred", "answer", "valid", "correct",
                  "chose_occupation", "status"]


def limit_templates(items: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    """A smoke run (``limit`` N): every sentence of the first N templates of each answer
    (occupation, participant) in file order, so that male and female stay paired; all
    sentences when None."""
    if not limit:
        return items
    first = items.drop_duplicates("template")
    keep = first.groupby("label", sort=True).head(limit)["template"]
    return items[items["template"].isin(set(keep))].reset_index(drop=True)


class WinogenderFamily(Family):
    """The sentences of a run and how they are asked."""

    def __init__(self, config: AuditConfig):
        super().__init__(config)
        self.data = D.load(benchmark_data_dir("winogender"))
        self.items = limit_templates(self.data.sentences, config.limit)

    def requests(self) -> list[Request]:
        c = self.config
        return P.requests(self.items.to_dict("records"), backend=c.backend_name(),
                          model=c.model, api_base=c.api_base)

    def results(self, asked: dict[str, Asked]) -> Results:
        c = self.config
        a = asked["winogender"]
        ok = [r.status == "ok" and r.logprob is not None for r in a.responses]
        ll = np.array([r.logprob if good else np.nan for r, good in zip(a.responses, ok,
                                                                          strict=True)])
        df = M.answers(self.items, ll.reshape(-1, 2))
        status = np.array([r.status for r in a.responses]).reshape(-1, 2)
        unit = c.cluster_of("winogender")
        tables = {"winogender": M.winogender_table(df, unit, c.n_boot, c.seed),
                  "winogender_occupations": M.correlation_table(df, self.data.stats,
                                                                c.n_boot, c.seed)}
        return Results(tables=tables, records={"winogender": records(df, status)},
                       metadata={"winogender": self.info(df, len({q.prompt_key()
                                                                  for q in a.requests}))})

    def info(self, df: pd.DataFrame, n_prompts: int | None = None) -> WinogenderInfo:
        c, d = self.config, self.data
        counts = {g: int((df["gender"] == g).sum()) for g in D.GENDERS}
        counts["gotcha"] = int(df["gotcha"].sum())
        return WinogenderInfo(
            data_dir=display_path(d.directory), repository=D.REPO, commit=D.COMMIT,
            sha256=dict(d.sha256), release=dict(d.release), official=d.official,
            prompt=P.DESCRIPTION, prompt_template=P.TEMPLATE, request_kind="loglikelihood",
            n_items=len(df), n_templates=int(df["template"].nunique()), counts=counts,
            n_answers=int(df["valid"].sum()), invalid_answers=int((~df["valid"]).sum()),
            bootstrap=Bootstrap(resamples=c.n_boot, seed=c.seed, cluster=c.cluster_of("winogender"),
                                method="percentile bootstrap"),
            limit=c.limit, warnings=[D.WARNING], prompt_id=P.PROMPT_ID, n_prompts=n_prompts)

    @classmethod
    def card_protocol(cls, facts: Any, protocol: CardProtocol) -> None:
        """Winogender's prompt, decoding, invalid sentences, scoring and record (:mod:`.card`)."""
        card.card_protocol(facts, protocol)

    @classmethod
    def gate_parts(cls) -> list[GatePart]:
        return [gate_part()]


def records(df: pd.DataFrame, status: np.ndarray) -> pd.DataFrame:
    """One row per sentence: its fields, the prompt, both log-likelihoods, the answer."""
    out = df.copy()
    out["prompt"] = [P.context(s, p) for s, p in zip(out["sentence"], out["pronoun"],
                                                      strict=True)]
    out["prompt_id"] = P.PROMPT_ID
    names = out[["occupation", "participant"]].to_numpy()
    out["answer"] = [names[i, p] if p >= 0 else "" for i, p in enumerate(out["pred"])]
    out["status"] = ["ok" if (s == "ok").all() else next(x for x in s if x != "ok")
                     for s in status]
    return out[RECORD_COLUMNS]
