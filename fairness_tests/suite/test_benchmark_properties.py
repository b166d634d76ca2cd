"""Each registered benchmark's own property tests (``Benchmark.properties``: ``{test
name: rule selector}``), one test function per property, carrying the benchmark's
marker, parametrized by the plugin from the verdict rows its selector picks: a
benchmark of another distribution gets its tests here with no line of the suite
changed."""
from __future__ import annotations

from typing import Any

import pytest

from fairness_tests.suite.properties import benchmark_properties


def _property_test(name: str, marker: str | None, selector: dict[str, Any]):
    def test(fairness_verdict):
        fairness_verdict.check()
    test.__name__ = test.__qualname__ = name
    test.__doc__ = f"{name}: the decision rules {selector} select, one test per cell."
    test = pytest.mark.fairness_rules(**selector)(test)
    return getattr(pytest.mark, marker)(test) if marker else test


for _name, (_marker, _selector) in benchmark_properties().items():
    globals()[_name] = _property_test(_name, _marker, _selector)
