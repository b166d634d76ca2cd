"""The generative audit's tables, declared (light: no pandas): its metric names, its
slice views, its resampling units and the schema of every table it adds to a run
(registered by :mod:`fairness_tests.benchmarks.generative` when it is imported,
:func:`fairness_tests.metrics.schema.register_table`)."""
from __future__ import annotations

from typing import Literal, get_args

from fairness_tests.metrics.schema import Table

#: the generative tables' bootstrap unit: the prompt (frame x slice) or the row
GenerativeCluster = Literal["prompt", "row"]
GENERATIVE_CLUSTERS: tuple[GenerativeCluster, ...] = get_args(GenerativeCluster)

#: per-slice shares of generations (rates) and means of scores
GENERATIVE_RATE_METRICS = ["refusal", "deflection", "religion_mention", "title_mention",
                           "identity_salience", "stereotype", "demeaning", "pilot_harm"]
GENERATIVE_MEAN_METRICS = ["positive_professional", "caution", "word_len"]
GENERATIVE_METRICS = GENERATIVE_RATE_METRICS + GENERATIVE_MEAN_METRICS
#: a generative slice table's metrics: every measured one, and the share of failed rows
GENERATIVE_TABLE_METRICS = frozenset({*GENERATIVE_METRICS, "error"})

#: the generative slice tables: name -> grouping columns in front of ``slice``
VIEWS: dict[str, tuple[str, ...]] = {
    "generative_by_slice": (),
    "generative_by_slice_family": ("family",),
    "generative_by_slice_decoding": ("decoding",),
    "generative_by_slice_occupation": ("occupation",),
    "generative_by_slice_family_decoding": ("family", "decoding"),
}
#: the per-slice metrics in every protocol cell (``cell_kind, cell``), and per seed
PROTOCOL_TABLE = "generative_cells"
SEED_TABLE = "generative_seed_cells"
SUMMARY_TABLE = "generative_summary"

#: name -> (schema, the fixed values of its grouping columns)
TABLES: dict[str, tuple[Table, dict[str, tuple[str, ...]]]] = {
    **{name: (Table((*by, "slice"), GENERATIVE_TABLE_METRICS), {}) for name, by in VIEWS.items()},
    PROTOCOL_TABLE: (Table(("cell_kind", "cell", "slice"), GENERATIVE_TABLE_METRICS), {}),
    SUMMARY_TABLE: (Table(("scope", "family", "slice"),
                          frozenset({f"worst_slice_{m}" for m in GENERATIVE_METRICS}
                                    | {f"disparity_{m}" for m in GENERATIVE_METRICS}
                                    | {"refusal_gap"})),
                    {"scope": ("overall", "family")}),
    # several scorers of the same generations (--scorers): rules can scope by scorer
    "generative_scorers": (Table(("scorer", "slice"), GENERATIVE_TABLE_METRICS), {}),
    "generative_scorer_cells": (Table(("scorer", "cell_kind", "cell", "slice"),
                                      GENERATIVE_TABLE_METRICS), {}),
    "scorer_agreement": (Table(("scorer_a", "scorer_b", "label", "slice"),
                               frozenset({"raw_agreement", "kappa"})), {}),
}
#: the tables only a run with several scorers (``--scorers a,b,...``) has
SCORER_TABLES = ("generative_scorers", "generative_scorer_cells", "scorer_agreement")
