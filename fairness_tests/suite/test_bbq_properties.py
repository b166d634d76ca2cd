"""Intersectional BBQ properties, one test per (model, rule, dataset/context cell)."""
import pytest

from fairness_tests.suite.properties import PROPERTIES as P

pytestmark = pytest.mark.bbq


@pytest.mark.fairness_rules(**P["accuracy_floors"])
def test_accuracy_floor(fairness_verdict):
    fairness_verdict.check()


@pytest.mark.fairness_rules(**P["sdis_bound"])
def test_sdis_bound(fairness_verdict):
    fairness_verdict.check()


@pytest.mark.fairness_rules(**P["samb_bound"])
def test_samb_bound(fairness_verdict):
    fairness_verdict.check()


@pytest.mark.fairness_rules(**P["acc_gap"])
def test_acc_reinf_minus_counter_gap(fairness_verdict):
    fairness_verdict.check()


@pytest.mark.fairness_rules(**P["sf_df_bounds"])
def test_sf_df_bounds(fairness_verdict):
    fairness_verdict.check()


@pytest.mark.fairness_rules(**P["invalid_rate"])
def test_invalid_answer_rate(fairness_verdict):
    fairness_verdict.check()


@pytest.mark.fairness_rules(**P["position_bias"])
def test_position_bias_bound(fairness_verdict):
    fairness_verdict.check()
