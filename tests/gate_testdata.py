"""Run directories for the gate's tests, from the committed recordings.

Baseline: the embedded model's replayed BBQ run. Candidate: the same run with a known
regression built in: in Race_x_gender disambiguated counter-stereotypical items
(correct answer != target_loc), half of the correct first-run answers are switched to
the stereotyped person (target_loc), seeded. Each switch turns a correct, non-biased
answer into a wrong, biased one, so the candidate is worse exactly there: accuracy
drops and s_DIS rises in Race_x_gender/disambig, and no other cell changes. Its
tables and records come from the one BBQ builder, as ``bbq score`` would write them.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from fairness_tests.benchmarks.bbq.data import bbq_dir, load_bbq
from fairness_tests.benchmarks.bbq.filter import filter_items
from fairness_tests.benchmarks.bbq.tables import bbq_records, bbq_tables
from fairness_tests.cli.main import main
from fairness_tests.pipeline.audit import run_audit
from fairness_tests.pipeline.configure import audit_config
from fairness_tests.run.result import RunResult

BASE = "embedded:gemma-3-270m"
CAND = "gemma-3-270m-degraded"     # a saved run of a model no embedded: id names
PRED_COLUMNS = ["dataset", "example_id", "repeat", "rotation", "answer"]


def with_answers(run: RunResult, preds, model: str) -> RunResult:
    """``run`` with other answers (and the tables and records they give)."""
    items = filter_items(load_bbq(bbq_dir()).items)
    items = items.merge(preds[["dataset", "example_id"]].drop_duplicates(),
                        on=["dataset", "example_id"])
    return RunResult(metadata=dataclasses.replace(run.metadata, model=model),
                     tables=bbq_tables(items, preds, n_boot=200),
                     verdicts=run.verdicts, records={"bbq": bbq_records(items, preds)})


def degraded(base: RunResult, seed: int = 7) -> tuple[RunResult, int]:
    rec = base.records["bbq"]
    preds = rec[PRED_COLUMNS].copy()
    first = (rec["repeat"] == 0) & (rec["rotation"] == 0)
    cell = (first & (rec["dataset"] == "Race_x_gender") & (rec["context"] == "disambig")
            & (rec["label"] != rec["target_loc"]) & rec["target_loc"].notna()
            & (rec["answer"] == rec["label"]))
    flip = cell & (np.random.default_rng(seed).random(len(rec)) < 0.5)
    preds.loc[flip, "answer"] = rec.loc[flip, "target_loc"]
    return with_answers(base, preds, CAND), int(flip.sum())


def make_runs(d: Path, store: Path | None = None) -> dict:
    """Baseline and candidate saved in ``d`` (the audit replays into ``store``, default
    ``d/store.sqlite``). Built once per test session: the ``gate_runs`` fixture."""
    base = run_audit(audit_config(store=str(store or d / "store.sqlite"),
                                         benchmarks=["bbq", "consistency"], n_boot=200))
    base = dataclasses.replace(base, metadata=dataclasses.replace(base.metadata, model=BASE))
    cand, n_flipped = degraded(base)
    out = {"n_flipped": n_flipped}
    for name, run in (("base", base), ("cand", cand)):
        out[name] = run.save(d / name)
    return out


def disambig_items(dataset: str, n_templates: int, per_template: int):
    """The first ``per_template`` disambiguated items (by example_id) of each of the
    first ``n_templates`` templates (question_index, numeric order) of ``dataset``
    among the filtered stand-in items: a cell of exactly ``n_templates`` clusters."""
    items = filter_items(load_bbq(bbq_dir()).items)
    items = items[(items["dataset"] == dataset) & (items["context"] == "disambig")]
    qi = sorted(items["question_index"].unique(), key=lambda q: int(q))[:n_templates]
    items = items[items["question_index"].isin(qi)].sort_values("example_id")
    out = items.groupby("question_index").head(per_template).reset_index(drop=True)
    assert out["question_index"].nunique() == n_templates
    return out


def scored_run(out: Path, items, answers, model: str | None = None) -> Path:
    """``fairness-tests bbq score --data <shared>/bbq --predictions P.jsonl --out out``
    on ``items`` answered ``answers`` (option indices, one per item), as a user
    scores someone's predictions (``--model`` only when given)."""
    preds = out.parent / f"{out.name}.jsonl"
    preds.write_text("".join(json.dumps({"category": d, "example_id": int(e), "answer": int(a)})
                             + "\n" for d, e, a in zip(items["dataset"], items["example_id"],
                                                       answers, strict=True)),
                     encoding="utf-8")
    argv = ["bbq", "score", "--data", str(bbq_dir()), "--predictions", str(preds),
            "--n-boot", "200", "--out", str(out), *(["--model", model] if model else [])]
    assert main(argv) in (0, 1, 5)
    return out
