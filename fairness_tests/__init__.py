"""fairness_tests: a pytest-based fairness regression suite for LLMs.

Data flows one way:
protocols (what is asked) -> models (backends + response store) -> metrics (pure
functions over tables) -> rules (thresholds) -> plugin / card (tests, snapshots, cards).
"""
__version__ = "0.2.0"        # the one place the version is written (pyproject reads it)
