"""Consistency over repeated runs: MFAA and GTC floors per dataset/context."""
import pytest

from fairness_tests.suite.properties import PROPERTIES as P

pytestmark = pytest.mark.consistency


@pytest.mark.fairness_rules(**P["mfaa_floor"])
def test_mfaa_floor(fairness_verdict):
    fairness_verdict.check()


@pytest.mark.fairness_rules(**P["gtc_floor"])
def test_gtc_floor(fairness_verdict):
    fairness_verdict.check()
