"""Card section 6, the upgrade gate: what ``fairness-tests gate BASELINE CANDIDATE``
decided for the run the card is of (the candidate), with its family of comparisons,
its correction, each cell's mode and margin, raw and Holm-adjusted p-values, and the
smallest worsening each cell detects with 80% power (what this gate cannot see); the
gate's one-line outcome (``summary``: how many comparisons were not evaluated and why)
and the number evaluated (``evaluated``: 0 = the gate compared nothing). A cell that
could not be evaluated is ``not_evaluable`` (harm) or ``fail`` with its note saying it
was not shown (non-inferiority). The runs are named as the gate names them: model id,
else run directory.

Input: the gate's own record (``gate.json``,
:meth:`fairness_tests.pipeline.gate.GateReport.to_dict`), copied by selection; nothing is
recomputed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fairness_tests.core.errors import ConfigError

ROW_KEYS = ("rule", "metric", "cell", "mode", "margin", "baseline", "candidate", "delta",
            "ci_low", "ci_high", "n", "n_clusters", "effective_clusters", "test", "p_value",
            "p_adjusted", "detectable", "verdict", "note")
REQUIRED = ("baseline", "candidate", "alpha", "family", "rows", "detectable")


def load_gate(path: str | Path) -> tuple[str, dict]:
    """(the file read, the gate record) of ``path``: a ``gate.json`` file or the
    directory ``gate --out`` wrote. A missing file, bad JSON or a missing key is a
    ConfigError naming it."""
    p = Path(path)
    if p.is_dir():
        p = p / "gate.json"
    if not p.is_file():
        raise ConfigError("no gate.json here (write one with: fairness-tests gate BASELINE_RUN "
                          "CANDIDATE_RUN --out DIR)", path=str(p))
    try:
        record = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc.msg}", path=str(p), line=exc.lineno) from None
    missing = [k for k in REQUIRED if not isinstance(record, dict) or k not in record]
    if missing:
        raise ConfigError(f"not a gate record: missing {', '.join(missing)}", path=str(p),
                          key=missing[0])
    return str(p), record


def upgrade_gate(record: dict, model: str | None, source: str = "gate record") -> dict[str, Any]:
    """The card's ``upgrade_gate`` from a gate record whose candidate is ``model``."""
    if record["candidate"] != model:
        raise ConfigError(f"the gate's candidate is {record['candidate']!r}, the card is of "
                          f"{model!r}", path=source, key="candidate")
    rows = [{k: r.get(k) for k in ROW_KEYS if r.get(k) is not None} for r in record["rows"]]
    extra = {k: record[k] for k in ("evaluated", "summary") if record.get(k) is not None}
    return {"baseline": str(record.get("baseline_name") or record["baseline"]),
            "candidate": str(record.get("candidate_name") or record["candidate"]),
            **extra,
            "failed": bool(record.get("failed", any(r.get("verdict") == "fail" for r in rows))),
            "alpha": float(record["alpha"]), "family": str(record["family"]),
            "correction": "Holm", "clusters": dict(record.get("clusters") or {}),
            "refusals": [str(x) for x in record.get("refusals") or []],
            "warnings": [str(x) for x in record.get("warnings") or []],
            "cells": rows, "detectable": [str(x) for x in record["detectable"]]}
