"""Statistics: bootstrap, intervals, significance tests, permutation tests, distributions."""
