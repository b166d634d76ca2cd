"""A run's results: metadata + metric tables + verdicts, saved as a directory.

Layout of a run directory::

    run.json            typed metadata (:class:`fairness_tests.run.metadata.RunMetadata`)
    tables/<name>.csv   one metric table per name (the shape of fairness_tests.stats.bootstrap)
    verdicts.csv        one row per (rule, cell): the decision rules' outcomes
    records/<name>.csv.gz  per-item records (BBQ answers with their letter
                        probabilities, scored generations): what the model-upgrade gate
                        pairs across runs and what the score commands recompute from

A run directory missing any of these parts (``records/<name>.csv.gz`` for each protocol
its ``run.json`` declares: ``bbq`` -> ``bbq``, ``generative`` -> ``generative``,
``counterfactual`` -> ``probe``) is refused by :meth:`RunResult.load` with one error
naming the directory and every missing part (:func:`missing_parts`): a copy that lost a
folder is bad input, never a run with nothing in it. The card reads no records
(``load(..., need_records=False)``); the gate, ``compare`` and the pytest plugin need them.

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
from fairness_tests.core.registry import load_all
from fairness_tests.metrics.schema import ID_COLUMNS, registered
from fairness_tests.rules.evaluate import VERDICT_COLUMNS
from fairness_tests.run.metadata import RunMetadata


@dataclass
class RunResult:
    metadata: RunMetadata
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    verdicts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=VERDICT_COLUMNS))
    records: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: the directory :meth:`load` read (as given), None for a run built in memory
    source: Path | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        """What reports call this run: its model id, else the directory it was read from."""
        if self.metadata.model:
            return str(self.metadata.model)
        return str(self.source) if self.source is not None else "an unnamed run"

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
    def load(cls, directory: str | Path, *, need_records: bool = True) -> "RunResult":
        """Read a run directory; one DataError naming it and every missing part
        (:func:`missing_parts`) when it is not whole. ``need_records=False``: for a reader
        that uses no per-item records (the card), their files are not required."""
        d = Path(directory)
        meta_path = d / "run.json"
        if not meta_path.exists():
            others = missing_parts(d, None)[1:]
            also = f"; also missing {', '.join(others)}" if others else ""
            raise DataError(f"not a run directory (no run.json){also}", path=d)
        try:
            raw = json.loads(meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON ({exc.msg})", path=meta_path, line=exc.lineno) from None
        metadata = RunMetadata.from_dict(raw, path=meta_path)
        missing = missing_parts(d, metadata if need_records else None)
        if missing:
            raise DataError(f"incomplete run directory: missing {', '.join(missing)} (a run "
                            "written by audit, bbq score or generative score --out holds "
                            f"{', '.join(expected_parts(metadata))}; copy the run whole or "
                            "write it again)", path=d)
        tables = {p.stem: _read_table(p) for p in sorted((d / "tables").glob("*.csv"))}
        verdicts = pd.read_csv(d / "verdicts.csv")
        records = {
            p.name[: -len(".csv.gz")]: pd.read_csv(p)
            for p in sorted((d / "records").glob("*.csv.gz"))
        }
        return cls(metadata=metadata, tables=tables, verdicts=verdicts, records=records,
                   source=d)


def records_of() -> dict[str, str]:
    """``{run.json key: records name}`` of every registered benchmark family: a run whose
    metadata holds the family's info writes ``records/<name>.csv.gz``."""
    return {b.family.metadata_key: b.family.records for b in load_all()}


def expected_parts(metadata: RunMetadata | None) -> list[str]:
    """Every part :meth:`RunResult.save` writes for a run with ``metadata`` (None: the
    parts every run has): run.json, tables/, verdicts.csv, and records/<name>.csv.gz
    per protocol the metadata declares."""
    parts = ["run.json", "tables/", "verdicts.csv"]
    if metadata is not None:
        parts += [f"records/{name}.csv.gz" for key, name in records_of().items()
                  if metadata.infos.get(key) is not None]
    return parts


def missing_parts(d: Path, metadata: RunMetadata | None) -> list[str]:
    """The parts of :func:`expected_parts` absent from ``d`` (a directory for a name
    ending in ``/``, a file otherwise)."""
    def present(part: str) -> bool:
        p = d / part.rstrip("/")
        return p.is_dir() if part.endswith("/") else p.is_file()
    return [part for part in expected_parts(metadata) if not present(part)]


def _read_table(path: Path) -> pd.DataFrame:
    """A saved table with its cell-id columns as text, as the builders made them; a table
    saved without columns (an empty one, e.g. no protocol spread with one family and one
    decoding) reads back empty."""
    if not path.read_text(encoding="utf-8").strip():
        return pd.DataFrame()
    head = pd.read_csv(path, nrows=0).columns
    registered()                          # every benchmark's cell-id columns known
    return pd.read_csv(path, dtype={c: str for c in ID_COLUMNS if c in head})
