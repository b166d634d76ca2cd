"""The run explorer's data (fairness_tests/explore/): verdict -> cell -> items, outcomes,
changed answers and template contributions on tables small enough to check by hand;
its page's payload; the gate's runs (tests/gate_testdata.py: a known regression of
n_flipped answers in Race_x_gender/disambig); the card's link; the init workflow's
schema check."""
from __future__ import annotations

import base64
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import rule  # noqa: E402

from fairness_tests.card.files import explorer_link  # noqa: E402
from fairness_tests.cli.init import init_project  # noqa: E402
from fairness_tests.cli.main import main  # noqa: E402
from fairness_tests.explore.cells import as_text, cell_values, in_cell, link, rule_tables  # noqa: E402
from fairness_tests.explore.pairs import change_classes, contributions, pair_rows  # noqa: E402
from fairness_tests.explore.views import outcomes, resolve  # noqa: E402
from fairness_tests.explore.write import bundle, payload  # noqa: E402
from fairness_tests.pipeline.benchmark import ExploreView  # noqa: E402
from fairness_tests.rules.thresholds import RuleSet, load_rules  # noqa: E402
from fairness_tests.run.result import RunResult  # noqa: E402
from fairness_tests.scoring.lexical import category_counts, category_spans  # noqa: E402
from fairness_tests.scoring.rubric import parse_rubric  # noqa: E402

ARROW = " \u2192 "


def _table():
    # a metric table: cells by dataset x context x polarity ("all" = pooled)
    return pd.DataFrame({
        "dataset": ["A", "A", "B", "all"], "context": ["x", "y", "x", "all"],
        "polarity": ["all", "all", "all", "all"], "metric": ["acc"] * 4,
        "value": [0.1, 0.2, 0.3, 0.4], "ci_low": [0.0] * 4, "ci_high": [1.0] * 4,
        "n": [2, 1, 1, 4]})


def _records():
    return pd.DataFrame({"dataset": ["A", "A", "A", "B"], "context": ["x", "x", "y", "x"],
                         "item": [1, 2, 3, 4]})


def test_a_verdicts_cell_gives_its_grouping_values_and_its_rows():
    t = _table()
    assert cell_values(t, "acc", "A/x") == {"dataset": "A", "context": "x"}
    assert cell_values(t, "acc", "all") == {}
    assert cell_values(t, "acc", "C/x") is None
    r = _records()
    assert in_cell(r, {"dataset": "A", "context": "x"}).tolist() == [True, True, False, False]
    assert in_cell(r, {"dataset": "A", "nothere": "q"}).tolist() == [True, True, True, False]
    rules = RuleSet([rule(id="r1", table="t", metric="acc")])
    where = link({"t": t}, {"recs": r}, rule_tables(rules), "r1", "acc", "A/x")
    assert (where.table, where.records, where.values, where.n) == (
        "t", "recs", {"dataset": "A", "context": "x"}, 2)
    # a rule the thresholds lack: found by its metric; "all" is every row
    where = link({"t": t}, {"recs": r}, {}, "other", "acc", "all")
    assert (where.table, where.n) == ("t", 0)         # no column to tell the records by
    assert link({"t": t}, {"recs": r}, {}, "other", "acc", "B/x").n == 1


def test_across_is_left_out_of_the_cell_name():
    t = pd.DataFrame({"family": ["F1", "F1", "F2"], "slice": ["s1", "s2", "s1"],
                      "metric": ["m"] * 3, "value": [1.0, 2.0, 3.0]})
    assert cell_values(t, "m", "F1", across="slice") == {"family": "F1"}
    assert cell_values(t, "m", "F1") is None          # without across the cell is F1/s1


def test_cell_values_compare_as_text_whole_floats_without_a_point():
    assert as_text(pd.Series([1.0, 2.5, None])).tolist() == ["1", "2.5", ""]
    assert as_text(pd.Series([3, 4])).tolist() == ["3", "4"]


def test_outcomes_first_declared_match_else_the_flags_set():
    f = pd.DataFrame({"bad": [1, 0, 0, 0], "unk": [0, 0, 1, 0], "st": [1, 1, 0, 0]})
    v = ExploreView(frame=f, outcomes=(("invalid", "bad", True), ("unknown", "unk", False),
                                       ("stereo", "st", True)), otherwise="anti")
    # row 0: bad; row 1: unk == 0 -> unknown before stereo; row 2: unk 1, st 0 -> anti
    assert outcomes(f, v, []).tolist() == ["invalid", "unknown", "anti", "unknown"]
    assert outcomes(f, ExploreView(frame=f), ["bad", "unk", "st"]).tolist() == [
        "bad+st", "st", "unk", "none"]


