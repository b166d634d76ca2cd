"""The fairness property tests (collected by the README's test command).

Each test is parametrized by the plugin from the verdict rows of the decision rules
it selects (``@pytest.mark.fairness_rules``); see docs/pytest.md."""
