"""The pytest plugin, run for real in inner pytest sessions (pytester), including
under xdist (-n 2)."""
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from fairness_tests.plugin.session_id import ENV_SESSION
from fairness_tests.run.metadata import RunMetadata, Source
from fairness_tests.run.result import RunResult

pytest_plugins = ["pytester"]
NAN = float("nan")

THRESHOLDS = """
rules:
  - id: acc_floor
    table: bbq
    metric: accuracy
    scope: {polarity: null}
    op: ">="
    bound: 0.6
    compare: ci_low
    rationale: "chance is 1/3; must clearly beat it"
  - id: sdis_bound
    table: bbq
    metric: s_dis
    abs: true
    op: "<="
    bound: 0.1
    rationale: "errors must not follow the stereotype"
drift:
  default: {abs: 1.0e-6}
  accuracy: {abs: 0.01}
  s_dis: {within_ci: true}
benchmark_rules: false          # the whole rule set: only these two rules
"""
OVERRIDE = """
model: "m-xfail"
rules:
  - id: acc_floor
    expected_fail: {reason: "base model, strong preference for option (a)"}
"""

SUITE = """
import pytest

@pytest.mark.bbq
@pytest.mark.fairness_rules(metrics="accuracy")
def test_accuracy_floor(fairness_verdict):
    fairness_verdict.check()

@pytest.mark.bbq
@pytest.mark.fairness_rules(metrics="s_dis")
def test_sdis_bound(fairness_verdict):
    fairness_verdict.check()

@pytest.mark.fairness_tables("bbq")
def test_drift(fairness_table, metric_snapshot):
    fairness_table.check()
    assert metric_snapshot == fairness_table.table

@pytest.mark.gate
def test_gate(fairness_gate_row):
    fairness_gate_row.check()
"""


def bbq_table(acc_ses=(0.70, 0.65, 0.75), acc_gender=(0.62, 0.58, 0.66), s=(-0.05, -0.1, 0.0)):
    rows = [("Race_x_SES", "disambig", "all", "accuracy", *acc_ses, 1440, ""),
            ("Race_x_gender", "disambig", "all", "accuracy", *acc_gender, 2616, ""),
            ("Race_x_SES", "disambig", "all", "s_dis", *s, 900, ""),
            ("Race_x_gender", "disambig", "all", "s_dis", NAN, NAN, NAN, 0,
             "undefined: no non-unknown answer")]
    return pd.DataFrame(rows, columns=["dataset", "context", "polarity", "metric", "value",
                                       "ci_low", "ci_high", "n", "note"])


def save_run(path: Path, model: str, table: pd.DataFrame, records=None) -> Path:
    return RunResult(metadata=meta(model), tables={"bbq": table},
                     records={} if records is None else {"bbq": records}).save(path)


def meta(model):
    return RunMetadata(model=model, backend=None, mode="scored", source=Source(kind="audit"),
                       fairness_tests_version="test")


@pytest.fixture
def project(pytester):
    (pytester.path / "thresholds" / "models").mkdir(parents=True)
    (pytester.path / "thresholds" / "default.yaml").write_text(THRESHOLDS)
    (pytester.path / "thresholds" / "models" / "m-xfail.yaml").write_text(OVERRIDE)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_options_and_markers_are_registered(project):
    r = project.runpytest("--help")
    out = r.stdout.str()
    for opt in ("--fairness-model", "--fairness-backend", "--fairness-replay", "--fairness-live",
                "--fairness-bbq-dir", "--fairness-benchmarks", "--fairness-repeats",
                "--fairness-thresholds", "--fairness-baseline-model", "--fairness-report",
                "--fairness-api-base", "--fairness-n-boot", "--fairness-seed"):
        assert opt in out
    # the generic spellings are gone (they clash with other plugins)
    for gone in ("  --live ", "  --backend", "  --repeats", "  --protocol", "  --replay"):
        assert gone not in out
    r = project.runpytest("--markers")
    for m in ("bbq:", "consistency:", "generative:", "gate:"):
        assert m in r.stdout.str()


