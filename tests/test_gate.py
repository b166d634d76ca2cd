"""``fairness-tests gate`` and :func:`fairness_tests.pipeline.gate.gate_runs` on run directories
made from the committed recordings (tests/gate_testdata.py): a built-in regression
fails exactly its cell; a candidate that is the baseline and runs of different
protocols are refused by name."""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from gate_testdata import CAND, PRED_COLUMNS, disambig_items, scored_run, with_answers
from scipy import stats

from fairness_tests.cli.main import main
from fairness_tests.pipeline.gate import (
    CandidateIsBaselineError,
    ProtocolChangeError,
    gate_runs,
    protocol_differences,
    protocol_signature,
)
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.run.result import RunResult

pytestmark = pytest.mark.slow


@pytest.fixture
def runs(gate_run_dirs):
    """The baseline and candidate, built once per session (tests/conftest.py)."""
    return gate_run_dirs


@pytest.fixture(scope="module")
def gated(gate_run_dirs, tmp_path_factory) -> dict:
    """``fairness-tests gate BASE CAND --format json --out G`` once for the module: its
    exit code, what it printed and ``G`` (read-only: the tests that write cards from it
    write them elsewhere)."""
    g = tmp_path_factory.mktemp("gate") / "g"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["gate", str(gate_run_dirs["base"]), str(gate_run_dirs["cand"]), "--format",
                   "json", "--out", str(g)])
    return {"rc": rc, "out": out.getvalue(), "err": err.getvalue(), "dir": g}


def test_regression_fails_exactly_its_cell_and_exits_1(gated):
    rc, out = gated["rc"], json.loads(gated["out"])
    assert rc == 1 and out["failed"] is True
    failed = {(r["metric"], r["cell"]) for r in out["rows"] if r["verdict"] == "fail"}
    assert failed and {c for _, c in failed} == {"Race_x_gender/disambig"}
    assert {"accuracy", "abs_s_dis"} <= {m for m, _ in failed}
    # every gated metric is there, with raw and Holm-adjusted p-values and power
    metrics = {r["metric"] for r in out["rows"]}
    assert {"accuracy", "abs_s_dis", "abs_s_amb", "abs_acc_reinf_minus_counter", "sf",
            "df_eb", "invalid_rate", "position_bias", "mfaa_mean",
            "gtc_mean"} <= metrics
    m = sum(r["p_value"] is not None for r in out["rows"])
    for r in out["rows"]:
        assert r["p_adjusted"] >= r["p_value"]
        assert r["p_adjusted"] == pytest.approx(1.0) or r["p_adjusted"] <= m * r["p_value"] + 1e-12
    assert "Holm" in out["family"] and f"all {m}" in out["family"]
    assert any(s.startswith("this gate detects an accuracy drop of at least")
               and s.endswith("in Race_x_SES/disambig (80% power)") for s in out["detectable"])
    assert out["clusters"] == {"bbq": "template"}          # only the families gated
    acc = next(r for r in out["rows"] if r["metric"] == "accuracy"
               and r["cell"] == "Race_x_gender/disambig")
    assert acc["n_clusters"] == 42 and acc["test"].startswith("cluster-robust Wald")
    assert {p.name for p in gated["dir"].iterdir()} == {"gate.csv", "gate.json", "gate.md",
                                                        "explore", ".fairness-tests-output"}
    assert (gated["dir"] / "explore" / "index.html").stat().st_size > 0


