"""Scoring KoBBQ predictions made elsewhere: ``python -m fairness_tests.benchmarks.kobbq.score
FILE --out DIR [--prompt-id N] [--cluster template|item] [--data-dir DIR]``.

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
are an error naming the line. Writes ``kobbq.csv`` and ``kobbq_labels.csv``
(the audit's tables) into DIR.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import pandas as pd

from fairness_tests.benchmarks.kobbq import data as D
from fairness_tests.benchmarks.kobbq import metrics as M
from fairness_tests.benchmarks.kobbq import prompt as P
from fairness_tests.benchmarks.kobbq.family import KEY, flagged
from fairness_tests.core.errors import DataError
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


def _rows(path: Path) -> list[tuple[int, str, str]]:
    """(line, sample_id, prediction) of a TSV or JSONL file."""
    text = path.read_text(encoding="utf-8")
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
    df = pd.read_csv(io.StringIO(text), sep="\t", dtype=str, keep_default_na=False)
    for col in ("sample_id", "prediction"):
        if col not in df:
            raise DataError(f"missing column {col}", path, 1)
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


def score(path: str | Path, directory: str | Path | None = None,
          prompt_id: int = P.DEFAULT_PROMPT, cluster: str = "template",
          n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED) -> dict[str, pd.DataFrame]:
    """The audit's KoBBQ tables of a predictions file."""
    data = D.load(directory)
    unknown = P.prompt_row(data.prompts, prompt_id)["unknown"]
    preds = read_predictions(path, data.samples)
    flags = flagged(data.samples, preds, unknown).sort_values(KEY).reset_index(drop=True)
    return {"kobbq": M.kobbq_table(flags, "category", "category", cluster, n_boot, seed),
            "kobbq_labels": M.kobbq_table(flags, "label_annotation", "label", cluster,
                                          n_boot, seed)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fairness_tests.benchmarks.kobbq.score",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompt-id", type=int, default=P.DEFAULT_PROMPT)
    ap.add_argument("--cluster", choices=M.CLUSTERS, default="template")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--n-boot", type=int, default=DEFAULT_N_BOOT)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    a = ap.parse_args(argv)
    try:
        tables = score(a.file, a.data_dir, a.prompt_id, a.cluster, a.n_boot, a.seed)
    except (DataError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, t in tables.items():
        t.to_csv(out / f"{name}.csv", index=False, lineterminator="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