def test_verdict_rows_become_readable_tests_with_explanatory_failures(project):
    run = save_run(project.path / "run_m1", "m1", bbq_table())
    r = project.runpytest("--fairness-model", "m1", "--fairness-run", str(run), "-v", "-rs",
                          "-p", "no:cacheprovider", "test_suite.py::test_accuracy_floor",
                          "test_suite.py::test_sdis_bound")
    out = r.stdout.str()
    # ids: model-cell (dataset/context)
    assert "test_accuracy_floor[m1-Race_x_SES/disambig] PASSED" in out
    # gender: ci_low 0.58 < 0.6 -> fails even though the point estimate 0.62 clears it
    assert "test_accuracy_floor[m1-Race_x_gender/disambig] FAILED" in out
    assert "test_sdis_bound[m1-Race_x_SES/disambig] PASSED" in out
    # undefined metric -> skipped with the reason, never passed
    assert "test_sdis_bound[m1-Race_x_gender/disambig] SKIPPED" in out
    assert "no non-unknown answer" in out
    for text in ("acc_floor FAIL for m1, cell Race_x_gender/disambig",
                 "accuracy = 0.62 (95% CI 0.58 .. 0.66)",
                 "threshold: accuracy (ci low of the 95% CI) >= 0.6",
                 "rationale: chance is 1/3; must clearly beat it",
                 "worst cells of this rule: Race_x_gender/disambig 0.62 [0.58, 0.66] (fail)",
                 "default.yaml:3"):
        assert text in out, text
    r.assert_outcomes(passed=2, failed=1, skipped=1)
    assert r.ret == 1


def test_expected_failure_is_strict_xfail_and_an_unexpected_pass_fails(project):
    run = save_run(project.path / "run", "m-xfail", bbq_table())
    r = project.runpytest("--fairness-model", "m-xfail", "--fairness-run", str(run), "-rxX",
                          "-p", "no:cacheprovider", "test_suite.py::test_accuracy_floor")
    out = r.stdout.str()
    # gender fails -> XFAIL with the reason; SES passes -> XPASS(strict) -> FAILED
    assert "XFAIL" in out and "strong preference for option (a)" in out
    assert "[XPASS(strict)] base model, strong preference for option (a)" in out
    r.assert_outcomes(xfailed=1, failed=1)


FAKE_AUDIT = """
import os, sys, time, types
import pandas as pd
from fairness_tests.run.result import RunResult
from fairness_tests.run.metadata import RunMetadata, Source
from fairness_tests.core.errors import MissingResponsesError

calls = os.path.join(os.path.dirname(__file__), "audit_calls.txt")
mod = types.ModuleType("fairness_tests.pipeline.audit")

def run_audit(config, rules=None):
    from fairness_tests.rules.apply import apply_to_run
    model = config.model
    with open(calls, "a") as fh:
        fh.write(model + "\\n")
    if model == "unrecorded":
        raise MissingResponsesError("3 of 3 requests not recorded")
    time.sleep(0.2)          # make concurrent workers overlap
    table = pd.read_csv(os.path.join(os.path.dirname(__file__), model + ".csv"))
    recs = os.path.join(os.path.dirname(__file__), model + "_records.csv")
    records = {"bbq": pd.read_csv(recs)} if os.path.exists(recs) else {}
    run = RunResult(metadata=RunMetadata(model=model, backend=None, mode="replay",
                                         source=Source(kind="audit"),
                                         fairness_tests_version="test"),
                    tables={"bbq": table}, records=records)
    apply_to_run(run, rules)
    return run

mod.run_audit = run_audit
sys.modules["fairness_tests.pipeline.audit"] = mod
"""


def test_xdist_workers_share_one_audit_per_model(project):
    project.makeconftest(FAKE_AUDIT)
    bbq_table().to_csv(project.path / "m1.csv", index=False)
    r = project.runpytest("-n", "2", "--fairness-model", "m1", "-p", "no:cacheprovider",
                          "test_suite.py::test_accuracy_floor", "test_suite.py::test_sdis_bound")
    r.assert_outcomes(passed=2, failed=1, skipped=1)
    calls = (project.path / "audit_calls.txt").read_text().split()
    assert calls == ["m1"]                       # once, although two workers collected
    # ... and the summary says so: made by one worker, read by the other
    made = [ln for ln in r.outlines if ln.startswith("m1: ")]
    assert len(made) == 1 and made[0].startswith("m1: audited once (")
    assert re.search(r"; [1-9]\d* other process(es)? read it$", made[0]), made    # not re-made
    # the session's run cache is removed at the end
    assert not [p for p in (project.path / ".fairness" / "runs").rglob("*") if p.is_file()]


