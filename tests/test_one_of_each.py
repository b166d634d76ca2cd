"""Issue 21, "one of each": one ProtocolChangeError, one table-schema registry."""
from __future__ import annotations

import pytest

from fairness_tests.compare import report as compare_report
from fairness_tests.pipeline.gate import ProtocolChangeError


def test_compare_raises_the_gates_protocol_change_error(monkeypatch):
    """There were two classes: catching the gate's missed compare's."""
    monkeypatch.setattr(compare_report, "protocol_facts",
                        lambda entries: (["bbq items: 8112 vs 2880"], []))
    with pytest.raises(ProtocolChangeError, match="bbq items: 8112 vs 2880"):
        compare_report.build_report([])
