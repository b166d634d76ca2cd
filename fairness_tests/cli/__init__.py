"""The fairness-tests command line."""
