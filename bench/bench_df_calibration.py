"""Do the default DF and SF rules judge behaviour, not group sizes? A simulation on the
real intersectional item sets (issue 22, "Sound verdicts").

Items: the BBQ items after the intersectional filter (../shared/bbq or
$FAIRNESS_BBQ_DIR): four cells (Race_x_SES, Race_x_gender x ambig, disambig) with the
real groups and sizes (16 to 860 items per group). Each simulated model answers every
item of the first run; its answer is the target (the stereotyped answer), the other
person or the unknown option:

- ``all correct``: the label, always;
- ``iid, accuracy a``: the label with probability a, else one of the two other options
  (equally likely), independently per item (a = 0.33, 0.6, 0.9);
- ``per-template accuracy``: as iid with logit(a) = logit(0.6) + u_t, u_t ~ N(0, sd^2)
  per template (sd 0.5, 1): alike for every group of a template, but groups sit in their
  own templates (29 of 42 Race_x_gender templates hold one group), so the groups' rates
  differ on this item set;
- ``stereotype s, every group``: "unknown" with probability 0.5, else the target with
  probability s, the other person with 1 - s: the same for every group;
- ``stereotype s, half the groups``: as above with s for a seeded half of the groups
  and 1 - s for the others (favours half, disfavours half; true DF = ln(s / (1 - s))).

Verdicts of the default rules (``thresholds/default.yaml``):
``df_bound`` (df_eb <= 1.0) and ``sf_bound`` (sf <= 0.05), point estimates, in every
cell; a run fails a rule when any cell does. They are computed for all runs at once
from the per-group sums with the library's statistic functions
(``metrics.sum_stats.empirical_bayes_differential_fairness``, ``subgroup_fairness``,
``smoothed_differential_fairness`` for the old rule df_smoothed <= 1.0). The first
``--checked`` runs of each model also go through the whole pipeline
(``benchmarks.bbq.metrics.bbq_metrics`` + ``rules.evaluate.evaluate`` with the default rules) and
the bench counts verdicts that differ (0 expected); those runs also give the fail rate
of the bias-score rules (``samb_bound``, ``sdis_bound``), which are the rules that
catch a model following the stereotype for every group alike.

Run: ``python bench/bench_df_calibration.py [--runs 1000] [--checked 20]``, or
``--quick`` (200 runs, 3 checked: under a minute). Prints the table and the load
average; figures in docs/statistics.md ("Differential fairness").
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairness_tests.benchmarks.bbq.data import (
    bbq_dir,  # noqa: E402
    load_bbq,  # noqa: E402
)
from fairness_tests.benchmarks.bbq.filter import filter_items  # noqa: E402
from fairness_tests.benchmarks.bbq.metrics import bbq_metrics  # noqa: E402
from fairness_tests.metrics.sum_stats import (  # noqa: E402
    empirical_bayes_differential_fairness,
    smoothed_differential_fairness,
    subgroup_fairness,
)
from fairness_tests.rules.evaluate import evaluate  # noqa: E402
from fairness_tests.rules.thresholds import load_rules  # noqa: E402

TARGET, OTHER, UNKNOWN = 0, 1, 2        # answer kinds
CHUNK = 250                             # runs simulated at once
CHECK_N_BOOT = 200                      # the checked runs' bootstrap (ci_low rules)
RULES = ("df_bound", "sf_bound", "samb_bound", "sdis_bound")

MODELS = [
    ("all correct", dict(kind="correct")),
    ("iid, accuracy 0.33", dict(kind="iid", acc=0.33)),
    ("iid, accuracy 0.6", dict(kind="iid", acc=0.6)),
    ("iid, accuracy 0.9", dict(kind="iid", acc=0.9)),
    ("per-template accuracy (0.6, sd 0.5 logit)", dict(kind="template", acc=0.6, sd=0.5)),
    ("per-template accuracy (0.6, sd 1 logit)", dict(kind="template", acc=0.6, sd=1.0)),
    ("stereotype 0.6, every group", dict(kind="stereotype", s=0.6)),
    ("stereotype 0.8, every group", dict(kind="stereotype", s=0.8)),
    ("stereotype 0.6, half the groups", dict(kind="stereotype", s=0.6, half=True)),
    ("stereotype 0.8, half the groups", dict(kind="stereotype", s=0.8, half=True)),
    ("stereotype 0.9, half the groups", dict(kind="stereotype", s=0.9, half=True)),
]


class Cell:
    """One dataset x context cell: per item its group code, template code and the kind
    of its label (TARGET, OTHER or UNKNOWN); the option index of each kind."""

    def __init__(self, dataset: str, context: str, g: pd.DataFrame):
        self.name = f"{dataset}/{context}"
        self.items = g
        self.group, names = pd.factorize(g["group"], sort=True)
        self.n_groups = len(names)
        self.template = pd.factorize(g["question_index"], sort=True)[0]
        t = g["target_loc"].to_numpy(float)
        u = g["unknown_loc"].to_numpy(float)
        y = g["label"].to_numpy(float)
        self.label_kind = np.where(y == t, TARGET, np.where(y == u, UNKNOWN, OTHER))
        self.option = np.column_stack([t, 3.0 - t - u, u])      # option index per kind
        self.onehot = np.eye(self.n_groups)[self.group]

    def answers(self, model: dict, rng: np.random.Generator, runs: int) -> np.ndarray:
        """(runs, n) answer kinds drawn from ``model``."""
        n = len(self.group)
        kind = model["kind"]
        if kind == "correct":
            return np.broadcast_to(self.label_kind, (runs, n)).copy()
        if kind in ("iid", "template"):
            acc = np.full(n, model["acc"])
            if kind == "template":
                u = model["sd"] * rng.standard_normal((runs, self.template.max() + 1))
                logit = np.log(model["acc"] / (1 - model["acc"])) + u[:, self.template]
                acc = 1.0 / (1.0 + np.exp(-logit))
            wrong = (self.label_kind + 1 + (rng.random((runs, n)) < 0.5)) % 3
            return np.where(rng.random((runs, n)) < acc, self.label_kind, wrong)
        s = np.full(self.n_groups, model["s"])
        if model.get("half"):
            favoured = np.random.default_rng(5).permutation(self.n_groups)[self.n_groups // 2:]
            s[favoured] = 1.0 - model["s"]
        named = np.where(rng.random((runs, n)) < s[self.group], TARGET, OTHER)
        return np.where(rng.random((runs, n)) < 0.5, UNKNOWN, named)

    def group_sums(self, kinds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n_g, f_g) per run: items and favourable answers (the other person) per group."""
        fav = (kinds == OTHER).astype(float)
        n_g = np.broadcast_to(self.onehot.sum(axis=0), (len(kinds), self.n_groups))
        return n_g, fav @ self.onehot

    def predictions(self, kinds: np.ndarray) -> pd.DataFrame:
        """One run's answers as a predictions table (original option indices)."""
        answer = self.option[np.arange(len(kinds)), kinds]
        return pd.DataFrame({"dataset": self.items["dataset"].to_numpy(),
                             "example_id": self.items["example_id"].to_numpy(),
                             "repeat": 0, "answer": answer})


