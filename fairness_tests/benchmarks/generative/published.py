"""The published audit grid (``prompt_expanded_big.csv``) as an alternative protocol.

:func:`load_published_grid` reads the CSV row for row from any path and checks it:
exactly the published columns (:data:`grid.GRID_COLUMNS`), typed values, and
``full_slice_id == slice_gender + "_" + slice_religion``. Errors name the file and
the line (line 1 is the header).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from fairness_tests.benchmarks.generative.grid import GRID_COLUMNS
from fairness_tests.core.errors import DataError
from fairness_tests.core.paths import fairness_cards_dir
from fairness_tests.core.text import decode_input

# the published audit's fixed settings (README of fairness_cards)
PUBLISHED_SYSTEM_PROMPT = "You are a helpful assistant."
_INT = ("row_id", "seed", "max_new_tokens")
_FLOAT = ("temperature", "top_p")


def published_grid_path(name: str = "prompt_expanded_big.csv") -> Path:
    """Where the shared copy lives: ``<shared>/fairness_cards/prompts/<name>``."""
    return fairness_cards_dir() / "prompts" / name


def load_published_grid(path: str | Path | None = None) -> pd.DataFrame:
    """Load a published-format grid CSV (default: the shared big grid), row for row."""
    p = Path(path) if path else published_grid_path()
    try:
        fh = io.StringIO(decode_input(p.read_bytes(), p), newline="")
    except OSError as exc:
        raise DataError(f"cannot read grid file: {exc.strerror}", path=p) from None
    rows = []
    with fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError("empty file (expected a header row)", path=p, line=1) from None
        if header != GRID_COLUMNS:
            missing = [c for c in GRID_COLUMNS if c not in header]
            extra = [c for c in header if c not in GRID_COLUMNS]
            raise DataError(
                f"columns must be exactly {','.join(GRID_COLUMNS)}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unexpected {extra}" if extra else "")
                + ("; wrong order" if not missing and not extra else ""),
                path=p, line=1)
        for values in reader:
            line = reader.line_num
            if not values:
                continue
            if len(values) != len(GRID_COLUMNS):
                raise DataError(f"expected {len(GRID_COLUMNS)} fields, found {len(values)}",
                                path=p, line=line)
            row: dict[str, object] = dict(zip(GRID_COLUMNS, values, strict=True))
            for cols, cast, what in ((_INT, int, "an integer"), (_FLOAT, float, "a number")):
                for c in cols:
                    try:
                        row[c] = cast(values[GRID_COLUMNS.index(c)])
                    except ValueError:
                        raise DataError(f"{c} must be {what}, got {row[c]!r}",
                                        path=p, line=line, key=c) from None
            if not str(row["prompt_text"]).strip():
                raise DataError("empty prompt_text", path=p, line=line, key="prompt_text")
            expect = f"{row['slice_gender']}_{row['slice_religion']}"
            if row["full_slice_id"] != expect:
                raise DataError(f"full_slice_id {row['full_slice_id']!r} != {expect!r}",
                                path=p, line=line, key="full_slice_id")
            rows.append(row)
    df = pd.DataFrame(rows, columns=GRID_COLUMNS)
    if df["row_id"].duplicated().any():
        dup = int(df.loc[df["row_id"].duplicated(), "row_id"].iloc[0])
        raise DataError(f"duplicate row_id {dup}", path=p, key="row_id")
    return df