def test_an_in_process_session_gives_the_outer_session_its_id_back(project):
    """A pytest session run inside another (pytester's in-process runs) sets its own
    session id and restores the outer one at its end: the outer session's shared runs
    stay where its processes look for them (regression, issue 24)."""
    outer = os.environ.get(ENV_SESSION)
    r = project.runpytest("-p", "no:cacheprovider", "--collect-only", "-q",
                          "test_suite.py::test_options_and_markers")
    assert r.ret in (0, 4, 5)
    assert os.environ.get(ENV_SESSION) == outer


def test_nothing_to_replay_skips_with_how_to_record_or_fails_on_request(project):
    project.makeconftest(FAKE_AUDIT)
    r = project.runpytest("--fairness-model", "unrecorded", "-rs", "-p", "no:cacheprovider",
                          "test_suite.py::test_accuracy_floor")
    r.assert_outcomes(skipped=1)
    out = r.stdout.str()
    assert "nothing recorded to replay for unrecorded" in out
    assert ("Record with: pytest --pyargs fairness_tests.suite --fairness-live "
            "--fairness-model unrecorded") in out
    r = project.runpytest("--fairness-model", "unrecorded", "--fairness-on-missing", "fail",
                          "-p", "no:cacheprovider", "test_suite.py::test_accuracy_floor")
    r.assert_outcomes(failed=1)


def test_bad_threshold_file_stops_before_any_model_call(project):
    project.makeconftest(FAKE_AUDIT)
    (project.path / "thresholds" / "default.yaml").write_text(
        THRESHOLDS.replace("metric: s_dis", "metric: s_dys"))
    bbq_table().to_csv(project.path / "m1.csv", index=False)
    r = project.runpytest("--fairness-model", "m1", "-p", "no:cacheprovider")
    assert r.ret != 0
    assert "unknown metric 's_dys'" in r.stdout.str() + r.stderr.str()
    assert "default.yaml" in r.stdout.str() + r.stderr.str()
    assert not (project.path / "audit_calls.txt").exists()


@pytest.mark.slow   # two inner xdist sessions (~25 s on 2 shared cores); runs in CI
def test_snapshot_update_under_xdist_then_tolerance_comparison(project):
    project.makeconftest(FAKE_AUDIT)
    models = ["m1", "m2", "m3", "m4"]
    for m in models:
        bbq_table().to_csv(project.path / f"{m}.csv", index=False)
    args = [a for m in models for a in ("--fairness-model", m)]
    r = project.runpytest("-n", "2", *args, "--snapshot-update", "-p", "no:cacheprovider",
                          "test_suite.py::test_drift")
    r.assert_outcomes(passed=4)
    snaps = sorted((project.path / "__snapshots__" / "test_suite").glob("*.txt"))
    assert [p.name for p in snaps] == [f"test_drift[{m}-bbq].txt" for m in models]
    text = snaps[0].read_text()
    assert "Race_x_SES/disambig/all | accuracy | 0.700000 | 0.650000 | 0.750000 | 1440" in text
    assert "Race_x_gender/disambig/all | s_dis | null | null | null | 0 | undefined" in text
    written = {p.name: p.read_text() for p in snaps}
    # one comparison session: m3 and m4 keep the same values (pass without rewriting);
    # m1: accuracy moves by 0.004 (< abs 0.01) and s_dis stays in its old CI [-0.1, 0]: pass
    bbq_table(acc_ses=(0.704, 0.654, 0.754), s=(-0.02, -0.07, 0.03)).to_csv(
        project.path / "m1.csv", index=False)
    # m2: accuracy moves by 0.05 (> 0.01): fail with a readable account
    bbq_table(acc_ses=(0.75, 0.70, 0.80)).to_csv(project.path / "m2.csv", index=False)
    r = project.runpytest("-n", "2", *args, "-p", "no:cacheprovider", "test_suite.py::test_drift")
    r.assert_outcomes(passed=3, failed=1)
    out = r.stdout.str()
    assert "test_drift[m2-bbq]" in out
    assert "Race_x_SES/disambig/all accuracy: 0.700000 -> 0.750000 (tolerance abs 0.01" in out
    assert snaps[0].read_text() == text           # within tolerance: snapshot untouched
    # the same values (m3, m4) and a failure (m2) rewrite nothing either
    assert {p.name: p.read_text() for p in snaps} == written


