"""fairness_tests: a pytest-based fairness regression suite for LLMs.

Data flows one way: benchmarks (what is asked) -> models (backends + response store) ->
records -> metrics (pure functions over tables) -> rules (thresholds as data) -> tests,
snapshots, gate, cards. docs/ARCHITECTURE.md draws the layers.
"""
from fairness_tests.core.version import __version__

__all__ = ["__version__"]
