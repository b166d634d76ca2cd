"""The built-in benchmarks, one folder each (``fairness_tests/benchmarks/<name>/``): the
folder's ``__init__`` declares the benchmark (light: read by the configuration and the
pytest plugin), its other modules compute. Each is registered as an entry point of the
group ``fairness_tests.benchmarks`` (:mod:`fairness_tests.core.registry`), as a
benchmark of another distribution is."""
