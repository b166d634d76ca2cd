"""Decision rules: threshold files (data) -> validated rules -> verdict tables."""
from fairness_tests.rules.evaluate import evaluate, worst_cells  # noqa: F401
from fairness_tests.rules.thresholds import ExpectedFail, Rule, RuleSet, Tolerance, load_rules  # noqa: F401
