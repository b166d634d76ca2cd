"""Model-upgrade gate: with --baseline-model X --fairness-model Y, fails only where Y
is worse than X beyond the margin with paired statistical support."""
import pytest

pytestmark = pytest.mark.gate


def test_gate(fairness_gate_row):
    fairness_gate_row.check()
