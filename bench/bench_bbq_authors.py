"""The BBQ authors' own numbers, reproduced: ``fairness-tests bbq score --conventions
bbq-authors`` on their UnifiedQA-11B predictions (../shared/bbq_official/results/UnifiedQA)
for the six official categories in the three prompt formats, next to the paper's figures
(Parrish et al. 2022, Figs. 3, 5 and 6; percent, one decimal).

Each of the 18 runs is the command of issue 23::

    fairness-tests bbq score --data ../shared/bbq_official --filter none \\
        --conventions bbq-authors --predictions .../preds_<Category>.jsonl \\
        --answer-field unifiedqa-t5-11b_pred_<race|arc|qonly> --format json

run in-process. Physical_appearance's bias differs from the paper: the paper predates the
2022-04-03 data fix, and 36 items of the predictions file carry the older answer tags
(the score command lists them under ``answers.item_differs``).

    python bench/bench_bbq_authors.py [--data ../shared/bbq_official]
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import time
from pathlib import Path

from fairness_tests.cli.main import main

CATEGORIES = ("Age", "Disability_status", "Nationality", "Physical_appearance", "Religion",
              "Sexual_orientation")
FORMATS = {"RACE": "unifiedqa-t5-11b_pred_race", "ARC": "unifiedqa-t5-11b_pred_arc",
           "qonly": "unifiedqa-t5-11b_pred_qonly"}
#: the paper's figures, percent: the one copy of the table is the tests' reference data
#: (tests/data/bbq_paper/unifiedqa.csv, described in its README.md)
PAPER_CSV = Path(__file__).resolve().parents[1] / "tests/data/bbq_paper/unifiedqa.csv"


def paper_figures() -> dict[tuple[str, str, str], tuple[float, float]]:
    """(category, format, context) -> (accuracy, bias), percent."""
    with open(PAPER_CSV, encoding="utf-8", newline="") as fh:
        return {(r["category"], r["format"], r["context"]):
                (float(r["accuracy"]), float(r["bias"])) for r in csv.DictReader(fh)}


def score(data: Path, category: str, field: str) -> dict:
    argv = ["bbq", "score", "--data", str(data), "--filter", "none", "--conventions",
            "bbq-authors", "--predictions",
            str(data / "results" / "UnifiedQA" / f"preds_{category}.jsonl"),
            "--answer-field", field, "--format", "json", "--no-rules"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    if rc not in (0, 1):
        raise SystemExit(f"bbq score exited {rc}: {' '.join(argv)}")
    return json.loads(buf.getvalue())


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/bbq_official", type=Path)
    a = ap.parse_args()
    t0 = time.perf_counter()
    print("| category | format | context | n | accuracy | bias | paper acc | paper bias "
          "| diff acc | diff bias |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    paper = paper_figures()
    for fmt, field in FORMATS.items():
        for cat in CATEGORIES:
            doc = score(a.data, cat, field)
            for r in doc["rows"]:
                if r["proxy"] != "label":          # the authors' row "Category"
                    continue
                acc = 100 * r["accuracy"]
                bias = 100 * r["s_amb" if r["context"] == "ambig" else "s_dis"]
                pa, pb = paper[(cat, fmt, r["context"])]
                print(f"| {cat} | {fmt} | {r['context']} | {r['n_items']} | {acc:.1f} | "
                      f"{bias:.1f} | {pa:.1f} | {pb:.1f} | {float(f'{acc:.1f}') - pa:+.1f} | "
                      f"{float(f'{bias:.1f}') - pb:+.1f} |")
            ans = doc["answers"]
            for u in ans.get("unmatched_answers", []):
                notes.append(f"{cat} {fmt}: unmatched (dropped) example_id {u['example_id']} "
                             f"{u['answer']!r}")
            d = ans.get("item_differs")
            if d and fmt == "RACE":
                notes.append(f"{cat}: {d['n_items']} items of the predictions file differ from "
                             f"the data in {', '.join(d['fields'])} ({d['used']})")
    print()
    for n in notes:
        print(f"- {n}")
    print(f"\n18 runs in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main_()