def test_resolve_infers_flags_text_and_key():
    f = pd.DataFrame({"row": [1, 2], "flag": [0, 1], "score": [0.5, 2.0],
                      "text": ["x" * 50, "y" * 60], "short": ["a", "b"]})
    v = resolve("r", ExploreView(frame=f))
    assert v.flags == ["flag"] and v.text == ["text"] and v.key == ["row"]


def _view(rows):
    f = pd.DataFrame(rows, columns=["id", "tmpl", "answer", "correct", "stereo"])
    return resolve("r", ExploreView(frame=f, key=("id",), answer="answer", correct="correct",
                                    cluster="tmpl", outcomes=(("stereotyped", "stereo", True),),
                                    otherwise="other"))


def test_changed_answers_are_classed_and_templates_sum_to_the_difference():
    b = _view([[1, "A", "a", 1, 0], [2, "A", "b", 1, 0], [3, "B", "c", 0, 1],
               [4, "B", "d", 0, 0]])
    c = _view([[4, "B", "d", 0, 0], [3, "B", "e", 1, 0], [1, "A", "x", 0, 1],
               [2, "A", "b", 1, 0]])
    ib, ic = pair_rows(b, c)
    assert ib.tolist() == [0, 1, 2, 3] and ic.tolist() == [2, 3, 1, 0]
    classes = change_classes(b, c, ib, ic)
    assert classes == [f"other{ARROW}stereotyped; correct{ARROW}wrong", "",
                       f"stereotyped{ARROW}other; wrong{ARROW}correct", ""]
    k = contributions(b, c, ib, ic, classes)
    # template A: correct 1->0 on item 1 -> -1/4; template B: 0->1 on item 3 -> +1/4
    assert [(r["cluster"], r["n"], r["changed"], r["delta"]["correct"]) for r in k] == [
        ("A", 2, 1, -0.25), ("B", 2, 1, 0.25)]
    assert sum(r["delta"]["correct"] for r in k) == pytest.approx(
        c.frame["correct"].mean() - b.frame["correct"].mean())


def test_the_payload_is_deterministic_gzip_base64_json():
    data = {"runs": [], "x": [1, 2.5, "é"]}
    a, b = payload(data), payload(data)
    assert a == b
    assert json.loads(gzip.decompress(base64.b64decode(a)).decode("utf-8")) == data


def test_the_card_links_the_explorer_in_md_and_html():
    html = explorer_link("html", "<body>\n<main>\n<h1>x</h1>", "../explore/index.html")
    assert '<main>\n<p class="explorer"><a href="../explore/index.html">' in html
    md = explorer_link("md", "# Card\n\nbody\n", "../explore/index.html")
    assert md.startswith("# Card\n\n[Run explorer: the items behind each verdict]"
                         "(../explore/index.html)\n")
    assert explorer_link("yaml", "a: 1\n", "x") == "a: 1\n"


@pytest.mark.slow
def test_the_gates_failing_cell_lists_exactly_the_flipped_answers(gate_run_dirs):
    base, cand = RunResult.load(gate_run_dirs["base"]), RunResult.load(gate_run_dirs["cand"])
    rules = load_rules(None, cand.metadata.model)
    data = bundle([base, cand], [load_rules(None, base.metadata.model), rules],
                  gate_options={"n_boot": 200})
    comp = data["comparisons"][0]
    acc = next(r for r in comp["gate"] if r["metric"] == "accuracy"
               and r["cell"] == "Race_x_gender/disambig")
    assert acc["verdict"] == "fail"
    cell = comp["cells"][acc["cell_index"]]
    n = gate_run_dirs["n_flipped"]
    # each flip turned a correct counter-stereotypical answer into the stereotyped one
    assert cell["classes"] == {f"anti-stereotyped{ARROW}stereotyped; correct{ARROW}wrong": n}
    assert len(cell["changed"]) == n and cell["filter"] == {
        "dataset": "Race_x_gender", "context": "disambig"}
    # the templates' contributions to accuracy sum to the gate's paired difference
    total = sum(k["delta"]["correct"] for k in cell["clusters"])
    assert total == pytest.approx(acc["candidate"] - acc["baseline"], abs=1e-12)
    assert total == pytest.approx(-n / cell["n_first"], abs=1e-12)
    # no other gate cell has a changed answer
    others = [c for c in comp["cells"] if c is not cell and c["filter"] != cell["filter"]]
    assert others and all(not c["changed"] for c in others)