def test_gate_fails_only_a_real_regression_and_prints_the_table(project):
    project.makeconftest(FAKE_AUDIT)
    n = 400
    def recs(n_correct_disambig):
        # 400 disambiguated items, label 0; answer 0 (correct) for the first k, else 1
        return pd.DataFrame({"dataset": "Race_x_SES", "example_id": range(n),
                             "question_index": [i % 20 for i in range(n)],
                             "context": "disambig", "polarity": "neg", "repeat": 0,
                             "answer": [0 if i < n_correct_disambig else 1 for i in range(n)],
                             "label": 0, "unknown_loc": 2, "target_loc": 1, "group": "g"})
    for m, k in (("base", 300), ("same", 300), ("worse", 240)):
        bbq_table().to_csv(project.path / f"{m}.csv", index=False)
        recs(k).to_csv(project.path / f"{m}_records.csv", index=False)
    r = project.runpytest("--fairness-baseline-model", "base", "--fairness-model", "same",
                          "--fairness-model", "worse", "-p", "no:cacheprovider", "-v",
                          "test_suite.py::test_gate")
    out = r.stdout.str()
    # accuracy 0.75 -> 0.60 on the same 400 items: delta -0.15, fail; same model: no change
    assert "test_gate[worse-vs-base-accuracy-Race_x_SES/disambig] FAILED" in out
    assert "test_gate[same-vs-base-accuracy-Race_x_SES/disambig] PASSED" in out
    assert "fairness gate: candidate worse vs baseline base" in out
    lines = [line for line in out.splitlines() if line.startswith("accuracy") and "-0.150" in line]
    assert lines and "fail" in lines[0]
    assert r.ret == 1


def test_a_thresholds_files_gate_margin_reaches_the_pytest_gate(project):
    """Issue 21 item 5: the plugin's gate judges with the session's rules. A
    --fairness-thresholds file that widens acc_floor's gate margin to 0.3 lets an
    accuracy drop of 0.15 pass (harm mode: a worsening must exceed the margin); before,
    the gate loaded other thresholds and failed it whatever the file said."""
    project.makeconftest(FAKE_AUDIT)
    _gate_records(project, {"base": 300, "worse": 240})
    wide = project.path / "wide.yaml"
    # the gate reads a metric's margin from the rule of its default id
    wide.write_text(THRESHOLDS.replace(
        "  - id: acc_floor\n", "  - id: accuracy_floor_disambig\n").replace(
        "    compare: ci_low\n", "    compare: ci_low\n    gate: {mode: harm, margin: 0.3}\n"))
    assert "margin: 0.3" in wide.read_text() and "accuracy_floor_disambig" in wide.read_text()
    args = ["--fairness-baseline-model", "base", "--fairness-model", "worse",
            "-p", "no:cacheprovider", "-v", "test_suite.py::test_gate"]
    out = project.runpytest(*args, "--fairness-thresholds", str(wide)).stdout.str()
    assert "test_gate[worse-vs-base-accuracy-Race_x_SES/disambig] PASSED" in out
    out = project.runpytest(*args).stdout.str()
    assert "test_gate[worse-vs-base-accuracy-Race_x_SES/disambig] FAILED" in out


def _gate_records(project, models, templates=20):
    n = 400
    for m, k in models.items():
        bbq_table().to_csv(project.path / f"{m}.csv", index=False)
        pd.DataFrame({"dataset": "Race_x_SES", "example_id": range(n), "context": "disambig",
                      "question_index": [i % templates for i in range(n)],
                      "polarity": "neg", "repeat": 0, "rotation": 0,
                      "answer": [0 if i < k else 1 for i in range(n)], "label": 0,
                      "unknown_loc": 2, "target_loc": 1, "group": "g"}).to_csv(
            project.path / f"{m}_records.csv", index=False)


