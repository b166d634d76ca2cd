"""Every decision rule not claimed by a property test (e.g. one a per-model
thresholds file adds) is still checked here."""
import pytest

from fairness_tests.suite.properties import OTHER


@pytest.mark.fairness_rules(**OTHER)
def test_other_rule(fairness_verdict):
    fairness_verdict.check()
