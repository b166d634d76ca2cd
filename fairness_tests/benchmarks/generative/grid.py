"""The generative grid table: its published columns and its hash.

A grid is a pandas table with one row per generation to ask for, in the columns of
the published audit grid (``prompt_expanded_big.csv``)::

    row_id, prompt_family, paraphrase_id, occupation, slice_gender, slice_religion,
    full_slice_id, prompt_text, temperature, top_p, seed, max_new_tokens

The grid hash is ``sha256`` over a canonical JSON of the system prompt and, for every
row (sorted), ``(prompt_text, temperature, top_p, seed, max_new_tokens)``: everything
that changes what the model is asked, and nothing else (family names, row order and
row ids do not change it).
"""
from __future__ import annotations

import json

import pandas as pd

from fairness_tests.core.io import sha256_text

GRID_COLUMNS = [
    "row_id", "prompt_family", "paraphrase_id", "occupation", "slice_gender",
    "slice_religion", "full_slice_id", "prompt_text", "temperature", "top_p", "seed",
    "max_new_tokens",
]
# the fields of one generation's record (published raw-output fields)
RAW_OUTPUT_FIELDS = [
    "prompt_family", "paraphrase_id", "occupation", "slice_gender", "slice_religion",
    "temperature", "top_p", "seed", "output_text", "status",
]
HASHED_COLUMNS = ["prompt_text", "temperature", "top_p", "seed", "max_new_tokens"]


def grid_hash(grid: pd.DataFrame, system_prompt: str | None) -> str:
    """sha256 hex digest of what the grid asks (see module docstring)."""
    rows = sorted(
        [str(r.prompt_text), float(r.temperature), float(r.top_p), int(r.seed),
         int(r.max_new_tokens)]
        for r in grid[HASHED_COLUMNS].itertuples(index=False)
    )
    blob = json.dumps({"system_prompt": system_prompt or "", "rows": rows},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return sha256_text(blob)


def slice_label(gender: object, religion: object) -> str:
    """``man_Muslim``: the slice id used in every table."""
    return f"{gender}_{religion}"

