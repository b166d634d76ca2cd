"""A run's results: metadata + metric tables + verdicts, saved as a directory.

Layout of a run directory::

    run.json            metadata (model, backend, protocol, seeds, data sha256, ...)
    tables/<name>.csv   one metric table per name (the shape of fairness_tests.stats)
    verdicts.csv        one row per (rule, cell): the decision rules' outcomes

Everything downstream of the metrics (pytest plugin, snapshots, the Fairness Card)
reads a :class:`RunResult`; nothing downstream re-computes a metric.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

VERDICT_COLUMNS = [
    "rule", "metric", "cell", "value", "ci_low", "ci_high", "compared", "op", "bound",
    "status", "rationale", "why",
]
VERDICT_STATUSES = ("pass", "fail", "not_evaluable", "expected_fail")


@dataclass
class RunResult:
    metadata: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    verdicts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=VERDICT_COLUMNS))

    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        (d / "tables").mkdir(parents=True, exist_ok=True)
        (d / "run.json").write_text(
            json.dumps(self.metadata, indent=2, sort_keys=True, default=str) + "\n",
            encoding="utf-8")
        for name, table in sorted(self.tables.items()):
            table.to_csv(d / "tables" / f"{name}.csv", index=False, float_format="%.10g")
        self.verdicts.to_csv(d / "verdicts.csv", index=False, float_format="%.10g")
        return d

    @classmethod
    def load(cls, directory: str | Path) -> "RunResult":
        d = Path(directory)
        meta_path = d / "run.json"
        if not meta_path.exists():
            from .errors import DataError
            raise DataError("not a run directory (no run.json)", path=d)
        metadata = json.loads(meta_path.read_text(encoding="utf-8"))
        tables = {
            p.stem: pd.read_csv(p, keep_default_na=True)
            for p in sorted((d / "tables").glob("*.csv"))
        }
        vpath = d / "verdicts.csv"
        verdicts = pd.read_csv(vpath) if vpath.exists() else pd.DataFrame(columns=VERDICT_COLUMNS)
        return cls(metadata=metadata, tables=tables, verdicts=verdicts)
