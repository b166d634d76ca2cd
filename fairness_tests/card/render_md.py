"""Render a card (dict) as Markdown for people to read. Deterministic: same card,
same bytes.

The Markdown card holds the summary, the decision rules and verdicts, the numbers
behind every plot (as compact tables) and the method; a result table longer than
:data:`INLINE_ROWS` rows is not inlined but written as a CSV file beside the card
(``tables/<name>.csv``, :func:`markdown_tables`) and linked, which keeps the file
readable (tens of KB, not hundreds). ``card.yaml`` keeps everything; ``card.html``
shows every table.
"""
from __future__ import annotations

import csv
import io
import json

from fairness_tests.card import blocks as L
from fairness_tests.card.layout import build
from fairness_tests.card.values import ci, num

INLINE_ROWS = 12          # longer result tables go to tables/<name>.csv
TABLES_DIR = "tables"

STATUS_MARK = {"pass": "pass", "fail": "**FAIL**", "mixed": "**MIXED**",
               "expected_fail": "expected fail", "not_evaluable": "_not evaluable_"}


def _esc(text: str) -> str:
    """Escape text for a Markdown paragraph or table cell (no raw HTML, no pipes)."""
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\n", " ").replace("*", "\\*").replace("_", "\\_"))


def _code(text: str) -> str:
    t = str(text).replace("\n", " ")
    fence = "``" if "`" in t else "`"
    return f"{fence}{t}{fence}"


def _linked(b) -> bool:
    return isinstance(b, L.Table) and bool(b.name) and len(b.rows) > INLINE_ROWS


def csv_path(b: L.Table) -> str:
    return f"{TABLES_DIR}/{b.name}.csv"


def render_markdown(card: dict) -> str:
    out: list[str] = []
    for block in build(card):
        out.extend(_block(block))
    text = "\n".join(out).rstrip("\n") + "\n"
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text


def _block(b) -> list[str]:
    if isinstance(b, L.Heading):
        return ["#" * b.level + " " + _esc(b.text), ""]
    if isinstance(b, L.Para):
        if b.style == "label":
            return [f"**{_esc(b.text)}**", ""]
        if b.style == "note":
            return [f"_{_esc(b.text)}_", ""]
        if b.style == "warn":
            return [f"> **Note:** {_esc(b.text)}", ""]
        if b.style == "summary":
            return [f"> {_esc(b.text)}", ""]
        if b.style == "alert":
            return [f"> **{_esc(b.text)}**", ""]
        return [_esc(b.text), ""]
    if isinstance(b, L.KV):
        return [f"- **{_esc(k)}:** {_esc(v)}" for k, v in b.pairs] + [""]
    if isinstance(b, L.Items):
        return [f"- {_esc(i)}" for i in b.items] + [""]
    if isinstance(b, L.Code):
        return ["```text", *str(b.text).splitlines(), "```", ""]
    if isinstance(b, L.Missing):
        src = "the run did not record it" if b.source == "run" else "supply it in the user YAML"
        return [f"- **MISSING** `{b.field}` ({src}){': ' + _esc(b.hint) if b.hint else ''}", ""]
    if _linked(b):
        return [f"- Table [{b.name}]({csv_path(b)}): {len(b.rows)} rows, columns "
                f"{_esc(', '.join(b.columns))} (in full in card.html and card.yaml)", ""]
    if isinstance(b, L.Table):
        lines = []
        if b.caption:
            lines += [f"_{_esc(b.caption)}_", ""]
        lines.append("| " + " | ".join(_esc(c) for c in b.columns) + " |")
        lines.append("|" + "---|" * len(b.columns))
        for row in b.rows:
            cells = [_esc(c) for c in row]
            if b.status_col is not None and b.status_col < len(row):
                cells[b.status_col] = STATUS_MARK.get(row[b.status_col], cells[b.status_col])
            lines.append("| " + " | ".join(cells) + " |")
        return lines + [""]
    if isinstance(b, L.Plot):
        note = [f"_{_esc(b.note)}_", ""] if b.note else []
        return [f"_Plot in card.html: {_esc(b.title)}; its numbers:_", "", *_plot_numbers(b), "",
                *note]
    raise TypeError(f"unknown block {b!r}")


def _table_lines(columns: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(_esc(c) for c in columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(_esc(c) for c in r) + " |" for r in rows])


def _plot_numbers(p: L.Plot) -> list[str]:
    """The values a plot draws, as one compact table."""
    d = p.data
    if "panels" in d:
        panels = d.get("panels", [])
        labels = list(dict.fromkeys(pt["label"] for pan in panels for pt in pan["points"]))
        cells = {(pan["metric"], pt["label"]): f"{num(pt.get('value'))} "
                 f"{ci(pt.get('lo'), pt.get('hi'))}".strip()
                 for pan in panels for pt in pan["points"]}
        metrics = [pan["metric"] for pan in panels]
        return _table_lines(["cell", *metrics],
                            [[lab, *(cells.get((m, lab), "") for m in metrics)]
                             for lab in labels])
    if p.kind == "heatmap":
        return _table_lines(["slice", *map(str, d["cols"])],
                            [[str(r), *(num(v) for v in row)]
                             for r, row in zip(d["rows"], d["values"], strict=True)])
    if p.kind == "histogram":
        edges, counts = d["bin_edges"], d["counts"]
        return _table_lines([f"{d.get('metric', '').upper()}% bin", "items"],
                            [[f"{num(edges[i])}-{num(edges[i + 1])}", str(c)]
                             for i, c in enumerate(counts)])
    raise ValueError(f"unknown plot kind {p.kind!r}")


def _csv_value(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.10g}"
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    return str(v)


def markdown_tables(card: dict) -> dict[str, str]:
    """``{tables/<name>.csv: CSV text}`` for every table the Markdown card links: the
    rows as recorded in the card, columns in the order the card shows them."""
    out = {}
    for b in build(card):
        if not _linked(b):
            continue
        keys = list(dict.fromkeys(k for r in b.records for k in r))
        cols = []
        for c in b.columns:
            cols += ["ci_low", "ci_high"] if c == "95% CI" else [c]
        cols = [c for c in cols if c in keys] + sorted(k for k in keys if k not in cols)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in b.records:
            w.writerow([_csv_value(r.get(c)) for c in cols])
        out[csv_path(b)] = buf.getvalue()
    return out
