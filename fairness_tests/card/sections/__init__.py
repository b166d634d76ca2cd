"""The sections of a Fairness Card, one module each, filled from a run's typed metadata
(:class:`fairness_tests.run.metadata.RunMetadata`), tables and verdicts:

- :mod:`.facts`: what every section reads (:class:`RunFacts`) and the run facts it lacks;
- :mod:`.identification`: section 1 (generator, evaluation date, system, served-system addendum);
- :mod:`.attributes`: section 4 (protected attributes and slices);
- :mod:`.protocol`: section 5 (prompt suite, decoding, refusal handling, scorer, evaluation
  protocol), with :mod:`.asking` (how the model was asked: requests, failures, letter mass,
  cost);
- :mod:`.results`: section 6 (metrics, decision rules, verdicts, results);
- :mod:`.reproducibility`: section 8's reproducibility facts.

The entry point is :func:`fairness_tests.card.fill.fill_card`.
"""