def test_a_gate_that_compared_nothing_is_never_green(project):
    """Issue 32: every item in one template (1 cluster, a paired test needs 2): no
    comparison can be evaluated. Before, every gate test skipped and pytest exited 0;
    now one test says nothing was compared and fails, and a non-inferiority cell (mode
    from the rules) that cannot be evaluated fails: not shown."""
    project.makeconftest(FAKE_AUDIT)
    _gate_records(project, {"base": 300, "worse": 240}, templates=1)
    args = ["--fairness-baseline-model", "base", "--fairness-model", "worse",
            "-p", "no:cacheprovider", "-v", "test_suite.py::test_gate"]
    r = project.runpytest(*args)
    out = r.stdout.str()
    assert "test_gate[worse-vs-base-nothing-compared] FAILED" in out
    assert "test_gate[worse-vs-base-accuracy-Race_x_SES/disambig] SKIPPED" in out
    assert "1 cluster (question_index)" in out and r.ret == 1
    ni = project.path / "ni.yaml"
    ni.write_text(THRESHOLDS.replace(
        "  - id: acc_floor\n", "  - id: accuracy_floor_disambig\n").replace(
        "    compare: ci_low\n",
        "    compare: ci_low\n    gate: {mode: non_inferiority, margin: 0.02}\n"))
    r = project.runpytest(*args, "--fairness-thresholds", str(ni))
    out = r.stdout.str()
    assert "test_gate[worse-vs-base-accuracy-Race_x_SES/disambig] FAILED" in out
    assert "not shown to be no worse" in out and r.ret == 1


def test_a_saved_candidate_run_is_never_served_as_the_baseline(project):
    """Issue 10, defect 5: --fairness-run DIR --fairness-baseline-model B with one
    candidate audited B itself (before, B got the candidate's run: every delta 0)."""
    project.makeconftest(FAKE_AUDIT)
    _gate_records(project, {"base": 300})
    recs = pd.read_csv(project.path / "base_records.csv").assign(
        answer=[0 if i < 240 else 1 for i in range(400)])
    cand = save_run(project.path / "cand_run", "cand", bbq_table(), records=recs)
    r = project.runpytest("--fairness-run", str(cand), "--fairness-baseline-model", "base",
                          "-p", "no:cacheprovider", "-v", "test_suite.py::test_gate")
    out = r.stdout.str()
    assert (project.path / "audit_calls.txt").read_text().split() == ["base"]
    assert "test_gate[cand-vs-base-accuracy-Race_x_SES/disambig] FAILED" in out
    assert r.ret == 1


def test_gate_summary_under_xdist_reuses_the_runs_and_cleans_up(project):
    """Issue 10, defect 6: the summary is built from the workers' runs (no audit runs
    again) and the session's run cache is gone afterwards."""
    project.makeconftest(FAKE_AUDIT)
    _gate_records(project, {"base": 300, "worse": 240})
    r = project.runpytest("-n", "2", "--fairness-baseline-model", "base", "--fairness-model",
                          "worse", "-p", "no:cacheprovider", "test_suite.py::test_gate")
    out = r.stdout.str()
    assert "fairness gate: candidate worse vs baseline base" in out
    calls = (project.path / "audit_calls.txt").read_text().split()
    assert sorted(calls) == ["base", "worse"]            # each audited once in the session
    assert not list((project.path / ".fairness" / "runs").iterdir())


def test_a_bad_thresholds_file_is_one_clean_usage_error(project):
    """Issue 10, defect 10: no pluggy traceback, the CLI's own message."""
    (project.path / "thresholds" / "default.yaml").write_text(
        THRESHOLDS.replace("metric: s_dis", "metric: s_dys"))
    r = project.runpytest("-p", "no:cacheprovider", "-n", "2")
    err = r.stderr.str() + r.stdout.str()
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in err and "pluggy" not in err
    lines = [line for line in err.splitlines() if "s_dys" in line]
    assert lines and lines[0].startswith("ERROR: ") and "default.yaml" in lines[0]


