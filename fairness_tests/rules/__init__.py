"""Decision rules: threshold files (data) -> validated rules -> verdict tables."""
from .evaluate import evaluate, worst_cells  # noqa: F401
from .thresholds import ExpectedFail, Rule, RuleSet, Tolerance, load_rules  # noqa: F401
