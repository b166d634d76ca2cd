"""The model-upgrade gate, end to end through pytest, on the committed recordings.

Baseline: the embedded model's replayed run. Candidate: the same run with a known
regression built in — in Race_x_gender disambiguated counter-stereotypical items
(correct answer != target_loc), half of the correct answers are switched to the
stereotyped person (target_loc), seeded. Each switch turns a correct, non-biased answer
into a wrong, biased one, so by construction the candidate is worse exactly there:
accuracy drops and s_DIS rises in Race_x_gender/disambig, and no other cell changes. The gate must fail
those rows, and only those, and print its table.
"""
from __future__ import annotations

import numpy as np
import pytest

from fairness_tests.audit import config_from_options, run_audit
from fairness_tests.metrics.bbq import join_answers

pytestmark = pytest.mark.slow

pytest_plugins = ["pytester"]

BASE = "embedded:gemma-3-270m"
CAND = "embedded:gemma-3-270m-degraded"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("gate")
    base = run_audit(config_from_options(store=str(d / "store.sqlite"),
                                         protocols=["bbq"], n_boot=500))
    base.metadata["model"] = BASE
    rec = base.records["bbq"].copy()
    cell = ((rec["dataset"] == "Race_x_gender") & (rec["context"] == "disambig")
            & (rec["label"] != rec["target_loc"]) & rec["target_loc"].notna()
            & (rec["answer"] == rec["label"]))
    rng = np.random.default_rng(7)
    flip = cell & (rng.random(len(rec)) < 0.5)
    rec.loc[flip, "answer"] = rec.loc[flip, "target_loc"]
    items = rec[["dataset", "example_id", "context", "polarity", "label", "unknown_loc",
                 "target_loc", "group"]]
    cand_rec = join_answers(items, rec[["dataset", "example_id", "repeat", "rotation",
                                        "answer"]])
    from fairness_tests.run import RunResult
    cand = RunResult(metadata={**base.metadata, "model": CAND}, tables=dict(base.tables),
                     verdicts=base.verdicts, records={"bbq": cand_rec})
    a, b = d / "base", d / "cand"
    base.save(a)
    cand.save(b)
    return a, b, int(flip.sum())


def test_gate_fails_only_the_regressed_cell(pytester, runs):
    a, b, n_flipped = runs
    # 1,308 counter items x accuracy ~0.32 -> ~420 correct answers, half flipped
    assert 150 < n_flipped < 270
    pytester.makepyfile(test_g="""
        from fairness_tests.suite.test_gate import *  # noqa: F401,F403
    """)
    res = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--fairness-run", str(a), "--fairness-run", str(b),
        "--baseline-model", BASE, "--fairness-model", CAND, "-rf", "-q")
    out = res.stdout.str()
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert failed, out
    assert all("Race_x_gender/disambig" in line for line in failed), failed
    assert any("accuracy" in line for line in failed)
    assert any("s_dis" in line for line in failed)
    # the terminal table is printed with the candidate's accuracy drop
    assert "fairness gate" in out and "Race_x_gender/disambig" in out
    res.assert_outcomes(failed=len(failed), passed=res.parseoutcomes().get("passed", 0))
