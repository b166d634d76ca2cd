"""Scoring KoBBQ predictions made elsewhere (the command is ``fairness-tests kobbq score
FILE``, :mod:`fairness_tests.benchmarks.kobbq.cli`).

FILE is one of:

- the authors' evaluation TSV (a ``sample_id`` and a ``prediction`` column): the test
  samples file with its ``prediction`` column filled (2,280 rows, ids as in the data;
  the authors' "With Evaluation Set" step), or the output of their
  4_predictions_to_evaluation.py (one row per sample x order, ids ending ``-0``/``-1``/``-2``);
- JSONL, one ``{"sample_id": ..., "prediction": ...}`` object a line (either id form).

A prediction is the chosen choice's text, as in the authors' files; anything else
(an empty field, a letter, another text) is out of choice, as their script counts it.
The samples' attributes (choices, answers, category, template) come from the official
test file, the unknown choice written as the prompt's (``--prompt-id``, default 1:
``알 수 없음``, the data's own). Rows whose id is no test sample, or an id given twice,
are an error naming the line. :func:`scored` gives the audit's tables (``kobbq``,
``kobbq_labels``), the per-answer records in the audit's columns (:func:`records`) and
the run metadata (:func:`scored_info`).
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fairness_tests.benchmarks.kobbq import data as D
from fairness_tests.benchmarks.kobbq import metrics as M
from fairness_tests.benchmarks.kobbq import prompt as P
from fairness_tests.benchmarks.kobbq.family import KEY, RECORD_COLUMNS, flagged
from fairness_tests.benchmarks.kobbq.info import KoBBQInfo
from fairness_tests.core.errors import DataError
from fairness_tests.core.paths import display_path
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT, DEFAULT_SEED

UNPERMUTED = -1          # the order of a prediction made on the test file as it is


def split_id(sample_id: str, known: set[str], path: Path, line: int) -> tuple[str, int]:
    """(sample id, order): ``...-k`` with k in 0..2 is order k of that sample; a test
    sample's own id is :data:`UNPERMUTED`."""
    if sample_id in known:
        return sample_id, UNPERMUTED
    base, _, k = sample_id.rpartition("-")
    if base in known and k in ("0", "1", "2"):
        return base, int(k)
    raise DataError(f"sample_id {sample_id!r} is no KoBBQ test sample", path, line,
                    "sample_id")


def _text(path: Path) -> str:
    """A UTF-8 file's text; missing, unreadable or not UTF-8: one line naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 ({e.reason} at byte {e.start})", path) from None
    except OSError as e:
        raise DataError(f"cannot read the predictions file ({e.strerror})", path) from None


def _rows(path: Path) -> list[tuple[int, str, str]]:
    """(line, sample_id, prediction) of a TSV or JSONL file."""
    text = _text(path)
    if not text.strip():
        raise DataError("empty predictions file", path)
    if path.suffix in (".jsonl", ".json"):
        out = []
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"not JSON ({e.msg})", path, i) from None
            if not isinstance(obj, dict) or "sample_id" not in obj or "prediction" not in obj:
                raise DataError("needs the keys sample_id and prediction", path, i)
            pred = obj["prediction"]
            out.append((i, str(obj["sample_id"]), "" if pred is None else str(pred)))
        return out
    try:
        df = pd.read_csv(io.StringIO(text), sep="\t", dtype=str, keep_default_na=False,
                         quoting=csv.QUOTE_MINIMAL)
    except pd.errors.ParserError as e:
        raise DataError(f"not a tab-separated file ({str(e).strip()})", path) from None
    for col in ("sample_id", "prediction"):
        if col not in df:
            raise DataError(f"missing column {col} (the header has "
                            f"{', '.join(map(str, df.columns[:6]))}"
                            f"{', ...' if len(df.columns) > 6 else ''})", path, 1, col)
    pairs = zip(df["sample_id"], df["prediction"], strict=True)
    return [(i, s, p) for i, (s, p) in enumerate(pairs, start=2)]


def read_predictions(path: str | Path, samples: pd.DataFrame) -> pd.DataFrame:
    """``sample_id, permutation, prediction`` of a predictions file (module docstring)."""
    path = Path(path)
    known = set(samples["sample_id"])
    rows: list[dict] = []
    seen: dict[tuple[str, int], int] = {}
    for line, sid, pred in _rows(path):
        base, k = split_id(sid, known, path, line)
        if (base, k) in seen:
            raise DataError(f"sample_id {sid!r} again (first on line {seen[base, k]})", path,
                            line, "sample_id")
        seen[base, k] = line
        rows.append({"sample_id": base, "permutation": k, "prediction": pred})
    return pd.DataFrame(rows, columns=["sample_id", "permutation", "prediction"])


@dataclass(frozen=True)
class Scored:
    """A predictions file scored: the data read, the prompt's row, the per-answer flags
    (:func:`~fairness_tests.benchmarks.kobbq.family.flagged`) and the tables."""
    data: D.KoBBQData
    row: Mapping[str, str]
    flags: pd.DataFrame
    tables: dict[str, pd.DataFrame]


def scored(path: str | Path, directory: str | Path | None = None,
           prompt_id: int = P.DEFAULT_PROMPT, cluster: str = "template",
           n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED) -> Scored:
    """The audit's KoBBQ tables of a predictions file (module docstring), and what they
    were computed from."""
    data = D.load(directory)
    row = P.prompt_row(data.prompts, prompt_id)
    preds = read_predictions(path, data.samples)
    flags = flagged(data.samples, preds, row["unknown"]).sort_values(KEY).reset_index(drop=True)
    tables = {"kobbq": M.kobbq_table(flags, "category", "category", cluster, n_boot, seed),
              "kobbq_labels": M.kobbq_table(flags, "label_annotation", "label", cluster,
                                            n_boot, seed)}
    return Scored(data, row, flags, tables)


def score(path: str | Path, directory: str | Path | None = None,
          prompt_id: int = P.DEFAULT_PROMPT, cluster: str = "template",
          n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED) -> dict[str, pd.DataFrame]:
    """The audit's KoBBQ tables of a predictions file."""
    return scored(path, directory, prompt_id, cluster, n_boot, seed).tables


