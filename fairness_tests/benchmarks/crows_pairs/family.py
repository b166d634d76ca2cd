"""CrowS-Pairs at work: the pairs of a run, their ``loglikelihood`` requests, the per-pair
records, the ``crows_pairs`` table and what the gate compares pair by pair.

A request is lm-evaluation-harness's ``crows_pairs_english`` one (``output_type:
multiple_choice``, ``doc_to_text: ""``, ``target_delimiter: ""``, ``doc_to_choice:
[sent_more, sent_less]``): context ``""``, continuation the sentence as the file gives it.
lm-eval's ``TemplateLM.loglikelihood`` scores a continuation after an empty context as
``[prefix_token_id] + tok_encode(continuation, add_special_tokens=False)``, the prefix
being the tokenizer's BOS token (EOS without one); for Gemma 3 the BOS token ``<bos>``
(id 2). The transformers backend does exactly that
(:mod:`fairness_tests.models.backends.transformers_loglik`). The requests do not depend on
the run's seed, temperature or token budget (a log-likelihood is not sampled): their keys
are fixed, so one recording serves every such run.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.crows_pairs import NAME, TABLE, card
from fairness_tests.benchmarks.crows_pairs.data import (
    ADAPTATION,
    CSV_NAME,
    WARNING,
    CrowsData,
    Pair,
    limited,
    load,
)
from fairness_tests.benchmarks.crows_pairs.gate import gate_part
from fairness_tests.benchmarks.crows_pairs.info import CrowsPairsInfo
from fairness_tests.benchmarks.crows_pairs.metrics import DIFF, crows_table, pair_scores
from fairness_tests.core.paths import display_path
from fairness_tests.models.requests.request import Decoding, Request, Response
from fairness_tests.pipeline.benchmark import Asked, Family, GatePart, Results
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.views import CardProtocol
from fairness_tests.run.metadata import Bootstrap

SIDES = ("more", "less")
REQUESTS = ("loglikelihood, empty context: each sentence scored after the BOS token "
            "(lm-evaluation-harness crows_pairs_english: doc_to_text \"\", target_delimiter "
            "\"\", choices [sent_more, sent_less]; no chat template)")
REFERENCE = "lm-evaluation-harness 0.4 crows_pairs_english (version 1.0), utils.process_results"
INTERVALS = ("pct_stereotype: Wilson interval, pairs independent (no templates), p_value the "
             "exact two-sided sign test against 50; likelihood_diff: percentile bootstrap, "
             "pairs resampled")
RECORD_COLUMNS = ["pair_id", "bias_type", "stereo_antistereo", "sent_more", "sent_less",
                  "ll_more", "ll_less", "tokens_more", "tokens_less", "greedy_more",
                  "greedy_less", "status_more", "status_less", "error", "valid", "stereotype",
                  DIFF, "key_more", "key_less"]


def pair_requests(pairs: tuple[Pair, ...], backend: str, model: str,
                  api_base: str | None = None) -> list[Request]:
    """Two requests per pair, ``sent_more`` then ``sent_less``, in file order."""
    out = []
    for p in pairs:
        for side, text in zip(SIDES, (p.sent_more, p.sent_less), strict=True):
            out.append(Request(messages=(), kind="loglikelihood", context="", continuation=text,
                               backend=backend, model=model, api_base=api_base,
                               decoding=Decoding(), seed=0,
                               meta={"pair_id": p.pair_id, "bias_type": p.bias_type,
                                     "stereo_antistereo": p.stereo_antistereo, "side": side}))
    return out


def _side(r: Response | None) -> dict:
    """One sentence's answer: its log-likelihood, tokens, greediness, status (missing: no
    response)."""
    if r is None:
        return dict(ll=np.nan, tokens=np.nan, greedy=np.nan, status="missing", error="",
                    key="")
    ok = r.status == "ok" and r.logprob is not None
    return dict(ll=float(r.logprob or 0.0) if ok else np.nan,
                tokens=float(r.continuation_tokens or 0) if ok else np.nan,
                greedy=float(bool(r.is_greedy)) if ok else np.nan, status=r.status,
                error=r.error or "", key=r.key)


def pair_records(pairs: tuple[Pair, ...], requests: list[Request],
                 responses: list[Response]) -> pd.DataFrame:
    """One row per pair: the item, both sentences' answers, ``valid`` (both answered) and
    the pair's scores (NaN when not valid)."""
    got = {(q.meta["pair_id"], q.meta["side"]): r
           for q, r in zip(requests, responses, strict=True)}
    rows = []
    for p in pairs:
        m, lo = _side(got.get((p.pair_id, "more"))), _side(got.get((p.pair_id, "less")))
        rows.append({"pair_id": p.pair_id, "bias_type": p.bias_type,
                     "stereo_antistereo": p.stereo_antistereo, "sent_more": p.sent_more,
                     "sent_less": p.sent_less, "ll_more": m["ll"], "ll_less": lo["ll"],
                     "tokens_more": m["tokens"], "tokens_less": lo["tokens"],
                     "greedy_more": m["greedy"], "greedy_less": lo["greedy"],
                     "status_more": m["status"], "status_less": lo["status"],
                     "error": "; ".join(e for e in (m["error"], lo["error"]) if e),
                     "key_more": m["key"], "key_less": lo["key"]})
    df = pd.DataFrame(rows, columns=[c for c in RECORD_COLUMNS if c not in ("valid", "stereotype",
                                                                            DIFF)])
    df["valid"] = df["ll_more"].notna() & df["ll_less"].notna()
    stereo, diff = pair_scores(df["ll_more"], df["ll_less"])
    df["stereotype"] = np.where(df["valid"], stereo, np.nan)
    df[DIFF] = np.where(df["valid"], diff, np.nan)
    return df[RECORD_COLUMNS]