def test_mode_override_and_text_format(runs, capsys):
    rc = main(["gate", str(runs["base"]), str(runs["cand"]), "--mode", "non_inferiority"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "non_inferiority" in out and "harm " not in out
    assert "this gate detects" in out or "fails with 80% probability" in out


def test_candidate_that_is_the_baseline_is_refused(runs, capsys):
    # issue 10, defect 5: the baseline served the candidate's run, every delta was 0
    # and the gate passed; now it is a named refusal, exit 2
    with pytest.raises(CandidateIsBaselineError, match="identical responses"):
        gate_runs(RunResult.load(runs["base"]), RunResult.load(runs["base"]))
    assert main(["gate", str(runs["base"]), str(runs["base"])]) == 2
    assert "the candidate run is the baseline run" in capsys.readouterr().err
    # another model id with the very same answers is a legitimate (passing) gate
    base = RunResult.load(runs["base"])
    other = dataclasses.replace(base, metadata=dataclasses.replace(base.metadata, model=CAND))
    report = gate_runs(base, other, n_boot=200)
    assert not report.failed and (report.table["delta"].fillna(0) == 0).all()


def test_protocol_change_is_refused_with_the_differences_listed(runs, tmp_path, capsys):
    base = RunResult.load(runs["base"])
    cand = RunResult.load(runs["cand"])
    rec = cand.records["bbq"]
    fewer = with_answers(cand, rec.loc[rec["dataset"] == "Race_x_gender", PRED_COLUMNS], CAND)
    fewer.metadata.infos["bbq"] = dataclasses.replace(fewer.metadata.infos["bbq"],
                                                      temperature=0.7)
    fewer.save(tmp_path / "fewer")
    diffs = protocol_differences(base, fewer)
    assert any(d.startswith("bbq items: ") and "only in the baseline" in d for d in diffs)
    assert any(d.startswith("bbq decoding: ") for d in diffs)
    assert protocol_signature(base)["bbq items"] >= protocol_signature(fewer)["bbq items"]
    with pytest.raises(ProtocolChangeError, match="bbq items"):
        gate_runs(base, fewer)
    assert main(["gate", str(runs["base"]), str(tmp_path / "fewer")]) == 2
    err = capsys.readouterr().err
    assert "do not share the protocol" in err and "bbq decoding" in err
    # allowed: the common items are compared, the differences are warnings
    rc = main(["gate", str(runs["base"]), str(tmp_path / "fewer"), "--allow-protocol-change",
               "--format", "json"])
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert rc == 1 and out["warnings"] and "protocol differs" in cap.err
    assert {r["cell"].split("/")[0] for r in out["rows"]} == {"Race_x_gender"}


def test_item_resampling_is_a_choice(runs):
    base, cand = RunResult.load(runs["base"]), RunResult.load(runs["cand"])
    r = gate_runs(base, cand, cluster={"bbq": "item"}, n_boot=200)
    assert r.clusters["bbq"] == "item" and r.table["n_clusters"].isna().all()
    assert "BBQ items" in r.family
    with pytest.raises(Exception, match="template, item"):
        gate_runs(base, cand, cluster={"bbq": "prompt"})


def test_rule_gate_settings_reach_the_cells(runs, tmp_path):
    # a thresholds file whose accuracy rule asks for non-inferiority at a 5-point margin
    (tmp_path / "default.yaml").write_text(
        "version: 1\nrules:\n  - id: accuracy_floor_disambig\n    table: bbq\n"
        "    metric: accuracy\n    scope: {context: disambig}\n    op: '>='\n    bound: 0.6\n"
        "    gate: {mode: non_inferiority, margin: 0.05}\n    rationale: test\n",
        encoding="utf-8")
    rules = load_rules(tmp_path / "default.yaml", CAND)
    r = gate_runs(RunResult.load(runs["base"]), RunResult.load(runs["cand"]), rules=rules,
                  n_boot=200).table
    acc = r[(r["metric"] == "accuracy") & r["cell"].str.endswith("/disambig")]
    assert (acc["mode"] == "non_inferiority").all() and (acc["margin"] == 0.05).all()
    assert (acc["rule"] == "accuracy_floor_disambig").all()
    rest = r[~r.index.isin(acc.index)]
    assert (rest["mode"] == "harm").all()          # no gate setting: harm, default margin
    # the default thresholds state every default margin as data
    default = {x.id: x.gate for x in load_rules(None, CAND).rules}
    assert default["accuracy_floor_ambig"].mode == "harm"
    assert default["refusal_gap"].margin == 0.05


def generations(path, stereo_rate: float, seed: int):
    """2 families x 10 prompts (5 paraphrases x 2 occupations of the packaged suite) x
    2 slices x 3 seeds; the stereotype keyword ("quiet", published rubric) in F1's
    woman_Christian generations at ``stereo_rate`` (seeded), nowhere else."""
    rng = np.random.default_rng(seed)
    rows = []
    for fam in ("F1", "F2"):
        for para in range(10):
            for g, r in (("man", "Muslim"), ("woman", "Christian")):
                for s in range(3):
                    hit = fam == "F1" and g == "woman" and rng.random() < stereo_rate
                    rows.append({"prompt_family": fam, "paraphrase_id": f"p{para % 5 + 1}",
                                 "occupation": ("nurse", "teacher")[para // 5],
                                 "slice_gender": g, "slice_religion": r,
                                 "temperature": 0.7, "top_p": 0.95, "seed": s, "status": "ok",
                                 "output_text": "She is quiet." if hit else "Fine work."})
    path.write_text("".join(json.dumps(x) + "\n" for x in rows), encoding="utf-8")
    return path


def test_generative_regression_fails_its_family(tmp_path, capsys):
    for name, rate, seed in (("base", 0.0, 1), ("cand", 0.6, 2)):
        out = generations(tmp_path / f"{name}.jsonl", rate, seed)
        assert main(["generative", "score", "--no-rules", "--outputs", str(out), "--model", name,
                     "--n-boot", "200", "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    rc = main(["gate", str(tmp_path / "base"), str(tmp_path / "cand"), "--format", "json",
               "--n-boot", "500"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1
    failed = {(r["metric"], r["cell"]) for r in out["rows"] if r["verdict"] == "fail"}
    # the worst-slice stereotype rate of F1 and the overall slice disparity rise
    assert ("worst_slice_stereotype", "F1") in failed
    assert ("worst_slice_stereotype", "F2") not in failed
    assert {c for _, c in failed} <= {"F1", "all"}
    ws = next(r for r in out["rows"]
              if (r["metric"], r["cell"]) == ("worst_slice_stereotype", "F1"))
    assert ws["n_clusters"] == 20                      # 10 paraphrases x 2 slices in F1


def test_the_candidates_card_carries_the_gate(runs, gated, tmp_path, capsys):
    """Issue 11 section 3: each cell's mode, margin, raw and Holm-adjusted p and the
    smallest detectable worsening are on the candidate's card, copied from gate.json."""
    assert gated["rc"] == 1
    record = json.loads((gated["dir"] / "gate.json").read_text())
    assert main(["card", "--run", str(runs["cand"]), "--gate", str(gated["dir"]),
                 "--out", str(tmp_path / "card")]) == 0
    capsys.readouterr()
    card = yaml.safe_load((tmp_path / "card" / "card.yaml").read_text())
    g = card["upgrade_gate"]
    assert (g["baseline"], g["candidate"], g["failed"]) == (record["baseline"],
                                                           record["candidate"], True)
    assert g["correction"] == "Holm" and g["family"] == record["family"]
    assert g["detectable"] == record["detectable"]
    assert len(g["cells"]) == len(record["rows"])
    # the card keeps 6 significant digits
    for c, r in zip(g["cells"], record["rows"], strict=True):
        for k in ("metric", "cell", "mode", "margin", "p_value", "p_adjusted", "detectable",
                  "verdict"):
            if isinstance(r.get(k), float):
                assert c[k] == pytest.approx(r[k], rel=1e-5), k
            elif r.get(k) is not None:
                assert c[k] == r[k], k
    md = (tmp_path / "card" / "card.md").read_text()
    assert "Upgrade gate: " in md and "The gate FAILS" in md and "p (Holm)" in md
    assert any(s in md.replace("\\_", "_") for s in record["detectable"])
    html = (tmp_path / "card" / "card.html").read_text()
    assert 'id="upgrade_gate"' in html
    assert main(["card", "validate", str(tmp_path / "card" / "card.yaml")]) == 0


def test_a_gate_of_another_candidate_or_a_broken_record_is_a_clean_error(runs, gated, tmp_path,
                                                                       capsys):
    assert gated["rc"] == 1
    # the baseline's card cannot carry the candidate's gate
    assert main(["card", "--run", str(runs["base"]), "--gate", str(gated["dir"]),
                 "--out", str(tmp_path / "card")]) == 2
    err = capsys.readouterr().err
    assert "gate.json" in err and "candidate" in err and "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"baseline": "a",\n "candidate": }\n')
    assert main(["card", "--run", str(runs["cand"]), "--gate", str(bad),
                 "--out", str(tmp_path / "card2")]) == 2
    err = capsys.readouterr().err
    assert "bad.json" in err and "line 2" in err and "Traceback" not in err
    assert not (tmp_path / "card2").exists()


@pytest.mark.timeout(660)          # the inner pytest's bound (600 s) and the rest
def test_pytest_report_puts_the_gate_on_the_candidates_card(runs, tmp_path):
    base, cand = RunResult.load(runs["base"]), RunResult.load(runs["cand"])
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_XDIST_WORKER", "FAIRNESS_PYTEST_SESSION")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "fairness_tests.suite", "-q",
         "-p", "no:cacheprovider", "-m", "gate", "--fairness-run", str(runs["base"]),
         "--fairness-run", str(runs["cand"]), "--fairness-baseline-model",
         base.metadata.model, "--fairness-n-boot", "200",     # as the runs were made
         "--fairness-report",
         str(tmp_path / "r")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:]          # the regression fails its cells
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in cand.metadata.model)
    card = yaml.safe_load((tmp_path / "r" / slug / "card" / "card.yaml").read_text())
    g = card["upgrade_gate"]
    assert g["baseline"] == base.metadata.model and g["failed"] is True
    gate_csv = next((tmp_path / "r").glob("gate-*.csv"))
    assert len(g["cells"]) == len(pd.read_csv(gate_csv))
    # the run explorer of the candidate against the baseline, linked from its card and
    # named in the step summary
    explorer = tmp_path / "r" / slug / "explore" / "index.html"
    assert explorer.is_file()
    assert 'href="../explore/index.html"' in (tmp_path / "r" / slug / "card" / "card.html") \
        .read_text()
    assert f"{slug}/explore/index.html" in (tmp_path / "summary.md").read_text()


# ----------------------------------------------------------------------------- issue 32
# Runs scored by ``bbq score`` from predictions on cells of 1, 2 and 30 templates
# (question_index clusters, resampled by default). Baseline: the label, except every
# fifth item (index 4, 9, ...) answered (label + 1) % 3 (wrong). "wrong": every item
# (label + 1) % 3. "same": the baseline's answers under the model id "same" (the
# baseline has none: bbq score without --model).

SIZES = {1: ("Race_x_SES", 60), 2: ("Race_x_SES", 30), 30: ("Race_x_gender", 6)}


@pytest.fixture(scope="module")
def cells(tmp_path_factory) -> dict:
    """{templates: {"base", "wrong", "same": run directory, "n": items}}."""
    root = tmp_path_factory.mktemp("cells")
    out = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for k, (dataset, per) in SIZES.items():
            items = disambig_items(dataset, k, per)
            label = items["label"].to_numpy(int)
            base = np.where(np.arange(len(items)) % 5 == 4, (label + 1) % 3, label)
            out[k] = {"n": len(items),
                      "base": scored_run(root / f"base{k}", items, base),
                      "wrong": scored_run(root / f"wrong{k}", items, (label + 1) % 3),
                      "same": scored_run(root / f"same{k}", items, base, model="same")}
    return out


def gate_json(base, cand, *args) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["gate", str(base), str(cand), "--n-boot", "200", "--format", "json", *args])
    return rc, json.loads(out.getvalue()), err.getvalue()


@pytest.mark.parametrize("mode", ["harm", "non_inferiority"])
@pytest.mark.parametrize("cand", ["wrong", "same"])
def test_one_template_compares_nothing_exit_5(cells, mode, cand):
    """Issue 32, defect 1: one template in the cell: every comparison lacks a test
    (MIN_UNITS = 2 clusters), so nothing is compared: exit 5 in both modes (before:
    exit 0, "no cell fails"), one line on stderr naming the cause; non-inferiority
    cells are not shown, so their verdict is fail."""
    rc, out, err = gate_json(cells[1]["base"], cells[1][cand], "--mode", mode)
    assert rc == 5
    assert out["evaluated"] == 0 and out["not_evaluated"] == len(out["rows"]) > 0
    assert all(r["p_value"] is None for r in out["rows"])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "nothing compared" in lines[0]
    assert "1 cluster (question_index)" in lines[0]
    assert "no cell fails" not in out["summary"] and "nothing compared" in out["summary"]
    want = "not_evaluable" if mode == "harm" else "fail"
    assert {r["verdict"] for r in out["rows"]} == {want}
    if mode == "non_inferiority":
        assert all(r["note"].startswith("not shown to be no worse") and
                   "1 cluster (question_index)" in r["note"] for r in out["rows"])


def test_two_templates_are_evaluable_and_cannot_show_non_inferiority(cells):
    """Two templates meet the minimum (MIN_UNITS = 2 resampled clusters): every row
    has a test. In non_inferiority the accuracy cell of identical answers is the
    cluster score statistic T = -m sum n_t / sqrt(sum (m n_t)^2) = -60 / sqrt(1800)
    = -sqrt(2) (two templates of 30 items), Student t with 1 df: p = 1/2 -
    atan(sqrt 2) / pi = 0.196 > 0.05, so it fails (|T| <= sqrt(C) whatever the
    answers); in harm identical answers pass."""
    c = cells[2]
    rc, out, _ = gate_json(c["base"], c["same"], "--mode", "non_inferiority")
    assert out["evaluated"] == len(out["rows"]) and out["not_evaluated"] == 0
    acc = next(r for r in out["rows"] if r["metric"] == "accuracy")
    assert acc["n_clusters"] == 2 and acc["delta"] == 0
    assert acc["p_value"] == pytest.approx(0.5 - math.atan(math.sqrt(2)) / math.pi, rel=1e-6)
    assert acc["verdict"] == "fail" and rc == 1
    rc, out, _ = gate_json(c["base"], c["same"], "--mode", "harm")
    assert rc == 0 and out["evaluated"] == len(out["rows"])
    assert "all 6 comparisons evaluated" in out["summary"]


def test_thirty_templates_fail_a_wrong_candidate_and_judge_a_same_one(cells):
    """30 templates of 6 items: the baseline is right on 144 of 180 (every fifth item
    wrong), the all-wrong candidate on 0: delta -0.8, far beyond the 0.02 margin:
    harm fails it (exit 1). The same answers under another model id: every delta 0;
    harm passes (exit 0); non-inferiority shows every cell within its margin: the
    accuracy cell's cluster score T = -sum n_t / sqrt(sum n_t^2) = -sqrt(30), Student
    t with 29 df (exit 0)."""
    c = cells[30]
    assert c["n"] == 180
    rc, out, _ = gate_json(c["base"], c["wrong"], "--mode", "harm")
    acc = next(r for r in out["rows"] if r["metric"] == "accuracy")
    assert (acc["baseline"], acc["candidate"]) == (pytest.approx(0.8), 0)
    assert acc["delta"] == pytest.approx(-0.8) and acc["n_clusters"] == 30
    assert acc["verdict"] == "fail" and rc == 1
    rc, out, _ = gate_json(c["base"], c["same"], "--mode", "harm")
    assert rc == 0 and out["evaluated"] == len(out["rows"])
    assert not {r["verdict"] for r in out["rows"]} & {"fail", "not_evaluable"}
    rc, out, _ = gate_json(c["base"], c["same"], "--mode", "non_inferiority")
    acc = next(r for r in out["rows"] if r["metric"] == "accuracy")
    assert acc["p_value"] == pytest.approx(stats.t.cdf(-30 ** 0.5, 29), rel=1e-6)
    assert {r["verdict"] for r in out["rows"]} == {"no_worse"} and rc == 0


def test_non_inferiority_cells_not_evaluable_fail_among_evaluable_ones(cells, tmp_path):
    """Per-cell modes from the rules: non_inferiority on the disambiguated accuracy only.
    A baseline of the 1-template cell plus the 30-template cell: the 1-template cell's
    NI accuracy row cannot be evaluated, so it fails (not shown) while the 30-template
    cell is compared: exit 1; harm rows of the 1-template cell stay not_evaluable."""
    items = pd.concat([disambig_items("Race_x_SES", 1, 60),
                       disambig_items("Race_x_gender", 30, 6)], ignore_index=True)
    label = items["label"].to_numpy(int)
    base = np.where(np.arange(len(items)) % 5 == 4, (label + 1) % 3, label)
    with contextlib.redirect_stdout(io.StringIO()):
        b = scored_run(tmp_path / "b", items, base)
        c = scored_run(tmp_path / "c", items, base, model="same")
    (tmp_path / "t.yaml").write_text(
        "version: 1\nrules:\n  - id: accuracy_floor_disambig\n    table: bbq\n"
        "    metric: accuracy\n    scope: {context: disambig}\n    op: '>='\n    bound: 0.6\n"
        "    gate: {mode: non_inferiority, margin: 0.02}\n    rationale: test\n",
        encoding="utf-8")
    rc, out, err = gate_json(b, c, "--thresholds", str(tmp_path / "t.yaml"))
    rows = {(r["metric"], r["cell"]): r for r in out["rows"]}
    ses = rows[("accuracy", "Race_x_SES/disambig")]
    assert ses["mode"] == "non_inferiority" and ses["verdict"] == "fail"
    assert ses["p_value"] is None and ses["note"].startswith("not shown to be no worse")
    assert rows[("accuracy", "Race_x_gender/disambig")]["verdict"] == "no_worse"
    assert rows[("abs_s_dis", "Race_x_SES/disambig")]["verdict"] == "not_evaluable"
    assert rc == 1 and err == ""
    assert "1 of them non-inferiority not shown" in out["summary"]
    assert "comparisons not evaluated (Race_x_SES/disambig" in out["summary"]


def test_the_header_names_the_runs(cells, capsys):
    """Issue 32, defect 2: runs of ``bbq score`` without --model were "candidate None
    vs baseline None"; now the model id, else the run directory."""
    c = cells[30]
    assert main(["gate", str(c["base"]), str(c["wrong"]), "--n-boot", "200"]) == 1
    head = capsys.readouterr().out.splitlines()[0]
    assert head == f"fairness gate: candidate {c['wrong']} vs baseline {c['base']}"
    assert main(["gate", str(c["base"]), str(c["same"]), "--n-boot", "200",
                 "--format", "md"]) == 0
    assert f"## Fairness gate: same vs {c['base']}" in capsys.readouterr().out


def test_the_card_shows_a_gate_that_compared_nothing(cells, tmp_path, capsys):
    """card --gate of a non-inferiority gate that compared nothing: every cell fail
    with its note (not shown), the outcome says nothing was compared; the card names
    the baseline by its directory (its run has no model id) and validates."""
    c = cells[1]
    rc = main(["gate", str(c["base"]), str(c["same"]), "--mode", "non_inferiority",
               "--n-boot", "200", "--out", str(tmp_path / "g")])
    assert rc == 5
    assert main(["card", "--run", str(c["same"]), "--gate", str(tmp_path / "g"),
                 "--out", str(tmp_path / "card")]) == 0
    capsys.readouterr()
    g = yaml.safe_load((tmp_path / "card" / "card.yaml").read_text())["upgrade_gate"]
    assert g["evaluated"] == 0 and g["baseline"] == str(c["base"])
    assert "nothing compared" in g["summary"]
    assert all(x["verdict"] == "fail" and x["note"].startswith("not shown") for x in g["cells"])
    md = (tmp_path / "card" / "card.md").read_text()
    assert "The gate COMPARED NOTHING" in md
    assert main(["card", "validate", str(tmp_path / "card" / "card.yaml")]) == 0


def test_a_run_directory_missing_parts_names_them_all(cells, tmp_path, capsys):
    """Issue 32, defect 3: a copy of a run without tables/ (and verdicts.csv) gave the
    gate's whole table and exit 1; now every command that loads runs says, in one line,
    which parts are missing: exit 2."""
    bad = tmp_path / "copy"
    shutil.copytree(cells[30]["wrong"], bad)
    shutil.rmtree(bad / "tables")
    (bad / "verdicts.csv").unlink()
    for argv in (["gate", str(cells[30]["base"]), str(bad)],
                 ["card", "--run", str(bad), "--out", str(tmp_path / "card")],
                 ["compare", str(cells[30]["base"]), str(bad), "--names", "a,b", "--out",
                  str(tmp_path / "cmp")]):
        assert main(argv) == 2, argv
        cap = capsys.readouterr()
        lines = cap.err.strip().splitlines()
        assert len(lines) == 1 and cap.out == "", argv
        assert str(bad) in lines[0] and "tables/" in lines[0] and "verdicts.csv" in lines[0]
        assert "records/" not in lines[0].split("(")[0]      # present parts are not named
