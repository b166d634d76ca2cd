"""A syrupy extension for metric tables: human-readable, diff-friendly, and
compared with per-metric tolerances instead of exact float equality.

File format (one file per test, ``__snapshots__/<test file>/<test name>[<id>].txt``)::

    # fairness_tests metric table v1; cell = dataset/context/polarity
    # cell | metric | value | ci_low | ci_high | n | note
    Race_x_SES/ambig/all | accuracy | 0.412300 | 0.380000 | 0.440000 | 1440 |

One row per line, sorted by (cell, metric); floats with 6 decimals; ``UB`` for
+inf, ``null`` for undefined. A changed metric is one changed line in a diff.

Matching: the same (cell, metric) lines and the same ``n``; each value within its
metric's tolerance (``RuleSet.tolerance``: ``|new - old| <= max(abs, rel * |old|)``,
or with ``within_ci`` the new value inside the old CI); CI bounds within the same
abs/rel tolerance (not compared under ``within_ci``). undefined == undefined, UB == UB.

xdist: one file per test, written when its test runs (``write_immediately``), so
parallel ``--snapshot-update`` runs never write the same file and lose nothing.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from fairness_tests.core.fmt import shown
from fairness_tests.rules.thresholds import Tolerance
from fairness_tests.stats.bootstrap import METRIC_COLUMNS, cell_id

HEADER = "# fairness_tests metric table v1"
SEP = " | "


def _num(x: Any) -> str:
    return shown(x, ".6f", undefined="null")


def _parse_num(s: str) -> float:
    s = s.strip()
    return {"null": math.nan, "UB": math.inf, "-UB": -math.inf}[s] if s in (
        "null", "UB", "-UB") else float(s)


def render_table(table: pd.DataFrame) -> str:
    """The snapshot text of a metric table."""
    cols = [c for c in table.columns if c not in METRIC_COLUMNS]
    lines = []
    for _, r in table.iterrows():
        cell = cell_id(*[("" if (isinstance(r[c], float) and math.isnan(r[c])) else r[c])
                         for c in cols]) or "all"
        n = r.get("n", math.nan)
        n_txt = "null" if n is None or (isinstance(n, float) and math.isnan(n)) else str(int(n))
        note = str(r.get("note", "") if pd.notna(r.get("note", "")) else "")
        note = note.replace("\n", " ").strip()
        lines.append(SEP.join([cell, str(r["metric"]), _num(r["value"]), _num(r["ci_low"]),
                               _num(r["ci_high"]), n_txt, note]).rstrip())
    lines.sort()
    head = [f"{HEADER}; cell = {'/'.join(cols) or 'all'}",
            "# cell | metric | value | ci_low | ci_high | n | note"]
    return "\n".join(head + lines) + "\n"


def parse_table(text: str) -> dict[tuple[str, str], tuple[float, float, float, str]]:
    out = {}
    for line in str(text).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(SEP.strip(), 6)
        parts = [p.strip() for p in parts] + [""] * (7 - len(parts))
        cell, metric, v, lo, hi, n, _ = parts
        out[(cell, metric)] = (_parse_num(v), _parse_num(lo), _parse_num(hi), n)
    return out


def _close(new: float, old: float, tol: Tolerance) -> bool:
    if math.isnan(new) or math.isnan(old):
        return math.isnan(new) and math.isnan(old)
    if math.isinf(new) or math.isinf(old):
        return new == old
    return abs(new - old) <= max(tol.abs, tol.rel * abs(old)) + 1e-12


def compare(received: str, stored: str, tolerance: Callable[[str], Tolerance]) -> list[str]:
    """The differences beyond tolerance, one readable line each (empty = match)."""
    new, old = parse_table(received), parse_table(stored)
    problems = []
    for k in sorted(set(old) - set(new)):
        problems.append(f"{k[0]} {k[1]}: missing (was in the snapshot)")
    for k in sorted(set(new) - set(old)):
        problems.append(f"{k[0]} {k[1]}: new (not in the snapshot)")
    for k in sorted(set(new) & set(old)):
        (v, lo, hi, n), (ov, olo, ohi, on) = new[k], old[k]
        tol = tolerance(k[1])
        where = f"{k[0]} {k[1]}"
        if n != on:
            problems.append(f"{where}: n {on} -> {n}")
        if tol.within_ci and not (math.isnan(v) or math.isnan(olo) or math.isnan(ohi)):
            ok = olo - 1e-12 <= v <= ohi + 1e-12
            if not ok:
                problems.append(f"{where}: {_num(ov)} -> {_num(v)}, outside the snapshot's 95% "
                                f"CI [{_num(olo)}, {_num(ohi)}]")
            continue
        if not _close(v, ov, tol):
            problems.append(f"{where}: {_num(ov)} -> {_num(v)} (tolerance abs {tol.abs:g}, "
                            f"rel {tol.rel:g})")
        elif not (_close(lo, olo, tol) and _close(hi, ohi, tol)):
            problems.append(f"{where}: CI [{_num(olo)}, {_num(ohi)}] -> [{_num(lo)}, {_num(hi)}]")
    return problems


class MetricTableExtension(SingleFileSnapshotExtension):
    """Use through the ``metric_snapshot`` fixture (which sets the tolerances)."""
    file_extension = "txt"
    _write_mode = WriteMode.TEXT
    tolerance: Callable[[str], Tolerance] = staticmethod(lambda metric: Tolerance(abs=1e-9))

    def serialize(self, data, *, exclude=None, include=None, matcher=None) -> str:
        if isinstance(data, pd.DataFrame):
            return render_table(data)
        return str(data)

    def matches(self, *, serialized_data, snapshot_data) -> bool:
        if snapshot_data is None:
            return False
        if not str(snapshot_data).startswith(HEADER):
            return serialized_data == snapshot_data
        return not compare(str(serialized_data), str(snapshot_data), type(self).tolerance)

    def diff_lines(self, serialized_data, snapshot_data) -> Iterator[str]:
        if str(snapshot_data).startswith(HEADER):
            problems = compare(str(serialized_data), str(snapshot_data), type(self).tolerance)
            if problems:
                yield f"beyond tolerance ({len(problems)}):"
                yield from (f"  {p}" for p in problems[:20])
                if len(problems) > 20:
                    yield f"  ... and {len(problems) - 20} more"
                yield "full diff (- snapshot, + received):"
        yield from super().diff_lines(serialized_data, snapshot_data)


def extension_with(tolerance: Callable[[str], Tolerance]) -> type[MetricTableExtension]:
    """A MetricTableExtension subclass bound to a tolerance lookup."""
    return type("BoundMetricTableExtension", (MetricTableExtension,),
                {"tolerance": staticmethod(tolerance)})


def stored_ids(test: Any) -> list[str]:
    """The ids of a parametrized test's stored snapshots (``test``: its pytest node,
    e.g. the ``FunctionDefinition`` being parametrized), read from the file names syrupy
    gives them: ``__snapshots__/<test file>/<test name>[<id>].txt``; the test name is
    ``Class.method`` in a class, as syrupy names it."""
    path = Path(test.path)
    folder = path.parent / MetricTableExtension.snapshot_dirname / path.stem
    name = ".".join(str(test.nodeid).split("::")[1:])
    head, tail = f"{name}[", f"].{MetricTableExtension.file_extension}"
    if not folder.is_dir():
        return []
    return sorted(p.name[len(head):-len(tail)] for p in folder.iterdir()
                  if p.name.startswith(head) and p.name.endswith(tail))
