"""Render a card (dict) as one self-contained HTML file.

No network: inline CSS, inline SVG plots (:mod:`.svg`), no script, and a
Content-Security-Policy that forbids loading anything. All text is escaped with
:func:`html.escape`. Every ``id`` is unique (a section carries its anchor, its
heading none; a repeated anchor gets a ``-2``, ``-3`` suffix), so the page passes
an HTML validator. Deterministic: same card, same bytes.
"""
from __future__ import annotations

import dataclasses
from html import escape

from fairness_tests.card import blocks as L
from fairness_tests.card import svg
from fairness_tests.card.layout import build

CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
       "form-action 'none'")

WIDE_TABLE = 10   # tables with this many columns print in a smaller font
LONG_TABLE = 16   # longer tables are folded in a <details> element (no script needed),
                  # except those marked fold=False (decision rules, failing verdicts)

CSS = """
:root{--ink:#1f2933;--muted:#6b7785;--line:#d9dee4;--bg:#f7f8fa;--accent:#1f5fa8;
--pass:#1e7b34;--fail:#b3261e;--xfail:#8a5a00;--ne:#5b6470}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1180px;margin:0 auto;padding:24px 32px 64px;background:#fff;
border-left:1px solid var(--line);border-right:1px solid var(--line)}
h1{font-size:26px;margin:8px 0 4px}
h2{font-size:20px;margin:36px 0 10px;padding-top:10px;border-top:2px solid var(--ink)}
h3{font-size:16px;margin:22px 0 8px}
h4{font-size:14px;margin:18px 0 6px;color:var(--accent)}
p{margin:6px 0}
p.note{color:var(--muted);font-style:italic}
p.label{font-weight:600;margin-top:12px}
p.warn{border-left:4px solid var(--xfail);background:#fff8e6;padding:6px 10px}
p.summary{border:1px solid var(--line);background:var(--bg);padding:10px 12px;font-weight:500}
p.alert{border:2px solid var(--fail);background:#fdf1f0;color:var(--fail);padding:8px 12px;
font-weight:600}
figcaption{flex-basis:100%;color:var(--muted);font-size:12.5px}
nav.toc{font-size:13px;margin:10px 0 4px}
nav.toc a{margin-right:12px;color:var(--accent);text-decoration:none}
dl.kv{display:grid;grid-template-columns:220px 1fr;gap:2px 16px;margin:8px 0}
dl.kv dt{font-weight:600;color:var(--muted)}
dl.kv dd{margin:0;overflow-wrap:anywhere}
ul{margin:4px 0 8px;padding-left:22px}
pre{background:var(--bg);border:1px solid var(--line);padding:8px 10px;white-space:pre-wrap;
font:12.5px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.table-wrap{overflow-x:auto;margin:6px 0 12px}
table{border-collapse:collapse;font-size:12.5px;min-width:40%}
caption{text-align:left;color:var(--muted);font-style:italic;padding:2px 0}
th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
th{background:var(--bg)}
td.status{font-weight:700;white-space:nowrap}
.st-pass{color:var(--pass)} .st-fail,.st-mixed{color:var(--fail)}
.st-expected_fail{color:var(--xfail)} .st-not_evaluable{color:var(--ne)}
.missing{border:1px dashed var(--fail);background:#fdf1f0;padding:4px 10px;margin:4px 0;
color:var(--fail)}
.missing code{font-weight:700}
.plots{display:flex;flex-wrap:wrap;gap:12px 24px;margin:8px 0}
figure{margin:0;display:flex;flex-wrap:wrap;gap:12px 24px;align-items:flex-start}
svg.plot{background:#fff;border:1px solid var(--line);max-width:100%;height:auto}
details{margin:6px 0 12px}
summary{cursor:pointer;color:var(--accent);font-size:13px}
footer{margin-top:40px;color:var(--muted);font-size:12px}
wbr{display:none}
@page{margin:12mm}
@media print{
wbr{display:inline}
body{background:#fff;font-size:11px}
main{max-width:none;margin:0;padding:0;border:0}
nav.toc{display:none}
h1,h2,h3,h4{break-after:avoid}
h2{margin-top:18px}
.table-wrap{overflow:visible}
table{width:100%;min-width:0;font-size:8.5px}
th,td{white-space:normal !important;overflow-wrap:anywhere;padding:2px 4px}
table.wide{font-size:7.5px}
tr,svg.plot,p.alert{break-inside:avoid}
summary{color:var(--muted)}
}
"""


