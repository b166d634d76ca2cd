"""Map the answers of a predictions file (:mod:`fairness_tests.benchmarks.bbq.predictions`)
to option indices of the loaded BBQ items, under either conventions.

- option index: as given; letter: the option shown at that position under the line's
  rotation (rotation 0: a = ans0); lm-eval: its argmax choice;
- answer text: the BBQ authors' rule (exact match, then the first two words of an
  option's answer_info text). Under the project's conventions the text must match
  exactly one option: none is an **unmatched** answer and two or more an
  **ambiguous** one, both invalid (counted as wrong, listed). Under the BBQ authors'
  conventions the first matching option wins (their ``case_when``) and an unmatched
  answer is dropped from accuracy and bias (counted, listed).

Where a line carries its own copy of the item, the project's conventions use the BBQ
data's options and tags; the authors' conventions use the line's (their script reads
options and tags from the results file; target_loc comes from the data either way).
Every item whose copy differs from the data is counted and listed; a copy that is a
different item (question_index, polarity, context condition or label differ) is an
error. ``chosen_unknown`` (0/1) says whether the chosen option's tag is "unknown" in
any case, for the authors' rule.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.bbq.authors import UNKNOWN_TAG, text_candidates
from fairness_tests.benchmarks.bbq.predictions import (
    CHOICE,
    COLUMNS,
    INDEX,
    ITEM_FIELDS,
    LETTER,
    MAX_LISTED,
    Predictions,
)
from fairness_tests.benchmarks.bbq.prompt import option_order
from fairness_tests.core.errors import DataError, suggest

PROJECT, BBQ_AUTHORS = "project", "bbq-authors"
OK, NULL, UNMATCHED, AMBIGUOUS = "ok", "null", "unmatched", "ambiguous"
_DATA_OF = {"question_index": "question_index", "question_polarity": "polarity",
            "context_condition": "context", "label": "label", "context": "context_text",
            "question": "question", "ans0": "ans0", "ans1": "ans1", "ans2": "ans2"}
_IDENTITY = ("question_index", "question_polarity", "context_condition", "label")


def question_only(answer_field: str) -> bool:
    """The authors' question-only baseline (``unifiedqa-t5-11b_pred_qonly``): their
    script scores it on ambiguous items only (score.R line 115)."""
    return answer_field.endswith("_qonly")


@dataclass
class Resolved:
    """The predictions table (:data:`~fairness_tests.benchmarks.bbq.predictions.COLUMNS`
    + ``status``, ``chosen_unknown``) and what a reader must know about the answers."""
    table: pd.DataFrame
    report: dict = field(default_factory=dict)


def check_against(preds: pd.DataFrame, loaded: pd.DataFrame, path) -> None:
    """Every prediction must name a loaded category and one of its items: a DataError
    names the line, the bad value and the closest valid category."""
    datasets = sorted(loaded["dataset"].unique())
    unknown = ~preds["dataset"].isin(datasets)
    if unknown.any():
        row = preds[unknown].iloc[0]
        raise DataError(f"unknown category {row['dataset']!r}{suggest(row['dataset'], datasets)}"
                        f"; the loaded BBQ data has {', '.join(datasets)} ({int(unknown.sum())} "
                        "such lines; --categories chooses what is loaded)", path=path,
                        line=int(row["line"]), key="category")
    known = pd.MultiIndex.from_frame(loaded[["dataset", "example_id"]])
    bad = ~pd.MultiIndex.from_frame(preds[["dataset", "example_id"]]).isin(known)
    if bad.any():
        row = preds[bad].iloc[0]
        raise DataError(f"{row['dataset']} example_id {int(row['example_id'])} is not in the "
                        f"BBQ data ({int(bad.sum())} such lines)", path=path,
                        line=int(row["line"]), key="example_id")


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _differences(carried: dict, data: dict) -> list[str]:
    """The fields in which a line's copy of an item differs from the data's."""
    out = []
    for f in ITEM_FIELDS:
        if f not in carried:
            continue
        if f == "answer_info":
            theirs = {f"ans{k}": [data[f"info_text{k}"], data[f"info_tag{k}"]] for k in range(3)}
            mine = {k: list(v) if isinstance(v, (list, tuple)) else v
                    for k, v in (carried[f] or {}).items()} if isinstance(carried[f], dict) \
                else carried[f]
            if not _same(mine, theirs):
                out.append(f)
        elif str(carried[f]) != str(data[_DATA_OF[f]]):
            out.append(f)
    return out


def _source(carried: dict | None, data: dict, authors: bool) -> tuple[list, list, list]:
    """(options, answer_info texts, tags) the answer is matched against."""
    if authors and carried is not None and isinstance(carried.get("answer_info"), dict):
        info = carried["answer_info"]
        try:
            return ([str(carried.get(f"ans{k}", data[f"ans{k}"])) for k in range(3)],
                    [str(info[f"ans{k}"][0]) for k in range(3)],
                    [str(info[f"ans{k}"][1]) for k in range(3)])
        except (KeyError, IndexError, TypeError):
            pass
    return ([data[f"ans{k}"] for k in range(3)], [data[f"info_text{k}"] for k in range(3)],
            [data[f"info_tag{k}"] for k in range(3)])


def _answer(kind, value, option, rotation, options, texts, authors) -> tuple[float, str]:
    if kind is None:
        return np.nan, NULL
    if kind == INDEX:
        return float(value), OK
    if kind == CHOICE:
        return float(option), OK
    if kind == LETTER:
        pos = "abc".index(value.strip().strip("().").lower())
        return float(option_order(int(rotation))[pos]), OK
    found = text_candidates(value, options, texts)
    if not found:
        return np.nan, UNMATCHED
    if len(found) > 1 and not authors:
        return np.nan, AMBIGUOUS
    return float(found[0]), OK


def resolve(preds: Predictions, items: pd.DataFrame, conventions: str = PROJECT,
            drop_disambiguated: bool = False) -> Resolved:
    """Answers -> option indices (module docstring). ``items``: the loaded BBQ items of
    the predictions' categories; ``drop_disambiguated``: score the ambiguous items only
    (the authors' question-only baseline)."""
    t = preds.table
    check_against(t, items, preds.path)
    authors = conventions == BBQ_AUTHORS
    data = {(r["dataset"], int(r["example_id"])): r for r in items.to_dict("records")}
    answers, status, unknown = [], [], []
    differs: dict[str, list] = {}
    fields: dict[str, int] = {}
    r: Any  # a row of the predictions table (columns of mixed types)
    for r in t.itertuples(index=False):
        d = data[(r.dataset, int(r.example_id))]
        if r.item is not None:
            diff = _differences(r.item, d)
            wrong = [f for f in diff if f in _IDENTITY]
            if wrong:
                f = wrong[0]
                raise DataError(f"the line's item is not the BBQ data's {r.dataset} example_id "
                                f"{r.example_id}: {f} {r.item[f]!r} here, "
                                f"{d[_DATA_OF[f]]!r} in the data", path=preds.path,
                                line=int(r.line), key=f)
            if diff:
                differs.setdefault(r.dataset, []).append(int(r.example_id))
                for f in diff:
                    fields[f] = fields.get(f, 0) + 1
        options, texts, tags = _source(r.item, d, authors)
        a, s = _answer(r.kind, r.value, r.option, r.rotation, options, texts, authors)
        answers.append(a)
        status.append(s)
        unknown.append(np.nan if np.isnan(a) else float(tags[int(a)].lower() == UNKNOWN_TAG))
    out = pd.DataFrame({"dataset": t["dataset"], "example_id": t["example_id"],
                        "repeat": t["repeat"], "rotation": t["rotation"],
                        "answer": np.array(answers, dtype=np.float64),
                        "letter_probs": t["letter_probs"], "line": t["line"],
                        "status": status, "chosen_unknown": unknown})
    dropped = 0
    if drop_disambiguated:
        ctx = np.array([data[(ds, int(e))]["context"]
                        for ds, e in zip(out["dataset"], out["example_id"], strict=True)])
        keep = ctx != "disambig"
        dropped = int((~keep).sum())
        out, t = out[keep].reset_index(drop=True), t[keep].reset_index(drop=True)
    report = _report(preds, t, out, conventions, differs, fields)
    if drop_disambiguated:
        report["question_only"] = {
            "dropped_disambiguated": dropped,
            "why": "the BBQ authors score their question-only baseline on ambiguous items "
                   "only (BBQ_calculate_bias_score.R line 115)"}
    return Resolved(table=out[[*COLUMNS, "status", "chosen_unknown"]], report=report)


def _listed(out: pd.DataFrame, t: pd.DataFrame, status: str) -> list[dict]:
    sel = out.index[out["status"] == status][:MAX_LISTED]
    at: Any = t.at      # pandas-stubs: a cell is any scalar; line and example_id are ints
    return [{"line": int(at[i, "line"]), "category": at[i, "dataset"],
             "example_id": int(at[i, "example_id"]), "answer": at[i, "value"]} for i in sel]


def _report(preds: Predictions, t: pd.DataFrame, out: pd.DataFrame, conventions: str,
            differs: dict[str, list], fields: dict[str, int]) -> dict:
    """What a reader must know about the answers (``t``: the lines scored)."""
    n = {s: int((out["status"] == s).sum()) for s in (NULL, UNMATCHED, AMBIGUOUS)}
    rep: dict[str, Any]
    rep = {"format": preds.format, "field": preds.field, "kind": preds.kind,
           "conventions": conventions, "n_lines": int(len(t)), "null": n[NULL],
           "unmatched": n[UNMATCHED], "ambiguous": n[AMBIGUOUS],
           "treatment": ("dropped from accuracy and bias (the BBQ authors' conventions)"
                         if conventions == BBQ_AUTHORS else
                         "invalid: counted as wrong and in invalid_rate")}
    if n[UNMATCHED]:
        rep["unmatched_answers"] = _listed(out, t, UNMATCHED)
    if n[AMBIGUOUS]:
        rep["ambiguous_answers"] = _listed(out, t, AMBIGUOUS)
    if differs:
        ids = {ds: sorted(set(v)) for ds, v in sorted(differs.items())}
        rep["item_differs"] = {
            "n_items": sum(len(v) for v in ids.values()), "fields": dict(sorted(fields.items())),
            "example_ids": {ds: v[:MAX_LISTED] for ds, v in ids.items()},
            "used": ("the predictions file's options and tags (as the BBQ authors' script "
                     "reads them); target_loc from the data" if conventions == BBQ_AUTHORS
                     else "the BBQ data's items")}
    return rep
