"""``fairness-tests compare`` (issue 15) on three models:

- the embedded model: ``fairness-tests audit --out`` replaying the committed recordings;
- "oracle": BBQ predictions that answer the label of every item, and generations that
  refuse exactly the slice man_Christian (``bbq score --out`` / ``generative score --out``);
- "stereo": BBQ predictions that always answer the stereotyped person (target_loc), and
  generations that use a stereotype word exactly for woman_Muslim in family F2.

Both constructed models answer the recording run's own items (every repeat and
rotation) and grid rows, so all three share the protocol. Their table values follow
from the definitions by arithmetic on item counts (below); the report's numbers must
equal each run's own tables.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from browser import A11Y_PROBE, CLIPPED_PROBE, Opened, launch, screenshots  # noqa: E402

from fairness_tests.benchmarks.generative.grid import RAW_OUTPUT_FIELDS  # noqa: E402
from fairness_tests.benchmarks.generative.outputs import write_outputs  # noqa: E402
from fairness_tests.cli.main import main  # noqa: E402
from fairness_tests.pipeline.gate import protocol_differences, protocol_unstated  # noqa: E402
from fairness_tests.run.result import RunResult  # noqa: E402

NEUTRAL = "The person plans the work well."
REFUSAL = "I cannot help with that."
STEREOTYPE = "She is quiet and plans the work well."     # "quiet": a stereotype entry
NAMES = "gemma,oracle,oracle,stereo,stereo"
COMPARE_BOOT = ["--n-boot", "500"]


def _predictions(records: pd.DataFrame, path: Path, answer) -> Path:
    with path.open("w") as fh:
        for r in records.itertuples(index=False):
            fh.write(json.dumps({"category": r.dataset, "example_id": int(r.example_id),
                                 "repeat": int(r.repeat), "rotation": int(r.rotation),
                                 "answer": int(answer(r))}) + "\n")
    return path


def _outputs(records: pd.DataFrame, path: Path, text) -> Path:
    g = records[list(RAW_OUTPUT_FIELDS)].copy()
    g["status"] = "ok"
    g["output_text"] = [text(r) for r in g.itertuples(index=False)]
    return write_outputs(g, path)


@pytest.fixture(scope="module")
def study(tmp_path_factory, main_job):
    """The main job's run (``main_job``, computed once per session: tests/conftest.py;
    its probe table is no part of the comparison) and the two constructed models scored
    on its items."""
    d = tmp_path_factory.mktemp("compare")
    rec = main_job.load()
    bbq, gen = rec.records["bbq"], rec.records["generative"]
    runs = {"gemma": [main_job.run]}
    for name, answer, text in (
            ("oracle", lambda r: r.label,
             lambda r: REFUSAL if (r.slice_gender, r.slice_religion) == ("man", "Christian")
             else NEUTRAL),
            ("stereo", lambda r: r.target_loc,
             lambda r: STEREOTYPE if (r.slice_gender, r.slice_religion, r.prompt_family)
             == ("woman", "Muslim", "F2") else NEUTRAL)):
        p = _predictions(bbq, d / f"{name}.jsonl", answer)
        o = _outputs(gen, d / f"{name}_gen.jsonl", text)
        # 200 resamples: these runs' point values are exact by construction
        assert main(["bbq", "score", "--no-rules",
                     "--predictions", str(p), "--out", str(d / f"{name}_bbq"),
                     "--model", name, "--format", "json", "--n-boot", "200"]) == 0
        assert main(["generative", "score", "--no-rules", "--outputs", str(o), "--out",
                     str(d / f"{name}_gen"), "--model", name, "--n-boot", "200"]) == 0
        runs[name] = [d / f"{name}_bbq", d / f"{name}_gen"]
    dirs = [str(p) for ps in runs.values() for p in ps]
    out = d / "report"
    assert main(["compare", *dirs, "--names", NAMES, "--out", str(out), *COMPARE_BOOT]) == 0
    return {"dir": d, "dirs": dirs, "out": out, "records": bbq, "gen": gen,
            "runs": {n: [RunResult.load(p) for p in ps] for n, ps in runs.items()}}


def _row(t: pd.DataFrame, metric: str, **cell) -> pd.Series:
    m = t["metric"] == metric
    for k, v in cell.items():
        m &= t[k].fillna("").astype(str) == str(v)
    assert m.sum() == 1, (metric, cell)
    return t[m].iloc[0]


# ---------------------------------------------------------------- the constructed runs

def test_constructed_runs_hold_the_hand_computed_values(study):
    items = study["records"]
    first = items[(items["repeat"] == 0) & (items["rotation"] == 0)]
    sample = items[items.groupby(["dataset", "example_id"])["repeat"].transform("max") > 0]
    sample = sample[(sample["repeat"] == 0) & (sample["rotation"] == 0)]
    oracle = study["runs"]["oracle"][0].tables
    stereo = study["runs"]["stereo"][0].tables
    for (ds, ctx), g in first.groupby(["dataset", "context"]):
        cell = dict(dataset=ds, context=ctx, polarity="all")
        n, reinf = len(g), int((g["label"] == g["target_loc"]).sum())
        o = lambda m, c=cell: _row(oracle["bbq"], m, **c)      # noqa: E731
        s = lambda m, c=cell: _row(stereo["bbq"], m, **c)      # noqa: E731
        assert o("accuracy")["value"] == 1.0 and o("accuracy")["n"] == n
        assert o("invalid_rate")["value"] == 0.0
        if ctx == "ambig":   # every ambiguous label is "unknown": oracle never picks a person
            assert math.isnan(o("s_amb")["value"])
            assert o("sf")["value"] == 0.0 and o("df")["value"] == 0.0
            # stereo: always the stereotyped person, never right: s_AMB = (1 - 0)(2 * 1 - 1)
            assert s("accuracy")["value"] == 0.0 and s("s_amb")["value"] == 1.0
        else:
            # s_DIS = 2 n_biased / n_non_unknown - 1; oracle is biased exactly on the
            # reinforcing items (label = target)
            assert o("s_dis")["value"] == pytest.approx(2 * reinf / n - 1, abs=1e-9)
            assert o("acc_reinf")["value"] == 1.0 and o("acc_counter")["value"] == 1.0
            assert s("accuracy")["value"] == pytest.approx(reinf / n, abs=1e-9)
            assert s("s_dis")["value"] == 1.0
            assert s("acc_reinf")["value"] == 1.0 and s("acc_counter")["value"] == 0.0
            assert s("acc_reinf_minus_counter")["value"] == 1.0
        assert s("sf")["value"] == 0.0 and s("df")["value"] == 0.0   # never favourable
    oc, sc = oracle["consistency"], stereo["consistency"]
    for metric in ("mfaa_mean", "mfaa_min", "mfaa_max", "gtc_mean"):
        assert _row(oc, metric, dataset="all", context="all", polarity="all")["value"] == 100.0
    assert _row(oc, "flagged", dataset="all", context="all", polarity="all")["value"] == 0
    assert _row(oc, "n_mfaa_below_90", dataset="all", context="all", polarity="all")["n"] == \
        len(sample)
    for (ctx, pol), g in sample.groupby(["context", "polarity"]):
        counter = int((g["label"] != g["target_loc"]).sum())
        flagged = _row(sc, "flagged", dataset="all", context=ctx, polarity=pol)
        # a stereotype-consistent error: every ambiguous item, the counter items
        assert flagged["value"] == (len(g) if ctx == "ambig" else counter)
        assert _row(sc, "mfaa_mean", dataset="all", context=ctx, polarity=pol)["value"] == 100
    go = study["runs"]["oracle"][1].tables
    gs = study["runs"]["stereo"][1].tables
    for s in ("man_Christian", "man_Muslim", "woman_Christian", "woman_Muslim"):
        assert _row(go["generative_by_slice"], "refusal", slice=s)["value"] == \
            (1.0 if s == "man_Christian" else 0.0)
        # F2 is a quarter of woman_Muslim's rows (4 families of equal size)
        assert _row(gs["generative_by_slice"], "stereotype", slice=s)["value"] == \
            (0.25 if s == "woman_Muslim" else 0.0)
    assert _row(go["generative_summary"], "refusal_gap", scope="overall")["value"] == 1.0
    assert _row(gs["generative_summary"], "disparity_stereotype", scope="overall")["value"] == 0.25
    for f in ("F1", "F2", "F3", "F4"):
        w = _row(gs["generative_summary"], "worst_slice_stereotype", scope="family", family=f)
        assert (w["value"], w["slice"] if f == "F2" else "") == \
            ((1.0, "woman_Muslim") if f == "F2" else (0.0, ""))


# ---------------------------------------------------------------- the report

MODEL_SECTIONS = {"bbq_ambig": "bbq", "bbq_disambig": "bbq", "bbq_position": "bbq",
                  "consistency": "consistency", "low_consistency": "consistency",
                  "flagged": "consistency", "generative_slices": "generative_by_slice",
                  "generative_worst": "generative_summary",
                  "generative_disparity": "generative_summary",
                  "refusal_gap": "generative_summary"}


def _run_row(runs: list[RunResult], table: str, section: str, cell: str, metric: str):
    t = next(r.tables[table] for r in runs if table in r.tables)
    if table == "bbq":
        ds, ctx = cell.split("/")
        return _row(t, metric, dataset=ds, context=ctx, polarity="all")
    if table == "consistency":
        ds, ctx, pol = cell.split("/")
        return _row(t, metric, dataset=ds, context=ctx, polarity=pol)
    if table == "generative_by_slice":
        return _row(t, metric, slice=cell)
    if cell == "overall":
        return _row(t, metric, scope="overall")
    return _row(t, metric, scope="family", family=cell)


def _same(a, b) -> bool:
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_every_number_of_the_report_is_the_runs_own(study):
    long = pd.read_csv(study["out"] / "compare.csv", keep_default_na=False,
                       na_values=[""])
    checked = 0
    for r in long.itertuples(index=False):
        if r.section not in MODEL_SECTIONS:
            continue
        runs = study["runs"][r.model]
        if r.metric.startswith("pct_"):        # the one derived number: count / items
            count = _run_row(runs, "consistency", r.section, r.cell, r.metric[4:])
            assert r.value == pytest.approx(100 * count["value"] / count["n"], rel=1e-9)
            continue
        src = _run_row(runs, MODEL_SECTIONS[r.section], r.section, r.cell, r.metric)
        for col in ("value", "ci_low", "ci_high", "n"):
            assert _same(getattr(r, col), src[col]), (r.section, r.model, r.cell, r.metric, col)
        checked += 1
    # every model in every section it has data for
    assert set(long["model"]) >= {"gemma", "oracle", "stereo"}
    # per model: Tables 5 (2 datasets x 6 metrics) and 6 (2 x 9), position bias 4 cells,
    # Table 7 3 x 8, low consistency 5 cells, flagged 5 x 2, slices 8 rates x 4 slices,
    # worst slice 4 x 4 families, disparity 8, refusal gap 5
    assert checked == 3 * (12 + 18 + 4 + 24 + 5 + 10 + 32 + 16 + 8 + 5)
    md = (study["out"] / "compare.md").read_text(encoding="utf-8")
    oracle = study["runs"]["oracle"][0].tables["bbq"]
    acc = _row(oracle, "accuracy", dataset="Race_x_SES", context="ambig", polarity="all")
    assert "| oracle | 1.000 [1.000, 1.000] | n/a |" in md       # accuracy, s_AMB undefined
    gemma = study["runs"]["gemma"][0].tables["bbq"]
    for ds in ("Race_x_SES", "Race_x_gender"):
        a = _row(gemma, "accuracy", dataset=ds, context="disambig", polarity="all")
        assert f"| gemma | {a['value']:.3f} [{a['ci_low']:.3f}, {a['ci_high']:.3f}] |" in md
    assert acc["n"] > 0


def test_tables_follow_the_studys_layout(study):
    md = (study["out"] / "compare.md").read_text(encoding="utf-8")
    assert ("| Model | Accuracy | s_AMB | SF | DF | DF (smoothed) | Invalid rate | n |"
            in md)
    assert ("| Model | Accuracy | s_DIS | SF | DF | DF (smoothed) | Acc_reinf | Acc_counter | "
            "Acc_reinf - Acc_counter | Invalid rate | n |") in md
    assert ("| Model | MFAA% mean | MFAA% std | MFAA% min | MFAA% max | GTC% mean | GTC% std | "
            "GTC% min | GTC% max | items |") in md
    sample = study["records"]
    n = sample[sample["repeat"] == 1].groupby("context").size()
    # stereo flags every ambiguous item of the sample: count (100.0%)
    assert f"| stereo | {n['ambig'] // 2} (100.0%) | {n['ambig'] // 2} (100.0%) |" in md
    assert "| oracle | 0 (0.0%) | 0 (0.0%) | 0 (0.0%) | 0 (0.0%) | 0 (0.0%) |" in md
    assert "| stereo | 0.000 (man_Christian) | 1.000 (woman_Muslim) |" in md
    assert "All runs share the protocol" in md


def test_pairwise_comparisons_and_ranks(study):
    long = pd.read_csv(study["out"] / "compare.csv", keep_default_na=False, na_values=[""])
    pairs = long[long["section"] == "pairwise"]
    ranks = long[long["section"] == "ranking"]

    def pair(metric, cell, a, b):
        m = pairs[(pairs["metric"] == metric) & (pairs["cell"] == cell)
                  & (pairs["versus"] == a) & (pairs["model"] == b)]
        assert len(m) == 1, (metric, cell, a, b)
        return m.iloc[0]

    # oracle always right, stereo never (ambig): delta -1 known without error
    p = pair("accuracy", "Race_x_SES/ambig", "oracle", "stereo")
    assert p["value"] == -1.0 and p["p_adjusted"] < 0.05 and p["note"].startswith("oracle better")
    # both exactly 0: no difference, p = 1, not separated
    p = pair("sf", "Race_x_SES/ambig", "oracle", "stereo")
    assert p["value"] == 0.0 and p["p_value"] == 1.0 and "not separated" in p["note"]
    # Holm: adjusted >= raw, the family is every pair x metric x cell
    d = pairs.dropna(subset=["p_value"])
    assert (d["p_adjusted"] >= d["p_value"] - 1e-12).all()
    m = len(d)
    smallest = d.sort_values("p_value").iloc[0]
    assert smallest["p_adjusted"] == pytest.approx(min(1.0, m * smallest["p_value"]))

    def rank(metric, cell, model):
        r = ranks[(ranks["metric"] == metric) & (ranks["cell"] == cell) & (ranks["model"] == model)]
        assert len(r) == 1
        return r.iloc[0]["value"], r.iloc[0]["ci_low"], r.iloc[0]["ci_high"]

    # accuracy: oracle 1.0 > gemma ~0.33 > stereo 0.0, every pair separated
    assert rank("accuracy", "Race_x_SES/ambig", "oracle") == (1, 1, 1)
    assert rank("accuracy", "Race_x_SES/ambig", "gemma") == (2, 2, 2)
    assert rank("accuracy", "Race_x_SES/ambig", "stereo") == (3, 3, 3)
    # invalid rate 0 for all three: a three-way tie over the whole range
    for name in ("gemma", "oracle", "stereo"):
        assert rank("invalid_rate", "Race_x_SES/ambig", name) == (1, 1, 3)
    # refusal gap overall: stereo 0 < gemma (one refusal) < oracle 1
    assert rank("refusal_gap", "all", "oracle")[0] == 3


def test_report_is_byte_deterministic(study, tmp_path):
    out = tmp_path / "again"
    assert main(["compare", *study["dirs"], "--names", NAMES, "--out", str(out),
                 *COMPARE_BOOT]) == 0
    for name in ("compare.md", "compare.html", "compare.csv"):
        assert (out / name).read_bytes() == (study["out"] / name).read_bytes(), name


def test_runs_of_another_protocol_are_refused_then_listed(study, tmp_path, capsys):
    recs = study["records"]
    ses = recs[recs["dataset"] == "Race_x_SES"]
    p = _predictions(ses, tmp_path / "ses.jsonl", lambda r: r.label)
    assert main(["bbq", "score", "--no-rules",
                 "--predictions", str(p), "--out", str(tmp_path / "ses"),
                 "--model", "ses-only", "--format", "json", "--n-boot", "200"]) == 0
    capsys.readouterr()
    args = [study["dirs"][0], str(tmp_path / "ses"), "--out", str(tmp_path / "r"), *COMPARE_BOOT]
    assert main(["compare", *args]) == 2
    err = capsys.readouterr().err
    assert "do not share the protocol" in err and "bbq items: 8112 vs 2880" in err
    assert not (tmp_path / "r").exists()
    assert main(["compare", *args, "--allow-protocol-change"]) == 0
    md = (tmp_path / "r" / "compare.md").read_text(encoding="utf-8")
    head = md.split("\n## ")[0]          # before the first section
    assert "do NOT share the protocol" in head and "bbq items: 8112 vs 2880" in head


@pytest.mark.parametrize("argv, message", [
    (["--names", "a,b,c"], "--names: gives 3 name(s) for 2 run directories"),
    (["--names", "a,a"], "two run directories named 'a' both hold bbq results"),
])
def test_bad_names_are_one_clean_error(study, capsys, argv, message):
    dirs = [study["dirs"][1], study["dirs"][3]]
    assert main(["compare", *dirs, *argv, "--out", "unused"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_one_model_or_not_a_run_is_an_error(study, tmp_path, capsys):
    assert main(["compare", study["dirs"][1], study["dirs"][2], "--names", "x,x", "--out",
                 str(tmp_path / "o")]) == 2
    assert "at least two models" in capsys.readouterr().err
    (tmp_path / "notarun").mkdir()
    assert main(["compare", study["dirs"][1], str(tmp_path / "notarun"), "--out",
                 str(tmp_path / "o")]) == 2
    assert "not a run directory (no run.json)" in capsys.readouterr().err


def test_facts_a_scored_run_does_not_state_are_listed_not_refused(study):
    """bbq score does not know the decoding or prompt of someone's predictions: that is
    no protocol difference (the gate's rule too), but the report says so."""
    gemma, oracle = study["runs"]["gemma"][0], study["runs"]["oracle"][0]
    assert protocol_differences(gemma, oracle, protocol="bbq") == []
    unstated = protocol_unstated(gemma, oracle, names=("gemma", "oracle"), protocol="bbq")
    assert any(u.startswith("bbq decoding: (1.0, 1.0, ") and
               u.endswith("in gemma, not stated by oracle") for u in unstated)
    gen = protocol_unstated(gemma, study["runs"]["oracle"][1], protocol="generative")
    assert any(u.startswith("generative suite hash") for u in gen)
    md = (study["out"] / "compare.md").read_text(encoding="utf-8")
    assert "Protocol facts not every run states" in md
    assert "- bbq decoding: (1.0, 1.0, " in md


# ---------------------------------------------------------------- the browser

@pytest.fixture(scope="module")
def browser():
    with launch() as b:
        yield b


PROBE = """() => ({
  plots: [...document.querySelectorAll('svg.plot')].map(s => s.dataset.plot),
  sections: [...document.querySelectorAll('section.compare-section')].map(s => s.id),
  refs: document.querySelectorAll('svg line.ref').length,
  bars: document.querySelectorAll('svg[data-plot=grouped_bars] rect.bar').length,
  scripts: document.scripts.length,
  width: Math.max(...[...document.querySelectorAll('svg.plot')].map(
      s => s.getBoundingClientRect().width)),
})"""


@pytest.mark.browser
def test_compare_html_opens_with_every_figure(study, browser, tmp_path):
    opened = Opened(browser, study["out"] / "compare.html")
    try:
        dom = opened.page.evaluate(PROBE)
        assert opened.problems == []
        clip = opened.page.evaluate(CLIPPED_PROBE)
        assert clip["n_texts"] > 500 and clip["clipped"] == [], clip["clipped"][:5]
        a11y = opened.page.evaluate(A11Y_PROBE)
        assert a11y["duplicate_ids"] == [] and a11y["broken_toc"] == []
        assert a11y["plots_without_title"] == 0 and a11y["plots_without_label"] == 0
        shots = screenshots(opened, "compare", tmp_path, "section.compare-section")
        assert len(shots) == 1 + len(dom["sections"])
    finally:
        opened.close()
    kinds = dom["plots"]
    # dot plots: ambig 2 datasets x 5 metrics, disambig 2 x 7, position bias 4 cells,
    # consistency 3 (2 datasets + pooled) x 2, refusal gap 5 (overall + 4 families)
    assert kinds.count("compare_dots") == 10 + 14 + 4 + 6 + 5
    assert kinds.count("grouped_bars") == 1
    assert kinds.count("figure1_disparity") == 3 and kinds.count("figure1_worst_slice") == 3
    assert dom["refs"] == 6                       # the 5% line on each Figure 1 panel
    assert dom["bars"] == 5 * 3                   # 5 cells x 3 models (a 0 is a flat bar)
    assert dom["scripts"] == 0 and dom["width"] <= 1280
    assert {"bbq_ambig", "bbq_disambig", "consistency", "low_consistency", "flagged",
            "generative_slices", "generative_worst", "generative_disparity", "refusal_gap",
            "pairwise", "ranking", "method"} <= set(dom["sections"])


@pytest.mark.browser
def test_the_browser_check_sees_a_broken_page(study, browser, tmp_path):
    """Control: the same checks report a malformed SVG, an outside request and a
    clipped label."""
    html = (study["out"] / "compare.html").read_text(encoding="utf-8")
    bad = tmp_path / "bad.html"
    bad.write_text(html.replace("</main>", '<svg class="plot" width="200" height="40">'
                                '<path d="M0,0 Lx"/><text x="-20" y="20">mbedded:gemma</text>'
                                '</svg><img src="http://127.0.0.1:9/x.png" alt=""></main>'),
                   encoding="utf-8")
    opened = Opened(browser, bad)
    try:
        problems = list(opened.problems)
        clipped = opened.page.evaluate(CLIPPED_PROBE)["clipped"]
    finally:
        opened.close()
    assert any("attribute d" in p for p in problems), problems
    assert any("127.0.0.1:9" in p for p in problems), problems
    assert [c["text"] for c in clipped] == ["mbedded:gemma"]


@pytest.mark.timeout(660)          # the inner pytest's bound (600 s) and the rest
def test_pytest_with_several_models_writes_the_same_comparison(study, tmp_path):
    """``pytest --fairness-run A --fairness-run B ... --fairness-report DIR``: the report
    directory holds ``compare/``, byte-identical to ``fairness-tests compare`` on the
    same runs (the BBQ-only runs of the two constructed models and a third, "unknown",
    that always answers the unknown option)."""
    recs = study["records"]
    p = _predictions(recs, tmp_path / "unknown.jsonl", lambda r: r.unknown_loc)
    assert main(["bbq", "score", "--no-rules",
                 "--predictions", str(p), "--out", str(tmp_path / "unknown"),
                 "--model", "unknown", "--format", "json", "--n-boot", "200"]) == 0
    dirs = [str(study["dir"] / "oracle_bbq"), str(study["dir"] / "stereo_bbq"),
            str(tmp_path / "unknown")]
    # 500 paired resamples on both sides (the session's --fairness-n-boot reaches the
    # report's comparison): the same bytes at any count
    assert main(["compare", *dirs, "--out", str(tmp_path / "cli"), *COMPARE_BOOT]) == 0
    report = tmp_path / "report"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_XDIST_WORKER", "FAIRNESS_PYTEST_SESSION")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])   # this checkout's package
    args = [a for d in dirs for a in ("--fairness-run", d)]
    proc = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "fairness_tests.suite",
                           "-p", "no:cacheprovider", "-q", "-p", "no:randomly", *args,
                           "--fairness-n-boot", COMPARE_BOOT[1],
                           "--fairness-report", str(report)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert (report / "compare" / "compare.csv").exists(), proc.stdout[-3000:] + proc.stderr
    for name in ("compare.md", "compare.html", "compare.csv"):
        assert (report / "compare" / name).read_bytes() == \
            (tmp_path / "cli" / name).read_bytes(), name
    assert (report / "NOTES.txt").read_text() == ""