def test_view_refuses_an_output_inside_its_input(gate_run_dirs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(gate_run_dirs["base"], run)
    assert main(["view", str(run), "--out", str(run / "explore")]) == 2
    assert "--out" in capsys.readouterr().err


def test_init_workflow_passes_the_github_workflow_schema(tmp_path):
    exe = shutil.which("check-jsonschema")
    if exe is None:
        pytest.skip("check-jsonschema is not installed (pip install 'fairness-tests[test]')")
    init_project(tmp_path)
    wf = tmp_path / ".github" / "workflows" / "fairness-gate.yml"
    assert "fairness-report/*/explore/" in wf.read_text()
    done = subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", str(wf)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    # the check can fail: a step without uses or run is refused
    wf.write_text(wf.read_text().replace("uses: actions/checkout@v4", "name: nothing"))
    bad = subprocess.run([exe, "--builtin-schema", "vendor.github-workflows", str(wf)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0


def test_rubric_spans_are_where_the_scorer_counts():
    cats = {c: ["zzz"] for c in ("caution", "deflection", "positive_professional", "religion",
                                 "stereotype", "title")}
    rubric = parse_rubric({"name": "t", "semantics": "strict", "categories": {
        **cats, "refusal": ["cannot help"],
        "demeaning": {"entries": ["lazy"], "ignore_quoted": True}}})
    text = 'I cannot help. He is lazy, not "lazy".'
    spans = category_spans(text, rubric)
    assert spans == [(2, 13, "refusal"), (21, 25, "demeaning")]     # the quoted one ignored
    assert [text[a:b] for a, b, _ in spans] == ["cannot help", "lazy"]
    counts = category_counts(pd.Series([text]), rubric)
    assert (counts["refusal"][0], counts["demeaning"][0]) == (1, 1)


@pytest.mark.slow
def test_view_of_a_run_against_itself_writes_the_page_and_says_why_no_gate(
        gate_run_dirs, tmp_path, capsys):
    base = str(gate_run_dirs["base"])
    out = tmp_path / "explore"
    assert main(["view", base, base, "--n-boot", "200", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "no gate: the candidate run is the baseline run" in printed
    html = (out / "index.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "DecompressionStream" in html
    assert "default-src &#x27;none&#x27;" in html           # loads nothing (CSP)


def test_a_cell_no_table_names_is_matched_on_the_records_values():
    frames = {"other": pd.DataFrame({"context": ["x"]}),
              "recs": pd.DataFrame({"family": ["F1", "F1", "F2"],
                                    "prompt_family": ["F1", "F1", "F2"],
                                    "slice": ["a", "b", "a"]})}
    where = link({}, frames, {}, "", "worst_slice_x", "F1")
    assert (where.records, where.values, where.n) == (
        "recs", {"family": "F1", "prompt_family": "F1"}, 2)
    assert link({}, frames, {}, "", "m", "F1/b").n == 1
    assert link({}, frames, {}, "", "m", "all").records is None


@pytest.mark.slow
def test_generative_changes_are_found_per_prompt_family(main_job, tmp_path):
    """The main job's run against a copy in which 50 generations of family F1 changed
    text and were flagged stereotyped: the per-family gate cells of F1 list exactly
    those 50 (answered -> stereotype), the other families none; the templates' (prompts')
    contributions to the stereotype rate sum to 50 / 800."""
    base = main_job.load()
    cand = main_job.load()
    rec = cand.records["generative"]
    rows = rec.index[rec["prompt_family"] == "F1"][:50]
    assert (rec.loc[rows, "stereotype"] == 0).all()
    rec.loc[rows, "stereotype"] = 1
    rec.loc[rows, "output_text"] = rec.loc[rows, "output_text"] + " (changed)"
    cand.metadata.model = "changed"
    data = bundle([base, cand], [load_rules(None, base.metadata.model)] * 2,
                  gate_options={"n_boot": 200})
    comp = data["comparisons"][0]
    by_family = {}
    for r in comp["gate"]:
        cell = comp["cells"][r["cell_index"]] if r["cell_index"] is not None else None
        if cell and cell["records"] == "generative" and r["cell"] != "all":
            by_family.setdefault(r["cell"], set()).add(len(cell["changed"]))
            assert cell["filter"]["family"] == r["cell"]
    assert by_family == {"F1": {50}, "F2": {0}, "F3": {0}, "F4": {0}}
    f1 = next(comp["cells"][r["cell_index"]] for r in comp["gate"] if r["cell"] == "F1")
    assert f1["classes"] == {f"answered{ARROW}stereotype": 50} and f1["n_first"] == 800
    assert sum(k["delta"]["stereotype"] for k in f1["clusters"]) == pytest.approx(50 / 800)
