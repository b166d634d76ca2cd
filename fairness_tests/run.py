"""A run's results: metadata + metric tables + verdicts, saved as a directory.

Layout of a run directory::

    run.json            metadata (model, backend, protocol, seeds, data sha256, ...)
    tables/<name>.csv   one metric table per name (the shape of fairness_tests.stats)
    verdicts.csv        one row per (rule, cell): the decision rules' outcomes
    records/<name>.csv.gz  per-item records (BBQ answers, scored generations) that
                        the model-upgrade gate pairs across runs

Everything downstream of the metrics (pytest plugin, snapshots, the Fairness Card)
reads a :class:`RunResult`; nothing downstream re-computes a metric.
"""
from __future__ import annotations

import gzip
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
    records: dict[str, pd.DataFrame] = field(default_factory=dict)

    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        (d / "tables").mkdir(parents=True, exist_ok=True)
        (d / "run.json").write_text(
            json.dumps(self.metadata, indent=2, sort_keys=True, default=str) + "\n",
            encoding="utf-8")
        for name, table in sorted(self.tables.items()):
            table.to_csv(d / "tables" / f"{name}.csv", index=False, float_format="%.10g")
        self.verdicts.to_csv(d / "verdicts.csv", index=False, float_format="%.10g")
        if self.records:
            (d / "records").mkdir(exist_ok=True)
            for name, table in sorted(self.records.items()):
                # mtime=0 in the gzip header: the same run gives byte-identical files
                with open(d / "records" / f"{name}.csv.gz", "wb") as raw, \
                        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
                    gz.write(table.to_csv(index=False, float_format="%.10g").encode("utf-8"))
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
        records = {
            p.name[: -len(".csv.gz")]: pd.read_csv(p)
            for p in sorted((d / "records").glob("*.csv.gz"))
        }
        return cls(metadata=metadata, tables=tables, verdicts=verdicts, records=records)