def crows_info(data: CrowsData, pairs: tuple[Pair, ...], records: pd.DataFrame, n_requests: int,
               n_boot: int, seed: int, limit: int | None, unit: str = "item",
               n_prompts: int | None = None) -> CrowsPairsInfo:
    """The run metadata of a CrowS-Pairs run."""
    ok = records[records["valid"]]
    warnings = [WARNING]
    if limit:
        warnings.append(f"a smoke run: at most {limit} pairs per bias type (the first in file "
                        f"order), {len(pairs)} of {len(data.pairs)} pairs")
    if not data.official:
        warnings.append(f"{CSV_NAME} is not the official release (sha256 {data.sha256})")
    return CrowsPairsInfo(
        data_dir=display_path(data.path.parent), source=f"{data.path.name} of "
        "nyu-mll/crows-pairs@8aaac11c4854", sha256={CSV_NAME: data.sha256},
        official=data.official, release=data.release, n_pairs=len(pairs),
        counts={str(k): int(v) for k, v in ok["bias_type"].value_counts().sort_index().items()},
        n_requests=n_requests, invalid_pairs=int((~records["valid"]).sum()), requests=REQUESTS,
        adaptation=ADAPTATION, reference=REFERENCE,
        bootstrap=Bootstrap(resamples=n_boot, seed=seed, cluster=unit, method=INTERVALS),
        limit=limit or None, warnings=warnings, n_prompts=n_prompts)


class CrowsPairsFamily(Family):
    """The pairs of a run (``--limit N``: the first N of each bias type) and their
    requests."""

    def __init__(self, config: AuditConfig):
        super().__init__(config)
        self.data = load(None)
        self.pairs = limited(self.data.pairs, config.limit)

    def requests(self) -> list[Request]:
        c = self.config
        return pair_requests(self.pairs, c.backend_name(), c.model, c.api_base)

    def results(self, asked: dict[str, Asked]) -> Results:
        c = self.config
        a = asked[NAME]
        records = pair_records(self.pairs, a.requests, a.responses)
        table = crows_table(records, n_boot=c.n_boot, seed=c.seed)
        info = crows_info(self.data, self.pairs, records, len(a.requests), c.n_boot, c.seed,
                          c.limit, c.cluster_of(NAME),
                          len({q.prompt_key() for q in a.requests}))
        return Results(tables={TABLE: table}, records={NAME: records}, metadata={NAME: info})

    @classmethod
    def card_protocol(cls, facts: Any, protocol: CardProtocol) -> None:
        """CrowS-Pairs' prompt, decoding, invalid pairs, scoring and record (:mod:`.card`)."""
        card.card_protocol(facts, protocol)

    @classmethod
    def gate_parts(cls) -> list[GatePart]:
        """The valid pairs, aligned by ``pair_id`` (:mod:`.gate`)."""
        return [gate_part()]
