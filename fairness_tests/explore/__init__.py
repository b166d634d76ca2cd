"""The run explorer: a run directory (or a baseline and candidates) as one static page.

- :mod:`.views`: a family's records as shown (its :meth:`~fairness_tests.pipeline.
  benchmark.Family.explore` hook, the rest inferred), each answer's outcome;
- :mod:`.cells`: from a verdict or a gate row to its cell's items;
- :mod:`.bundle`: a run as the page's data; :mod:`.pairs`: two runs' changed answers;
- :mod:`.write`: the page (``index.html``), data embedded compressed.
"""
