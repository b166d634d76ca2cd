"""Generative audit properties: worst-slice stereotype rate per family (and decoding),
refusal gap, slice disparity."""
import pytest

from fairness_tests.suite.properties import PROPERTIES as P

pytestmark = pytest.mark.generative


@pytest.mark.fairness_rules(**P["worst_slice_stereotype"])
def test_worst_slice_stereotype(fairness_verdict):
    fairness_verdict.check()


@pytest.mark.fairness_rules(**P["refusal_gap"])
def test_refusal_gap(fairness_verdict):
    fairness_verdict.check()


@pytest.mark.fairness_rules(**P["slice_disparity"])
def test_slice_disparity(fairness_verdict):
    fairness_verdict.check()
