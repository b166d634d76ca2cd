"""The model-upgrade gate, end to end through pytest, on the committed recordings:
a candidate with a known regression built into Race_x_gender/disambig (see
tests/gate_testdata.py) fails those gate rows, and only those, and the terminal
table is printed."""
from __future__ import annotations

import pytest
from gate_testdata import BASE, CAND

pytestmark = pytest.mark.slow

pytest_plugins = ["pytester"]


@pytest.fixture
def runs(gate_run_dirs):
    """The baseline and candidate, built once per session (tests/conftest.py)."""
    return gate_run_dirs


def test_gate_fails_only_the_regressed_cell(pytester, runs):
    # 1,308 counter items x accuracy ~0.32 -> ~420 correct answers, half flipped
    assert 150 < runs["n_flipped"] < 270
    pytester.makepyfile(test_g="""
        from fairness_tests.suite.test_gate import *  # noqa: F401,F403
    """)
    res = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--fairness-run", str(runs["base"]), "--fairness-run",
        str(runs["cand"]), "--fairness-baseline-model", BASE, "--fairness-model", CAND, "-rf", "-q")
    out = res.stdout.str()
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert failed, out
    assert all("Race_x_gender/disambig" in line for line in failed), failed
    assert any("accuracy" in line for line in failed)
    assert any("s_dis" in line for line in failed)
    # the terminal table is printed with the candidate's accuracy drop, the family
    # statement and what each cell can detect
    assert "fairness gate" in out and "Race_x_gender/disambig" in out
    assert "Holm" in out and "this gate detects an accuracy drop of at least" in out
    res.assert_outcomes(failed=len(failed), passed=res.parseoutcomes().get("passed", 0))
