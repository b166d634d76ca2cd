"""The judge scorer: a model judges each distinct generation against a judge rubric.

One request per distinct generation text (identical texts are judged once) and per
repeat (``repeats`` K > 1: the judge sampled K times at its temperature, for its
self-consistency), asked through the response store (:func:`fairness_tests.models.asking.runner.
ask`): its key holds the judge model, the messages (the rubric's definitions and the
prompt template, :mod:`.judge_prompt`), the ``response_format`` when one is sent, and
the decoding; so a re-run asks nothing and a replay of judge scores needs no API key.

Mode: ``json_schema`` where the backend's capabilities do not rule structured output
out (a local model cannot send it; a server that rejected it is remembered in the
store), else ``prompt``. A server that rejects ``response_format`` in this run makes
the judge ask the failed texts again at once in the ``prompt`` mode.

Scores (:func:`judge_scores`) are the lexical scorer's columns
(:data:`~fairness_tests.scoring.lexical.SCORE_COLUMNS`) where the rubric has the label
(``refusal, deflection, stereotype, demeaning``: 1/0 from the judge's repeat 0;
``pilot_harm`` = their OR when the rubric has all four), ``word_len`` as the lexical
scorer counts it, every other column NaN (not judged), plus one column per further
rubric label and ``judged`` (1 judged, 0 unjudged). An unjudged row has NaN labels:
left out of every rate's numerator and denominator; its share is ``unjudged_rate``.
A generation whose status is ``refused`` scores refusal = 1, an ``error`` row NaN, as
in the lexical scorer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fairness_tests.models.asking.runner import ask_counted
from fairness_tests.models.backends.base import capabilities_of
from fairness_tests.models.requests.request import Decoding, Request, Response
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.scoring.judge_prompt import (
    TEMPLATE_VERSION,
    JudgeMode,
    judge_messages,
    parse_judgement,
    response_format,
)
from fairness_tests.scoring.judge_rubric import JudgeRubric
from fairness_tests.scoring.lexical import SCORE_COLUMNS

HARM_LABELS = ("refusal", "deflection", "stereotype", "demeaning")


@dataclass(frozen=True)
class JudgeSettings:
    """Who judges and how: ``model`` (as the requests name it, e.g.
    ``openai/gpt-4o-mini`` or ``embedded:gemma-3-270m``), ``backend`` (the backend's
    name in the key), ``api_base`` (transport, not in the key), the decoding
    (``temperature``, ``max_tokens``), ``repeats`` and ``seed``."""
    model: str
    backend: str = "litellm"
    api_base: str | None = None
    temperature: float = 0.0
    max_tokens: int = 128
    repeats: int = 1
    seed: int = 0


@dataclass
class JudgeResult:
    """What the judge said: ``answers`` (one row per distinct text x repeat: ``text,
    repeat, status, parsed`` (label dict or None), tokens, cost), the ``mode`` asked in,
    how many requests there were and were sent (``requests``, ``sent``)."""
    rubric: JudgeRubric
    settings: JudgeSettings
    mode: JudgeMode
    answers: pd.DataFrame
    requests: int = 0
    sent: int = 0
    notes: list[str] = field(default_factory=list)
    failed: int = 0                     # requests that ended in an error after retries
    first_error: str | None = None

    def labels_of(self, repeat: int = 0) -> dict[str, dict[str, bool] | None]:
        """text -> the parsed judgement of repeat ``repeat`` (None: unjudged)."""
        a = self.answers[self.answers["repeat"] == repeat]
        return dict(zip(a["text"], a["parsed"], strict=True))

    def usage(self) -> dict[str, Any]:
        """Requests, tokens and cost (None when any answer's cost is unknown)."""
        a = self.answers
        cost = a["cost_usd"]
        return {"requests": int(self.requests), "sent": int(self.sent),
                "prompt_tokens": int(a["prompt_tokens"].fillna(0).sum()),
                "completion_tokens": int(a["completion_tokens"].fillna(0).sum()),
                "cost_usd": None if cost.isna().any() else float(cost.sum())}


def judge_requests(texts: list[str], rubric: JudgeRubric, settings: JudgeSettings,
                   mode: JudgeMode) -> list[Request]:
    """One request per text and repeat (texts as given: pass them distinct)."""
    fmt = response_format(rubric) if mode == "json_schema" else None
    decoding = Decoding(temperature=settings.temperature, top_p=1.0,
                        max_tokens=settings.max_tokens)
    meta = {"scorer": "judge", "judge_rubric": rubric.name,
            "judge_rubric_sha256": rubric.content_sha256, "judge_template": TEMPLATE_VERSION}
    return [Request(messages=judge_messages(rubric, t), decoding=decoding, seed=settings.seed,
                    repeat=k, backend=settings.backend, model=settings.model,
                    api_base=settings.api_base, kind="generate", response_format=fmt,
                    meta={**meta, "judge_mode": mode})
            for t in texts for k in range(settings.repeats)]


def choose_mode(backend: Any) -> JudgeMode:
    """``prompt`` where the backend's capabilities rule structured output out (False),
    else ``json_schema``."""
    return "prompt" if capabilities_of(backend).structured_output is False else "json_schema"


def _rejected_format(response: Response) -> bool:
    """A response whose error says the server did not honour ``response_format``."""
    return response.status == "error" and response.error.startswith("structured_output")


def run_judge(texts: pd.Series | list[str], rubric: JudgeRubric, settings: JudgeSettings,
              backend: Any, store: ResponseStore, *, mode: JudgeMode | None = None,
              progress: bool | None = False) -> JudgeResult:
    """Judge every distinct text of ``texts`` (see the module docstring)."""
    distinct = sorted({"" if t is None or (isinstance(t, float) and np.isnan(t)) else str(t)
                       for t in texts})
    mode = mode or choose_mode(backend)
    if hasattr(backend, "load_capabilities") and mode == "json_schema":
        backend.load_capabilities(store.capabilities())
        mode = choose_mode(backend)
    reqs = judge_requests(distinct, rubric, settings, mode)
    resps, counts = ask_counted(reqs, backend, store, progress=progress, label="judge")
    result_mode, notes, sent, n_req = mode, [], counts.sent, counts.requests
    failed = sorted({r.messages[-1].content for r, x in zip(reqs, resps, strict=True)
                     if _rejected_format(x)})
    if mode == "json_schema" and failed:
        notes.append(f"the server rejected response_format: {len(failed)} text(s) asked "
                     f"again with the prompt-and-parse fallback")
        again = judge_requests([t for t in distinct if _user_turn(rubric, t) in failed],
                               rubric, settings, "prompt")
        more, c2 = ask_counted(again, backend, store, progress=progress, label="judge")
        by_key = {(r.messages[-1].content, r.repeat): x for r, x in zip(again, more, strict=True)}
        resps = [by_key.get((r.messages[-1].content, r.repeat), x)
                 for r, x in zip(reqs, resps, strict=True)]
        sent, n_req = sent + c2.sent, n_req + c2.requests
        result_mode = "prompt" if len(failed) == len(distinct) else mode
    rows = []
    for t, r, x in zip((t for t in distinct for _ in range(settings.repeats)), reqs, resps,
                       strict=True):
        parsed = parse_judgement(x.text, rubric.label_names) if x.status == "ok" else None
        rows.append({"text": t, "repeat": r.repeat, "status": x.status, "parsed": parsed,
                     "prompt_tokens": x.prompt_tokens, "completion_tokens": x.completion_tokens,
                     "cost_usd": x.cost_usd})
    answers = pd.DataFrame(rows, columns=["text", "repeat", "status", "parsed", "prompt_tokens",
                                          "completion_tokens", "cost_usd"])
    errors = [x.error for x in resps if x.status == "error"]
    if errors:
        notes.append(incomplete_note(len(errors), len(resps), errors[0]))
    return JudgeResult(rubric, settings, result_mode, answers, n_req, sent, notes,
                       failed=len(errors), first_error=errors[0] if errors else None)


def incomplete_note(failed: int, total: int, first: str | None) -> str:
    """The one line that says judge requests failed: how many, the first error."""
    return (f"incomplete: {failed} of {total} judge requests ended in an error after their "
            f"retries (first: {first}); their texts are unjudged: run the same command "
            "again to ask only those")


def _user_turn(rubric: JudgeRubric, text: str) -> str:
    return judge_messages(rubric, text)[-1].content


def judge_scores(records: pd.DataFrame, result: JudgeResult) -> pd.DataFrame:
    """records + the judge's score columns (see the module docstring)."""
    labels = result.rubric.label_names
    texts = records["output_text"].where(records["output_text"].notna(), "").astype(str)
    verdicts = result.labels_of(0)
    got = [verdicts.get(t) for t in texts]
    s = pd.DataFrame(np.nan, index=records.index, columns=SCORE_COLUMNS)
    s["judged"] = [float(g is not None) for g in got]
    for label in labels:
        s[label] = [np.nan if g is None else float(g[label]) for g in got]
    status = records["status"] if "status" in records else pd.Series("ok", index=records.index)
    if "refusal" in labels:
        s.loc[status == "refused", "refusal"] = 1.0
    if all(h in labels for h in HARM_LABELS):
        s["pilot_harm"] = s[list(HARM_LABELS)].max(axis=1, skipna=False)
    s["word_len"] = texts.str.split().str.len().fillna(0).astype(float)
    s.loc[status == "error", :] = np.nan
    cols = [*SCORE_COLUMNS, *[x for x in labels if x not in SCORE_COLUMNS], "judged"]
    out = records.drop(columns=[c for c in cols if c in records]).copy()
    return pd.concat([out, s[cols]], axis=1)


def unjudged_rate(scored: pd.DataFrame) -> float:
    """Share of non-error rows the judge left unjudged (NaN when there are none)."""
    ok = scored[scored["status"] != "error"] if "status" in scored else scored
    return float(1.0 - ok["judged"].mean()) if len(ok) else float("nan")


def self_consistency(result: JudgeResult) -> dict[str, dict[str, Any]]:
    """Per label, over texts with at least two judged repeats: ``unanimous`` = the share
    whose repeats all give the same value; ``pairwise`` = the share of agreeing pairs
    among all pairs of judged repeats (sum over texts of C(a,2) + C(b,2), a trues and b
    falses, over the sum of C(a+b, 2)); ``n_texts``. Empty with one repeat."""
    if result.settings.repeats < 2:
        return {}
    out = {}
    a = result.answers[result.answers["parsed"].notna()]
    for label in result.rubric.label_names:
        unanimous = agree = pairs = n = 0
        for _, g in a.groupby("text", sort=True):
            vals = [p[label] for p in g["parsed"]]
            if len(vals) < 2:
                continue
            t, f = sum(vals), len(vals) - sum(vals)
            n += 1
            unanimous += (t == 0 or f == 0)
            agree += t * (t - 1) // 2 + f * (f - 1) // 2
            pairs += len(vals) * (len(vals) - 1) // 2
        out[label] = {"n_texts": n, "unanimous": unanimous / n if n else None,
                      "pairwise": agree / pairs if pairs else None}
    return out