def load_cells() -> tuple[pd.DataFrame, list[Cell]]:
    items = filter_items(load_bbq(bbq_dir()).items)
    items = items[items["group"].notna()].reset_index(drop=True)
    return items, [Cell(d, c, g) for (d, c), g in items.groupby(["dataset", "context"],
                                                                  sort=True)]


def vectorised(cells: list[Cell], model: dict, runs: int, seed: int) -> dict[str, np.ndarray]:
    """Per run: does df_bound / sf_bound / the old df_smoothed rule fail in any cell;
    and each cell's df_eb."""
    rng = np.random.default_rng(seed)
    out = {"df_bound": [], "sf_bound": [], "old df_bound": [], "df_eb": []}
    for start in range(0, runs, CHUNK):
        m = min(CHUNK, runs - start)
        fails = {k: np.zeros(m, bool) for k in ("df_bound", "sf_bound", "old df_bound")}
        dfe = []
        for cell in cells:
            n_g, f_g = cell.group_sums(cell.answers(model, rng, m))
            eb = empirical_bayes_differential_fairness(n_g, f_g)
            fails["df_bound"] |= eb > 1.0
            fails["sf_bound"] |= subgroup_fairness(n_g, f_g) > 0.05
            fails["old df_bound"] |= smoothed_differential_fairness(n_g, f_g) > 1.0
            dfe.append(eb)
        for k, v in fails.items():
            out[k].append(v)
        out["df_eb"].append(np.column_stack(dfe))
    return {k: np.concatenate(v) for k, v in out.items()}


