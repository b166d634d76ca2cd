"""Write a :class:`~fairness_tests.compare.report.CompareReport` as ``compare.md``,
a self-contained ``compare.html`` (inline CSS and SVG, no script, a
Content-Security-Policy that loads nothing) and ``compare.csv`` (the long table).

Deterministic: the same runs give the same bytes (numbers at fixed precision, rows in
a fixed order, no date or path of this machine).
"""
from __future__ import annotations

from html import escape
from pathlib import Path

import pandas as pd

from fairness_tests.card.render_html import CSP, CSS
from fairness_tests.compare.figures import draw
from fairness_tests.compare.tables import LONG_COLUMNS, Display, fmt_ci, long_frame
from fairness_tests.pipeline.views import Estimate

UNSTATED = ("Protocol facts not every run states (a run scored from someone's predictions "
            "or generations does not know, e.g., their decoding): not differences")
LONG_TABLE = 60     # longer tables are folded in a <details> element (no script needed)
EXTRA_CSS = """
table.compare td:first-child{font-weight:600;white-space:nowrap}
table.compare td{white-space:nowrap}
ul.differences li{color:var(--fail)}
"""


# ---------------------------------------------------------------- Markdown

def _text(c: object) -> str:
    """A table cell as text: an :class:`Estimate` as ``value [lo, hi]``."""
    return fmt_ci(c.value, c.lo, c.hi) if isinstance(c, Estimate) else str(c)


def _md_cell(s: object) -> str:
    return _text(s).replace("|", "\\|").replace("\n", " ")


def _md_table(t: Display) -> list[str]:
    out = [f"**{_md_cell(t.title)}**", "", "| " + " | ".join(_md_cell(h) for h in t.header) + " |",
           "|" + "---|" * len(t.header)]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
    if t.caption:
        out += ["", f"_{t.caption}_"]
    return out + [""]


def to_markdown(report) -> str:
    lines = [f"# {report.title}", ""]
    lines += _md_table(report.models_table())
    lines += report.protocol_lines()
    lines.append("")
    if report.unstated:
        lines += [UNSTATED, ""] + [f"- {u}" for u in report.unstated] + [""]
    lines.append("Contents: " + ", ".join(f"[{s.title}](#{s.id})" for s in report.sections))
    lines.append("")
    for s in report.sections:
        lines += [f'<a id="{s.id}"></a>', "", f"## {s.title}", ""]
        if s.intro:
            lines += [s.intro, ""]
        for t in s.tables:
            lines += _md_table(t)
        if s.notes:
            lines += ["Notes:", ""] + [f"- {n}" for n in s.notes] + [""]
        if s.figures:
            lines += [f"_{len(s.figures)} figure(s) in compare.html._", ""]
    lines += ["## Method", ""] + [f"- {m}" for m in report.method] + [""]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------- HTML

def _html_table(t: Display) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td>{escape(_text(c))}</td>" for c in row) + "</tr>"
                   for row in t.rows)
    cap = f"<caption>{escape(t.title)}</caption>"
    foot = f'<p class="note">{escape(t.caption)}</p>' if t.caption else ""
    return (f'<div class="table-wrap"><table class="compare">{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>{foot}")


def to_html(report) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{escape(report.title)}</title>", f"<style>{CSS}{EXTRA_CSS}</style>",
           "</head>", "<body>", "<main>", f"<h1>{escape(report.title)}</h1>",
           _html_table(report.models_table())]
    proto = report.protocol_lines()
    if report.differences:
        out.append(f'<p class="warn">{escape(proto[0])}</p>')
        out.append('<ul class="differences">' + "".join(
            f"<li>{escape(d)}</li>" for d in report.differences) + "</ul>")
    else:
        out.append(f'<p class="summary">{escape(" ".join(proto))}</p>')
    if report.unstated:
        out.append(f"<details><summary>{escape(UNSTATED)} ({len(report.unstated)})</summary>"
                   "<ul>" + "".join(f"<li>{escape(u)}</li>" for u in report.unstated) +
                   "</ul></details>")
    out.append('<nav class="toc">' + "".join(
        f'<a href="#{escape(s.id)}">{escape(s.title)}</a>' for s in report.sections) + "</nav>")
    for s in report.sections:
        out.append(f'<section class="compare-section" id="{escape(s.id)}">')
        out.append(f"<h2>{escape(s.title)}</h2>")
        if s.intro:
            out.append(f"<p>{escape(s.intro)}</p>")
        for t in s.tables:
            if len(t.rows) > LONG_TABLE:
                out.append(f"<details><summary>{escape(t.title)}: {len(t.rows)} rows</summary>"
                           f"{_html_table(t)}</details>")
            else:
                out.append(_html_table(t))
        if s.figures:
            out.append('<div class="plots">' + "".join(draw(f) for f in s.figures) + "</div>")
        if s.notes:
            out.append('<details><summary>Notes (' + str(len(s.notes)) + ")</summary><ul>" +
                       "".join(f"<li>{escape(n)}</li>" for n in s.notes) + "</ul></details>")
        out.append("</section>")
    out.append('<section class="compare-section" id="method"><h2>Method</h2><ul>' +
               "".join(f"<li>{escape(m)}</li>" for m in report.method) + "</ul></section>")
    out.append(f"<footer>{escape(report.footer)}</footer>")
    out += ["</main>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- CSV

def to_csv(report) -> str:
    frames = [long_frame(s.long) for s in report.sections if s.long]
    long = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=LONG_COLUMNS)
    return long[LONG_COLUMNS].to_csv(index=False, float_format="%.10g", lineterminator="\n")


def write_report(report, out: str | Path) -> dict[str, Path]:
    """``compare.md``, ``compare.html``, ``compare.csv`` in ``out`` (created)."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    paths = {"md": d / "compare.md", "html": d / "compare.html", "csv": d / "compare.csv"}
    for kind, text in (("md", to_markdown(report)), ("html", to_html(report)),
                       ("csv", to_csv(report))):
        with open(paths[kind], "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    return paths
