"""The explorer of one or more runs: one self-contained HTML file, ``index.html``.

The data (:func:`bundle`: every run's verdicts and records, and for each run after
the first its pairs with the first and the gate's table) is JSON, gzip-compressed
(``mtime`` 0: the same runs give the same bytes) and base64-encoded into the page; the
page's script decompresses it with the browser's ``DecompressionStream`` and renders
one page of items at a time. The script and the style are inline (package data,
``data/explore/``); the page loads nothing (its Content-Security-Policy forbids it).
"""
from __future__ import annotations

import base64
import gzip
import json
from html import escape
from pathlib import Path
from typing import Any, Sequence

from fairness_tests.core.errors import FairnessTestsError
from fairness_tests.core.paths import DATA_DIR
from fairness_tests.core.version import __version__
from fairness_tests.explore.bundle import run_bundle
from fairness_tests.explore.cells import rule_tables
from fairness_tests.explore.pairs import pair_bundle
from fairness_tests.pipeline.gate import gate_runs
from fairness_tests.rules.thresholds import RuleSet

#: the file an explorer is written to, in the folder given
INDEX = "index.html"
ASSETS = DATA_DIR / "explore"
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:; base-uri 'none'; form-action 'none'")


def labels(runs: list) -> list[str]:
    """What the page calls each run: its model id, made unique by its position."""
    names = [r.name for r in runs]
    return [n if names.count(n) == 1 else f"{n} ({i + 1})" for i, n in enumerate(names)]


def bundle(runs: list, rules: Sequence[RuleSet | None], gates: list[Any] | None = None,
           gate_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The explorer's data of ``runs`` (RunResults; the first is the baseline of the
    others), each judged by its ``rules``. ``gates``: each candidate's
    :class:`~fairness_tests.pipeline.gate_report.GateReport` already computed (None:
    computed here with ``gate_options``, the keywords of
    :func:`fairness_tests.pipeline.gate.gate_runs`); a gate that is refused is a note."""
    out: dict[str, Any] = {"version": __version__, "runs": [], "comparisons": []}
    shown = []
    for run, rs, label in zip(runs, rules, labels(runs), strict=True):
        data, views = run_bundle(run, rs, label)
        out["runs"].append(data)
        shown.append(views)
    for i in range(1, len(runs)):
        report, note = (gates[i - 1], "") if gates else _gate(runs[0], runs[i], rules[i],
                                                              gate_options or {})
        comp: dict[str, Any] = {"baseline": 0, "candidate": i, "note": note}
        if report is not None:
            comp.update(pair_bundle(runs[0], shown[0], shown[i], report.table,
                                    rule_tables(rules[i])))
            comp.update(summary=report.summary(), family=report.family,
                        warnings=list(report.warnings), refusals=list(report.refusals))
        out["comparisons"].append(comp)
    return out


def _gate(base, cand, rules: RuleSet | None, options: dict[str, Any]) -> tuple[Any, str]:
    try:
        return gate_runs(base, cand, rules=rules, **options), ""
    except FairnessTestsError as exc:
        return None, f"no gate: {exc}"


def payload(data: dict[str, Any]) -> str:
    """``data`` as JSON, gzip (mtime 0), base64."""
    raw = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return base64.b64encode(gzip.compress(raw.encode("utf-8"), 9, mtime=0)).decode("ascii")


def page(data: dict[str, Any], title: str) -> str:
    """The explorer's HTML: the page, its style, its script and ``data`` embedded."""
    css = (ASSETS / "explore.css").read_text(encoding="utf-8")
    js = (ASSETS / "explore.js").read_text(encoding="utf-8")
    body = (ASSETS / "explore.html").read_text(encoding="utf-8")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>", f"<style>{css}</style>", "</head>", "<body>",
        body.replace("@TITLE@", escape(title)),
        f'<script type="application/octet-stream" id="data">{payload(data)}</script>',
        f"<script>{js}</script>", "</body>", "</html>", ""])


def write_explorer(directory: str | Path, data: dict[str, Any]) -> Path:
    """Write ``index.html`` of ``data`` into ``directory`` (which exists); its path."""
    names = [r["label"] for r in data["runs"]]
    title = "Run explorer \u2014 " + " vs ".join(names)
    path = Path(directory) / INDEX
    path.write_text(page(data, title), encoding="utf-8")
    return path