def checked(items: pd.DataFrame, cells: list[Cell], model: dict, runs: int, total: int,
            seed: int, rules) -> tuple[dict[str, list[bool]], int]:
    """The first ``runs`` of the ``total`` runs of :func:`vectorised` (the same draws)
    through bbq_metrics + evaluate: per rule, whether it failed; and the number of
    df_bound / sf_bound verdicts that differ from the vectorised ones."""
    rng = np.random.default_rng(seed)
    kinds = {c.name: c.answers(model, rng, min(CHUNK, total)) for c in cells}
    failed: dict[str, list[bool]] = {r: [] for r in RULES}
    differ = 0
    for i in range(runs):
        preds = pd.concat([c.predictions(kinds[c.name][i]) for c in cells], ignore_index=True)
        table = bbq_metrics(items, preds, n_boot=CHECK_N_BOOT, seed=i)
        verdicts = evaluate({"bbq": table}, rules)
        for r in RULES:
            failed[r].append(bool((verdicts.loc[verdicts["rule"] == r, "status"] == "fail").any()))
        for rule, stat, bound in (("df_bound", empirical_bayes_differential_fairness, 1.0),
                                  ("sf_bound", subgroup_fairness, 0.05)):
            fast = any(bool(stat(*c.group_sums(kinds[c.name][i:i + 1]))[0] > bound)
                       for c in cells)
            differ += fast != failed[rule][-1]
    return failed, differ


def fmt_rate(x: float) -> str:
    return f"{100 * x:.1f}%"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="simulated runs per model")
    ap.add_argument("--checked", type=int, default=20,
                    help="runs per model also put through bbq_metrics + evaluate")
    ap.add_argument("--quick", action="store_true", help="200 runs, 3 checked")
    args = ap.parse_args(argv)
    runs, n_checked = (200, 3) if args.quick else (args.runs, args.checked)
    if not 1 <= runs or not 0 <= n_checked <= min(runs, CHUNK):
        ap.error(f"--runs must be >= 1 and --checked in 0..min(runs, {CHUNK})")
    t0 = time.perf_counter()
    items, cells = load_cells()
    rules = load_rules(None)
    sizes = "; ".join(f"{c.name}: {len(c.group)} items, {c.n_groups} groups of "
                      f"{int(c.onehot.sum(0).min())}-{int(c.onehot.sum(0).max())}"
                      for c in cells)
    print(f"items: {sizes}")
    head = ["model", "true DF", "df_bound fails", "sf_bound fails", "old rule fails",
            "mean df_eb per cell", "checked runs: samb / sdis fail", "differ"]
    rows = []
    total_differ = 0
    for k, (name, model) in enumerate(MODELS):
        t = time.perf_counter()
        seed = 1000 + k
        v = vectorised(cells, model, runs, seed)
        failed, differ = checked(items, cells, model, n_checked, runs, seed, rules)
        total_differ += differ
        truth = (f"{np.log(model['s'] / (1 - model['s'])):.2f}" if model.get("half")
                 else "0" if model["kind"] != "template" else "> 0 (templates)")
        bias = (f"{fmt_rate(np.mean(failed['samb_bound']))} / "
                f"{fmt_rate(np.mean(failed['sdis_bound']))}" if n_checked else "-")
        rows.append([name, truth, fmt_rate(v["df_bound"].mean()), fmt_rate(v["sf_bound"].mean()),
                     fmt_rate(v["old df_bound"].mean()),
                     " / ".join(f"{x:.2f}" for x in np.nanmean(v["df_eb"], axis=0)), bias,
                     str(differ)])
        print(f"[{time.perf_counter() - t0:5.0f} s] {name}: {time.perf_counter() - t:.1f} s",
              file=sys.stderr, flush=True)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells_):
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells_, widths,
                                                                   strict=True)) + " |"
    print()
    print(f"{runs} runs per model (fail = the rule fails in at least one of the 4 cells); "
          f"{n_checked} of them through bbq_metrics + evaluate ({CHECK_N_BOOT} resamples); "
          f"cells: {', '.join(c.name for c in cells)}")
    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))
    la = os.getloadavg()
    print(f"\nold rule = df_smoothed <= 1.0 (the default before this change); "
          f"verdicts that differ between the vectorised and the full pipeline: {total_differ}")
    print(f"wall {time.perf_counter() - t0:.0f} s; load average {la[0]:.2f} {la[1]:.2f} "
          f"{la[2]:.2f} on {os.cpu_count()} CPUs")
    return 1 if total_differ else 0


if __name__ == "__main__":
    sys.exit(main())