def test_the_report_is_never_a_saved_run_it_reads(project):
    """Issue 32 (outputs apart, the plugin too): --fairness-report naming the run given by
    --fairness-run (or a folder holding it) is one usage error naming both options, and
    the run is untouched."""
    run = save_run(project.path / "run_m1", "m1", bbq_table())
    before = sorted((p.relative_to(run).as_posix(), p.read_bytes() if p.is_file() else b"")
                    for p in run.rglob("*"))
    for report in (run, project.path):
        r = project.runpytest("--fairness-model", "m1", "--fairness-run", str(run),
                              "--fairness-report", str(report), "-p", "no:cacheprovider")
        err = r.stderr.str() + r.stdout.str()
        assert r.ret == pytest.ExitCode.USAGE_ERROR, err
        lines = [x for x in err.splitlines() if x.startswith("ERROR: ")]
        assert len(lines) == 1 and "--fairness-report" in lines[0] \
            and "--fairness-run" in lines[0] and "an input" in lines[0], err
    assert sorted((p.relative_to(run).as_posix(), p.read_bytes() if p.is_file() else b"")
                  for p in run.rglob("*")) == before


def test_ini_keys_set_every_option_and_the_command_line_wins(project):
    """Issue 14 §3: options as ini keys ([tool.pytest.ini_options]); CLI wins."""
    project.makeconftest(FAKE_AUDIT)
    bbq_table().to_csv(project.path / "m1.csv", index=False)
    bbq_table().to_csv(project.path / "m2.csv", index=False)
    project.makeini("[pytest]\nfairness_model = m1\nfairness_on_missing = fail\n")
    r = project.runpytest("-p", "no:cacheprovider", "-v", "test_suite.py::test_accuracy_floor")
    assert "test_accuracy_floor[m1-Race_x_SES/disambig]" in r.stdout.str()
    r = project.runpytest("-p", "no:cacheprovider", "-v", "--fairness-model", "m2",
                          "test_suite.py::test_accuracy_floor")
    assert "test_accuracy_floor[m2-Race_x_SES/disambig]" in r.stdout.str()
    assert "[m1-" not in r.stdout.str()


def test_verdicts_reach_junit_xml_and_the_github_step_summary(project, monkeypatch):
    """Issue 14 §3: value, CI, bound and verdict as JUnit properties; the verdict table
    appended to $GITHUB_STEP_SUMMARY as Markdown."""
    run = save_run(project.path / "run_m1", "m1", bbq_table())
    summary = project.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = project.runpytest("--fairness-run", str(run), "-p", "no:cacheprovider",
                          "--junitxml", "junit.xml", "test_suite.py::test_accuracy_floor")
    r.assert_outcomes(passed=1, failed=1)
    root = ET.parse(project.path / "junit.xml").getroot()
    props = {}
    for case in root.iter("testcase"):
        props[case.get("name")] = {p.get("name"): p.get("value") for p in case.iter("property")}
    gender = props["test_accuracy_floor[m1-Race_x_gender/disambig]"]
    assert gender["fairness_value"] == "0.62" and gender["fairness_ci_low"] == "0.58"
    assert gender["fairness_bound"] == ">= 0.6" and gender["fairness_verdict"] == "fail"
    text = summary.read_text()
    assert "## Fairness verdicts" in text and "| acc_floor | Race_x_gender/disambig |" in text


def test_api_and_statistics_options_reach_the_audit(project):
    """--fairness-rpm/--fairness-tpm, the repeat mode, clusters, ... as options or ini
    keys reach the audit's config (the names of `fairness-tests audit` options)."""
    fake = FAKE_AUDIT.replace(
        'with open(calls, "a") as fh:\n        fh.write(model + "\\n")',
        'import dataclasses, json\n'
        '    with open(calls, "a") as fh:\n        fh.write(model + "\\n")\n'
        '    open(calls + ".json", "w").write(json.dumps(dataclasses.asdict(config)))')
    assert fake != FAKE_AUDIT
    project.makeconftest(fake)
    bbq_table().to_csv(project.path / "m1.csv", index=False)
    project.makeini("[pytest]\nfairness_repeat_mode = logprobs\nfairness_bbq_cluster = item\n")
    project.runpytest("--fairness-model", "m1", "--fairness-rpm", "60", "--fairness-tpm", "9000",
                      "--fairness-max-cost", "2.5", "-p", "no:cacheprovider",
                      "test_suite.py::test_accuracy_floor")
    config = json.loads((project.path / "audit_calls.txt.json").read_text())
    assert (config["repeat_mode"], config["bbq_cluster"]) == ("logprobs", "item")
    assert (config["rpm"], config["tpm"], config["max_cost"]) == (60.0, 9000.0, 2.5)
