"""A benchmark family's results in ``compare`` and on the card are the family's to say
(:meth:`Family.compare_sections`, :meth:`Family.card_results`, :meth:`Family.card_summaries`):

- a new benchmark that declares none of them (a throwaway distribution registering
  "toybench" with one table, run in a fresh interpreter as in
  tests/test_benchmark_entry_point.py) gets the generic layouts: a ``compare`` section
  with its table side by side (cells x metrics as rows, one column per model) and a
  card view of its table, not relegated to "Supporting tables";
- the built-in families' own layouts are the ones used (BBQ's Table 5/6 sections, the
  generative audit's per-slice view with its panels, the probe's titled table), in the
  card order their ranks give.

Expected cells are written out from the rows put in (3 decimals, ``value [lo, hi]``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fairness_tests.benchmarks.bbq import card as bbq_card
from fairness_tests.benchmarks.generative import card as generative_card
from fairness_tests.card.render_md import render_markdown
from fairness_tests.compare.tables import model_sections
from fairness_tests.core.registry import load
from fairness_tests.pipeline.benchmark import benchmark, family_tables
from fairness_tests.pipeline.views import side_by_side, table_views

ROOT = Path(__file__).resolve().parents[1]

TOY = '''
from fairness_tests.metrics.schema import Table, register_table
from fairness_tests.pipeline.benchmark import Benchmark, Family, FamilySpec, Shown

register_table("toy_table", Table(("group",), frozenset({"toy_rate"})))


class ToyFamily(Family):
    def results(self, asked):
        raise NotImplementedError


class Toy(Benchmark):
    name = "toybench"
    family = FamilySpec(name="toyfam", impl="toybench:ToyFamily", records="toyrec",
                        metadata_key="toy", compared=True)
    tables = ("toy_table",)
    shown = (Shown("toybench", tables, "the toy benchmark was not run"),)

    def requests(self, family):
        return []
'''

PROBE = '''
import json
from types import SimpleNamespace
import pandas as pd
from fairness_tests.card.render_md import render_markdown
from fairness_tests.card.values import clean
from fairness_tests.compare.render import to_markdown
from fairness_tests.compare.tables import Display, model_sections


def table(rows):
    return pd.DataFrame(rows, columns=["group", "metric", "value", "ci_low", "ci_high", "n",
                                       "note"])


class Model:
    def __init__(self, name, tables):
        self.name, self.tables = name, tables

    def table(self, protocol, name):
        return self.tables.get((protocol, name))


a = table([["g1", "toy_rate", 0.25, 0.1, 0.4, 40, ""],
           ["g2", "toy_rate", 0.125, float("nan"), float("nan"), 8, "few items"]])
b = table([["g1", "toy_rate", 0.5, 0.3, 0.7, 20, ""]])
sections = model_sections([Model("a", {("toyfam", "toy_table"): a}),
                           Model("b", {("toyfam", "toy_table"): b})])
card = clean({"results": {"tables": {"toy_table": a.to_dict("records")}}})
report = SimpleNamespace(title="T", models_table=lambda: Display("Models", ["Model"], []),
                         protocol_lines=lambda: [], differences=[], unstated=[],
                         sections=sections, method=[], footer="")
print(json.dumps({
    "ids": [s.id for s in sections],
    "compare": to_markdown(report),
    "long": [[r["model"], r["cell"], r["metric"], r["value"], r["n"], r["note"]]
             for s in sections for r in s.long],
    "card": render_markdown(card),
}))
'''


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict:
    """What ``compare`` and the card make of the toy benchmark's table, in an interpreter
    where its distribution is installed."""
    site = tmp_path_factory.mktemp("site")
    (site / "toybench.py").write_text(TOY, encoding="utf-8")
    info = site / "toybench-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toybench\nVersion: 0.1\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[fairness_tests.benchmarks]\ntoybench = toybench:Toy\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_benchmarks_table_is_compared_side_by_side(toy):
    assert toy["ids"] == ["toy_table"]           # no built-in family has rows here
    table = toy["compare"].split("**toy_table**")[1].strip().splitlines()[:4]
    assert table == ["| Cell | Metric | a | b |", "|---|---|---|---|",
                     "| g1 | toy_rate | 0.250 [0.100, 0.400] | 0.500 [0.300, 0.700] |",
                     "| g2 | toy_rate | 0.125 | - |"]
    assert toy["long"] == [["a", "g1", "toy_rate", 0.25, 40.0, ""],
                           ["b", "g1", "toy_rate", 0.5, 20.0, ""],
                           ["a", "g2", "toy_rate", 0.125, 8.0, "few items"]]


def test_a_new_benchmarks_table_has_its_card_view(toy):
    md = toy["card"]
    results = md[md.index("### Results"):]
    assert "#### toy\\_table" in results
    assert "Supporting tables" not in results
    assert "| g1 | toy\\_rate | 0.250 | [0.100, 0.400] | 40 |" in results
    assert "| g2 | toy\\_rate | 0.125 |  | 8 | few items |" in results


# ---------------------------------------------------------------- the built-in overrides

class _Model:
    def __init__(self, name: str, tables: dict):
        self.name, self.tables = name, tables

    def table(self, protocol: str, name: str):
        return self.tables.get((protocol, name))


def _bbq_table(accuracy: float) -> pd.DataFrame:
    return pd.DataFrame(
        [["Race_x_gender", c, "all", "accuracy", accuracy, accuracy - 0.1, accuracy + 0.1, 50, ""]
         for c in ("ambig", "disambig")],
        columns=["dataset", "context", "polarity", "metric", "value", "ci_low", "ci_high", "n",
                 "note"])


def test_compare_uses_the_bbq_familys_own_sections():
    models = [_Model(n, {("bbq", "bbq"): _bbq_table(v)}) for n, v in (("a", 0.8), ("b", 0.6))]
    sections = model_sections(models)
    assert [s.id for s in sections] == ["bbq_ambig", "bbq_disambig"]   # not the generic "bbq"
    first = sections[0].tables[0]
    assert first.title == "Race_x_gender, ambig"
    assert first.header[:2] == ["Model", "Accuracy"]
    assert [r[:2] for r in first.rows] == [["a", "0.800 [0.700, 0.900]"],
                                           ["b", "0.600 [0.500, 0.700]"]]
    # one dot plot per plotted metric (accuracy, s_AMB, SF, DF, smoothed DF) of the cell
    assert [f.args["title"] for f in sections[0].figures] == [
        f"{m} · Race_x_gender/ambig" for m in ("Accuracy", "s_AMB", "SF", "DF", "DF (smoothed)")]


def test_the_built_in_families_declare_their_own_card_views():
    for name, module in (("bbq", bbq_card), ("generative", generative_card)):
        spec = benchmark(name).family
        family = load(spec.impl)
        assert family.family_spec() is spec
        views = family.card_results({})
        assert views is module.VIEWS
        assert views != table_views(family_tables(spec))


def _rows(columns: dict, metric: str, values: list[float]) -> list[dict]:
    return [{**{k: v[i] for k, v in columns.items()}, "metric": metric, "value": x,
             "ci_low": x, "ci_high": x, "n": 10, "note": ""} for i, x in enumerate(values)]


def test_the_card_lays_the_built_ins_out_in_rank_order():
    card = {"results": {"tables": {
        "bbq": _rows({"dataset": ["Race_x_gender"], "context": ["ambig"], "polarity": ["all"]},
                     "accuracy", [0.5]),
        "counterfactual": _rows({"swap": ["context"], "decoding": ["greedy"],
                                 "context": ["none"]}, "same_verdict", [0.75]),
        "generative_by_slice": _rows({"slice": ["man", "woman"]}, "refusal", [0.25, 0.125]),
    }}}
    md = render_markdown(card)
    order = [md.index(h) for h in ("#### Generative audit per slice", "#### Counterfactual probe",
                                   "#### Intersectional BBQ per dataset x context")]
    assert order == sorted(order)
    assert "Supporting tables" not in md
    assert "Plot in card.html: Per-slice rates with 95% CIs" in md
    assert "| woman | 0.125 [0.125, 0.125] |" in md      # the panel's numbers, by slice


def test_an_unregistered_tables_cells_are_its_columns_before_metric():
    t = pd.DataFrame([["x", "", "m", 0.5, None, None, 4, "", 7]],
                     columns=["a", "b", "metric", "value", "ci_low", "ci_high", "n", "note",
                              "deff"])
    sec = side_by_side("fam", "not_registered", [_Model("m1", {("fam", "not_registered"): t})])
    assert sec is not None
    assert [list(r[:2]) for r in sec.tables[0].rows] == [["x", "m"]]   # "b" empty, "deff" after
    assert [(r["cell"], r["value"], r["n"]) for r in sec.long] == [("x", 0.5, 4.0)]
