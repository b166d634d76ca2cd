"""The neutral blocks a card is laid out in (headings, paragraphs, key-values, lists,
tables, plots, missing-field notices) and :class:`Builder`, which collects them.

:mod:`.layout` decides what a card says, in these blocks; both renderers
(:mod:`.render_md`, :mod:`.render_html`) serialise them. Blocks carry plain text;
each renderer escapes it for its format.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fairness_tests.card.schema import user_fields
from fairness_tests.card.values import ci, num
from fairness_tests.card.values import get_path as _get

GROUPING_ORDER = ("protocol", "scope", "rule", "dataset", "context", "polarity", "group", "slice",
                  "family", "decoding", "temperature", "top_p", "occupation", "context_cue",
                  "metric")


@dataclass
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass
class Para:
    text: str
    style: str = ""    # "", "note", "label", "warn", "summary", "alert" (a banner: incomplete run)


@dataclass
class KV:
    pairs: list[tuple[str, str]]


@dataclass
class Items:
    items: list[str]


@dataclass
class Code:
    text: str


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    status_col: int | None = None   # a column holding pass/fail/... (styled)
    caption: str = ""
    name: str = ""                  # a result table's name (its CSV file beside card.md)
    records: list[dict] = field(default_factory=list)   # its rows as recorded in the card
    fold: bool = True               # a long table may be folded (False: always open)


@dataclass
class Missing:
    field: str
    hint: str = ""
    source: str = "user"


@dataclass
class Plot:
    kind: str                 # a figure of panels (data "panels"; its name), heatmap, histogram
    title: str
    data: dict[str, Any] = field(default_factory=dict)
    note: str = ""            # what the plot draws (scales, bounds), under it


def text(x: Any) -> str:
    """Card text for a value: numbers at fixed precision, lists joined, dicts as k=v."""
    if x is None:
        return ""
    if isinstance(x, (float, int)) and not isinstance(x, bool):
        return num(x)
    if isinstance(x, list):
        return ", ".join(text(v) for v in x)
    if isinstance(x, dict):
        return ", ".join(f"{k}={text(v)}" for k, v in sorted(x.items()))
    return str(x)


def section_titles() -> dict[str, str]:
    return dict(user_fields()["sections"])


class Builder:
    """The blocks of one card, in order, and the card's missing fields by path."""

    def __init__(self, card: dict):
        self.card = card
        self.blocks: list[Any] = []
        self.missing = {m["field"]: m for m in card.get("missing_fields") or []
                        if isinstance(m, dict) and "field" in m}

    def add(self, *blocks):
        self.blocks.extend(blocks)

    def missing_under(self, prefix: str) -> None:
        for f, m in sorted(self.missing.items()):
            if f == prefix or f.startswith(prefix + ".") or f.startswith(prefix + "["):
                self.add(Missing(f, m.get("hint", ""), m.get("source", "user")))

    def items_or_missing(self, label: str, path: str) -> None:
        v = _get(self.card, path)
        if v is None or v == []:
            if path in self.missing:
                self.add(Para(label, "label"))
                self.missing_under(path)
            return
        self.add(Para(label, "label"),
                 Items([text(x) for x in (v if isinstance(v, list) else [v])]))

    def table(self, rows: list[dict], caption: str = "", prefer: list[str] | None = None,
              name: str = "") -> None:
        """A table of record dicts; column order never depends on dict order: preferred,
        known grouping columns, the rest alphabetically, then metric, value, CI, n, note."""
        if not rows:
            return
        cols: list[str] = []
        for r in rows:
            for k in r:
                if k not in cols:
                    cols.append(k)
        has_ci = "ci_low" in cols and "ci_high" in cols
        order = [c for c in [*(prefer or []), *GROUPING_ORDER] if c in cols]
        order = list(dict.fromkeys(order))
        metric_cols = ["metric", "value"] if {"metric", "value"} <= set(cols) else []
        rest = sorted(c for c in cols if c not in order and c not in metric_cols
                      and c not in ("ci_low", "ci_high", "n", "note"))
        head = [c for c in order + rest if c not in metric_cols] + metric_cols
        tail = (["95% CI"] if has_ci else []) + [c for c in ("n", "note") if c in cols]
        out_rows = []
        for r in rows:
            line = [text(r.get(c)) for c in head]
            if has_ci:
                line.append(ci(r.get("ci_low"), r.get("ci_high")))
            line += [text(r.get(c)) for c in ("n", "note") if c in cols]
            out_rows.append(line)
        status_col = (head + tail).index("status") if "status" in head else None
        self.add(Table(head + tail, out_rows, status_col, caption, name, rows))