def render_html(card: dict) -> str:
    blocks = build(card)
    system = card.get("system") or {}
    title = f"Fairness Card — {system.get('name') or 'model'}"
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{escape(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
           "<main>"]
    blocks = _unique_anchors(blocks)
    toc = [(b.anchor, b.text) for b in blocks if isinstance(b, L.Heading) and b.level == 2]
    in_section = False
    plot_run: list[str] = []

    def flush_plots():
        if plot_run:
            out.append('<div class="plots">' + "".join(plot_run) + "</div>")
            plot_run.clear()

    for b in blocks:
        if not isinstance(b, L.Plot):
            flush_plots()
        if isinstance(b, L.Heading) and b.level == 2:
            if in_section:
                out.append("</section>")
            out.append(f'<section class="card-section" id="{escape(b.anchor)}" '
                       f'data-section="{escape(b.anchor)}">')
            in_section = True
        if isinstance(b, L.Heading) and b.level == 1:
            out.append(f'<h1 id="{escape(b.anchor)}">{escape(b.text)}</h1>')
            continue
        if isinstance(b, L.Plot):
            plot_run.append(_plot(b))
            continue
        out.append(_block(b))
        if isinstance(b, L.Para) and b.style == "summary":
            out.append('<nav class="toc">' + "".join(
                f'<a href="#{escape(a)}">{escape(t)}</a>' for a, t in toc) + "</nav>")
    flush_plots()
    if in_section:
        out.append("</section>")
    gen = card.get("generator") or {}
    out.append(f"<footer>Written by {escape(str(gen.get('name', '')))} "
               f"{escape(str(gen.get('version', '')))} from the run's recorded results; "
               f"the YAML card is the record, this page a view of it.</footer>")
    out += ["</main>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


def _unique_anchors(blocks: list) -> list:
    """Headings with anchors made unique in document order."""
    seen: dict[str, int] = {}
    out = []
    for b in blocks:
        if isinstance(b, L.Heading) and b.anchor:
            n = seen.get(b.anchor, 0) + 1
            seen[b.anchor] = n
            if n > 1:
                b = dataclasses.replace(b, anchor=f"{b.anchor}-{n}")
        out.append(b)
    return out


def _block(b) -> str:
    if isinstance(b, L.Heading):
        lvl = min(6, max(2, b.level))
        # a level-2 heading's anchor is its <section>'s id
        ident = f' id="{escape(b.anchor)}"' if b.anchor and b.level != 2 else ""
        return f"<h{lvl}{ident}>{escape(b.text)}</h{lvl}>"
    if isinstance(b, L.Para):
        cls = f' class="{escape(b.style)}"' if b.style else ""
        return f"<p{cls}>{escape(b.text)}</p>"
    if isinstance(b, L.KV):
        if not b.pairs:
            return ""
        return '<dl class="kv">' + "".join(
            f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in b.pairs) + "</dl>"
    if isinstance(b, L.Items):
        return "<ul>" + "".join(f"<li>{escape(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, L.Code):
        return f"<pre>{escape(b.text)}</pre>"
    if isinstance(b, L.Missing):
        src = "the run did not record it" if b.source == "run" else "supply it in the user YAML"
        hint = f": {escape(b.hint)}" if b.hint else ""
        return (f'<div class="missing" data-missing="{escape(b.field)}">MISSING '
                f"<code>{escape(b.field)}</code> ({src}){hint}</div>")
    if isinstance(b, L.Table):
        wide = ' class="wide"' if len(b.columns) >= WIDE_TABLE else ""
        parts = [f'<div class="table-wrap"><table{wide}>']
        if b.caption:
            parts.append(f"<caption>{escape(b.caption)}</caption>")
        parts.append("<thead><tr>" + "".join(f"<th>{_breakable(c)}</th>" for c in b.columns)
                     + "</tr></thead><tbody>")
        for row in b.rows:
            cells = []
            for j, c in enumerate(row):
                if j == b.status_col:
                    cells.append(f'<td class="status st-{escape(c)}">{escape(c)}</td>')
                else:
                    cells.append(f"<td>{_breakable(c)}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody></table></div>")
        if b.fold and len(b.rows) > LONG_TABLE:
            return (f"<details><summary>Table: {len(b.rows)} rows</summary>"
                    + "".join(parts) + "</details>")
        return "".join(parts)
    raise TypeError(f"unknown block {b!r}")


def _breakable(text: str) -> str:
    """Escaped table text that may wrap after "_" and "/" (identifiers such as
    ``dominant_across_decoding`` or ``Race_x_gender/disambig``), so a wide table fits a
    printed page without breaking words mid-letter."""
    return escape(text).replace("_", "_<wbr>").replace("/", "/<wbr>")


def _plot(p: L.Plot) -> str:
    d = p.data
    cap = f"<figcaption>{escape(p.note)}</figcaption>" if p.note else ""
    if "panels" in d:
        figs = [svg.dot_ci(panel["metric"], panel["points"], kind=p.kind,
                           domain=panel.get("domain"), bounds=panel.get("bounds"))
                for panel in d.get("panels", [])]
        return (f'<figure data-figure="{escape(p.kind)}" role="group" '
                f'aria-label="{escape(p.title)}">' + "".join(figs) + cap + "</figure>")
    if p.kind == "heatmap":
        return ('<figure data-figure="heatmap">'
                + svg.heatmap(p.title, d["rows"], d["cols"], d["values"], vmax=d.get("vmax"),
                              bound=d.get("bound"), bound_label=d.get("bound_label", ""))
                + cap + "</figure>")
    if p.kind == "histogram":
        return ('<figure data-figure="histogram">'
                + svg.histogram(p.title, d["bin_edges"], d["counts"],
                                xlabel=f"{d.get('metric', '').upper()}% (bins of 10)",
                                ymax=d.get("ymax"), ref=d.get("ref"),
                                ref_label=d.get("ref_label", ""), mean=d.get("mean"))
                + cap + "</figure>")
    raise ValueError(f"unknown plot kind {p.kind!r}")
