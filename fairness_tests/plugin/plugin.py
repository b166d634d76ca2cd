"""pytest plugin for fairness_tests (options, fixtures, verdict-driven tests).

Being built; this placeholder keeps the pytest11 entry point importable."""
