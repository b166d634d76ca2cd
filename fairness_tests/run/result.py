"""A run's results: metadata + metric tables + verdicts, saved as a directory.

Layout of a run directory::

    run.json            typed metadata (:class:`fairness_tests.run.metadata.RunMetadata`)
    tables/<name>.csv   one metric table per name (the shape of fairness_tests.stats.bootstrap)
    verdicts.csv        one row per (rule, cell): the decision rules' outcomes
    records/<name>.csv.gz  per-item records (BBQ answers with their letter
                        probabilities, scored generations): what the model-upgrade gate
                        pairs across runs and what the score commands recompute from

Written by the audit and by the score commands; everything downstream of the
metrics (pytest plugin, snapshots, gate, compare, the Fairness Card) reads a
:class:`RunResult`; nothing downstream re-computes a metric. :meth:`RunResult.save`
replaces the directory atomically: a half-written run never mixes with an old one.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from fairness_tests.core.errors import DataError
from fairness_tests.core.io import output_dir
from fairness_tests.metrics.schema import ID_COLUMNS
from fairness_tests.rules.evaluate import VERDICT_COLUMNS
from fairness_tests.run.metadata import RunMetadata


@dataclass
class RunResult:
    metadata: RunMetadata
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    verdicts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=VERDICT_COLUMNS))
    records: dict[str, pd.DataFrame] = field(default_factory=dict)

    def save(self, directory: str | Path, *, force: bool = False) -> Path:
        """Write the run to ``directory``, replacing an earlier output of this tool
        atomically (:func:`fairness_tests.core.io.output_dir`: written beside it, then
        swapped in whole; a directory holding anyone else's files is refused)."""
        with output_dir(directory, force=force) as tmp:
            self._write(tmp)
        return Path(directory)

    def _write(self, d: Path) -> None:
        (d / "tables").mkdir(parents=True)
        (d / "run.json").write_text(
            json.dumps(self.metadata.to_dict(), indent=2, sort_keys=True, default=str) + "\n",
            encoding="utf-8")
        for name, table in sorted(self.tables.items()):
            table.to_csv(d / "tables" / f"{name}.csv", index=False, float_format="%.10g")
        self.verdicts.to_csv(d / "verdicts.csv", index=False, float_format="%.10g")
        if self.records:
            (d / "records").mkdir()
            for name, table in sorted(self.records.items()):
                # mtime=0 in the gzip header: the same run gives byte-identical files;
                # %.17g: records are data (letter probabilities, scores) that tables are
                # recomputed from, so they round-trip exactly
                with open(d / "records" / f"{name}.csv.gz", "wb") as raw, \
                        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
                    gz.write(table.to_csv(index=False, float_format="%.17g").encode("utf-8"))

    @classmethod
    def load(cls, directory: str | Path) -> "RunResult":
        d = Path(directory)
        meta_path = d / "run.json"
        if not meta_path.exists():
            raise DataError("not a run directory (no run.json)", path=d)
        try:
            raw = json.loads(meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON ({exc.msg})", path=meta_path, line=exc.lineno) from None
        metadata = RunMetadata.from_dict(raw, path=meta_path)
        tables = {p.stem: _read_table(p) for p in sorted((d / "tables").glob("*.csv"))}
        vpath = d / "verdicts.csv"
        verdicts = pd.read_csv(vpath) if vpath.exists() else pd.DataFrame(columns=VERDICT_COLUMNS)
        records = {
            p.name[: -len(".csv.gz")]: pd.read_csv(p)
            for p in sorted((d / "records").glob("*.csv.gz"))
        }
        return cls(metadata=metadata, tables=tables, verdicts=verdicts, records=records)


def _read_table(path: Path) -> pd.DataFrame:
    """A saved table with its cell-id columns as text, as the builders made them; a table
    saved without columns (an empty one, e.g. no protocol spread with one family and one
    decoding) reads back empty."""
    if not path.read_text(encoding="utf-8").strip():
        return pd.DataFrame()
    head = pd.read_csv(path, nrows=0).columns
    return pd.read_csv(path, dtype={c: str for c in ID_COLUMNS if c in head})
