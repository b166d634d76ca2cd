"""The seeded stratified consistency sample (issue 2, section 6).

448 items: for each dataset x context x polarity cell (2 x 2 x 2 = 8 cells),
``per_cell`` = 56 items drawn without replacement, so 112 per dataset x context
and 224 per dataset. Cell c (in sorted dataset, context, polarity order) draws with
``numpy.random.default_rng([seed, c])`` from its items sorted by example_id, so the
sample depends only on the items and the seed. The sample is returned sorted by
dataset and example_id; :func:`sample_record` is what a run records.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fairness_tests.core.errors import DataError

CELL = ["dataset", "context", "polarity"]
DEFAULT_PER_CELL = 56


def consistency_sample(items: pd.DataFrame, per_cell: int = DEFAULT_PER_CELL,
                       seed: int = 0) -> pd.DataFrame:
    """``per_cell`` items from every dataset x context x polarity cell of ``items``."""
    parts = []
    for c, (key, g) in enumerate(items.groupby(CELL, sort=True)):
        if len(g) < per_cell:
            raise DataError(f"cell {'/'.join(map(str, key))} has {len(g)} items, fewer than the "
                            f"{per_cell} the consistency sample needs")
        g = g.sort_values("example_id", kind="stable")
        rng = np.random.default_rng([seed, c])
        pick = np.sort(rng.choice(len(g), size=per_cell, replace=False))
        parts.append(g.iloc[pick])
    if not parts:
        raise DataError("no items to sample from")
    return pd.concat(parts).sort_values(["dataset", "example_id"]).reset_index(drop=True)


def sample_record(sample: pd.DataFrame, seed: int, per_cell: int = DEFAULT_PER_CELL) -> dict:
    """What a run records about its sample: seed, size per cell and the item ids."""
    return {"seed": seed, "per_cell": per_cell, "n_items": int(len(sample)),
            "example_ids": {ds: [int(x) for x in g["example_id"]]
                            for ds, g in sample.groupby("dataset", sort=True)}}