def records(s: Scored, prompt_id: int) -> pd.DataFrame:
    """The per-answer records in the audit's columns: the options as the predictions'
    order showed them (order ``k``: :func:`~.prompt.permuted`; a prediction on the test
    file as it is: the file's order), the letter of the predicted option ("" when it is
    none of them); no letter probabilities (the predictions are texts), status ``ok``."""
    f = s.flags
    shown = [tuple(c) if k == UNPERMUTED else P.permuted(c, k)
             for c, k in zip(f["choices"], f["permutation"], strict=True)]
    letters = [P.LETTERS[x.index(p)] if p in x else ""
               for x, p in zip(shown, f["prediction"], strict=True)]
    out = f.assign(prompt_id=int(prompt_id), shown_a=[x[0] for x in shown],
                   shown_b=[x[1] for x in shown], shown_c=[x[2] for x in shown],
                   letter=letters, letter_probs=None, letter_mass=float("nan"), status="ok")
    return out[RECORD_COLUMNS]


def scored_info(s: Scored, prompt_id: int, cluster: str, n_boot: int,
                seed: int) -> KoBBQInfo:
    """The run metadata of a scored predictions file: the data, the prompt whose unknown
    expression the answers were read with, the counts and the intervals' settings."""
    n = s.flags["sample_id"].nunique()
    total = len(s.data.samples)
    return KoBBQInfo(
        source=f"{D.REPO} @ {D.COMMIT}", warnings=list(D.WARNINGS),
        data_dir=display_path(s.data.directory), sha256=dict(s.data.sha256),
        release=dict(s.data.release), prompt_id=int(prompt_id),
        prompt=P.query_text(s.row, "{context}", "{question}", ("{a}", "{b}", "{c}")),
        unknown=s.row["unknown"], answer_prefix="",
        answer_rule="the predictions file's text: a choice as shown, anything else out of "
                    "choice (the authors' 5_evaluation.py)",
        orders=("the predictions' own: ids ending -0/-1/-2 are the circulant orders of the "
                "authors' 1_preprocess.py, a test sample's own id its file order"),
        notes=[f"predictions made elsewhere, read with {P.prompt_note(prompt_id, s.row)}"],
        n_samples=n, n_answers=len(s.flags), n_failed=0, cluster=cluster, n_boot=n_boot,
        seed=seed, subset="" if n == total else
        f"{n} of the {total} test samples have a prediction")
