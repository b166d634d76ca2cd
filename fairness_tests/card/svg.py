"""Inline SVG plots for the HTML card, written by hand (no plotting library).

Every plot is a self-contained ``<svg>`` element with a ``<title>`` and an
``aria-label`` (``role="img"``), a ``data-plot`` attribute naming its kind,
fixed-precision coordinates (so the same data always gives the same bytes) and
escaped text. Label columns and margins are sized from the labels themselves
(:func:`text_width`, an upper estimate of the rendered width), so no label is
clipped by the plot's edge; the browser test checks every text's bounding box.

- :func:`dot_ci`: one row per label, a dot at the value and a bar for the 95% CI;
  an unbounded value ("UB") is drawn as an arrow to the right edge, an undefined
  one (None) is written "n/a".
- :func:`heatmap`: rows x columns of coloured cells with their values.
- :func:`histogram`: bars over given bin edges.
- :func:`bars_ref`: horizontal bars with 95% CIs against a dashed reference line (the
  audit line of the generative position paper's Figure 1).
- :func:`grouped_bars`: per group one bar per series, with a legend (counts per cell
  per model).
"""
from __future__ import annotations

import math
from html import escape
from typing import Any

from fairness_tests.card.values import num
from fairness_tests.core.fmt import finite

FONT = "font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif"
INK = "#1f2933"
MUTED = "#6b7785"
ACCENT = "#1f5fa8"
GRID = "#e3e7ec"
FAIL = "#b3261e"


def _f(x: float) -> str:
    return f"{x:.1f}"


# em widths per character class for a proportional sans-serif; generous on purpose
# (the estimate must not be below the real width in any common system font)
_NARROW = set("il.,:;|!'`ijlftI[]()/\\ ")
_WIDE = set("mwMW@%")


def text_width(text: str, size: float, bold: bool = False) -> float:
    """An upper estimate of the width in px of ``text`` at font size ``size``."""
    em = 0.0
    for ch in str(text):
        if ch in _NARROW:
            em += 0.36
        elif ch in _WIDE:
            em += 0.95
        elif ch.isupper() or ch.isdigit() or ch == "_":
            em += 0.68
        else:
            em += 0.58
    return em * size * (1.08 if bold else 1.0) + 2


def _svg_open(kind: str, title: str, w: float, h: float) -> list[str]:
    t = escape(title)
    w, h = int(math.ceil(w)), int(math.ceil(h))
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="{escape(kind)}" '
            f'role="img" aria-label="{t}" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
            f'style="{FONT}">',
            f"<title>{t}</title>"]


def _nice_domain(values: list[float], include_zero: bool = True) -> tuple[float, float, float]:
    """(lo, hi, step): a domain covering the values, on multiples of a 1-2-2.5-5 step."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    lo = min(vals) if vals else 0.0
    hi = max(vals) if vals else 1.0
    if include_zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi - lo < 1e-9:
        hi = lo + 1.0
    span = hi - lo
    step = 10 ** math.floor(math.log10(span / 4)) if span > 0 else 0.1
    for m in (1, 2, 2.5, 5, 10):
        if span / (m * step) <= 5:
            step *= m
            break
    lo = math.floor(lo / step + 1e-9) * step
    hi = math.ceil(hi / step - 1e-9) * step
    return lo, hi, step


def _ticks(lo: float, hi: float, step: float) -> list[float]:
    n = int(round((hi - lo) / step))
    return [lo + i * step for i in range(n + 1)]


def _label_lines(labels: list[tuple[float, str]], lo: float, hi: float
                 ) -> list[tuple[float, int, str, str]]:
    """Place labels (x, text) at size 10 on as few lines as keep them apart and inside
    [lo, hi]: (x, line, anchor, text) each."""
    out: list[tuple[float, int, str, str]] = []
    ends: list[float] = []
    for x, t in sorted(labels):
        w = text_width(t, 10)
        anchor, left = "middle", x - w / 2
        if left < lo:
            anchor, left = "start", x
        elif x + w / 2 > hi:
            anchor, left = "end", x - w
        line = next((k for k, e in enumerate(ends) if left > e + 4), len(ends))
        if line == len(ends):
            ends.append(0.0)
        ends[line] = left + w
        out.append((x, line, anchor, t))
    return out


def dot_ci(title: str, points: list[dict[str, Any]], width: float = 420,
           kind: str = "dot_ci", domain: list[float] | None = None,
           bounds: list[dict[str, Any]] | None = None) -> str:
    """Dots with 95% CI bars, one row per point (``label, value, lo, hi``). ``domain``:
    [min, max] of the value axis shared with other panels (else the points' own);
    ``bounds``: dashed lines ``{value, label, rows}`` (a decision rule's bound; ``rows``:
    the labels of the rows it applies to, None: every row), labelled above the plot."""
    row_h, pad = 22, 8
    bounds = bounds or []
    label_w = pad + max([text_width(p.get("label", ""), 11) for p in points] + [40]) + 8
    right = max([text_width(num(p.get("value")), 9) for p in points] + [text_width("UB", 10)]) + 12
    plot_w = max(200.0, width - label_w - right)
    width = max(label_w + plot_w + right, text_width(title, 13, bold=True) + 2 * pad)
    finite_vals = [b["value"] for b in bounds] + list(domain or [])
    for p in points:
        for k in ("value", "lo", "hi"):
            v = finite(p.get(k))
            if v is not None:
                finite_vals.append(v)
    lo_d, hi_d, step = _nice_domain(finite_vals)

    def x(v: float) -> float:
        v = max(lo_d, min(hi_d, v))
        return label_w + (v - lo_d) / (hi_d - lo_d) * plot_w

    placed = _label_lines(list({(x(b["value"]), b["label"]) for b in bounds}), 2, width - 2)
    n_lines = 1 + max([line for _, line, _, _ in placed], default=-1)
    top = 30 + (12 * n_lines + 6 if n_lines else 0)
    h = top + row_h * max(1, len(points)) + 30
    out = _svg_open(kind, title, width, h)
    y_end = top + row_h * max(1, len(points))
    out += _title_and_x_grid(title, pad, x, (lo_d, hi_d, step), top, y_end)
    if lo_d < 0 < hi_d:
        out.append(f'<line x1="{_f(x(0))}" y1="{top - 4}" x2="{_f(x(0))}" y2="{y_end}" '
                   f'stroke="{MUTED}" stroke-width="1"/>')
    out += _bound_lines(bounds, points, x, top, row_h, y_end)
    for bx, line, anchor, t in placed:
        out.append(f'<text class="bound-label" x="{_f(bx)}" y="{34 + 12 * line}" '
                   f'font-size="10" fill="{FAIL}" text-anchor="{anchor}">{escape(t)}</text>')
    for i, p in enumerate(points):
        cy = top + row_h * i + row_h / 2
        out.append(f'<text x="{_f(label_w - 8)}" y="{_f(cy + 4)}" font-size="11" fill="{INK}" '
                   f'text-anchor="end">{escape(str(p.get("label", "")))}</text>')
        v, lo, hi = p.get("value"), p.get("lo"), p.get("hi")
        fl, fh = finite(lo), finite(hi)
        hi_ub = hi == "UB"
        if fl is not None and (fh is not None or hi_ub):
            x2 = x(fh) if fh is not None and not hi_ub else label_w + plot_w
            out.append(f'<line class="ci" x1="{_f(x(fl))}" y1="{_f(cy)}" x2="{_f(x2)}" '
                       f'y2="{_f(cy)}" stroke="{ACCENT}" stroke-width="2"/>')
            for xx in (x(fl),) + (() if hi_ub else (x2,)):
                out.append(f'<line x1="{_f(xx)}" y1="{_f(cy - 5)}" x2="{_f(xx)}" '
                           f'y2="{_f(cy + 5)}" stroke="{ACCENT}" stroke-width="2"/>')
        fv = finite(v)
        if fv is not None:
            out.append(f'<circle class="point" cx="{_f(x(fv))}" cy="{_f(cy)}" r="4" '
                       f'fill="{ACCENT}"><title>{escape(str(p.get("label", "")))}: '
                       f'{escape(num(v))} [{escape(num(lo))}, {escape(num(hi))}]</title></circle>')
            out.append(f'<text x="{_f(x(fv) + 7)}" y="{_f(cy - 6)}" '
                       f'font-size="9" fill="{MUTED}">{escape(num(v))}</text>')
        elif v == "UB":
            xe = label_w + plot_w
            out.append(f'<path class="point" d="M{_f(xe - 8)},{_f(cy - 5)} L{_f(xe)},{_f(cy)} '
                       f'L{_f(xe - 8)},{_f(cy + 5)} Z" fill="{FAIL}"/>')
            out.append(f'<text x="{_f(xe + 4)}" y="{_f(cy + 4)}" font-size="10" '
                       f'fill="{FAIL}">UB</text>')
        else:
            out.append(f'<text x="{_f(label_w + 4)}" y="{_f(cy + 4)}" font-size="10" '
                       f'fill="{MUTED}">n/a (undefined)</text>')
    out.append("</svg>")
    return "\n".join(out)


def _bound_lines(bounds: list[dict[str, Any]], points: list[dict[str, Any]], x, top: float,
                 row_h: float, y_end: float) -> list[str]:
    """Dashed red segments at each bound: the whole plot height, or the rows it names."""
    out = []
    labels = [str(p.get("label", "")) for p in points]
    for b in bounds:
        xb = _f(x(b["value"]))
        spans = [(top - 4, y_end)] if b.get("rows") is None else [
            (top + row_h * i, top + row_h * (i + 1)) for i, lab in enumerate(labels)
            if lab in b["rows"]]
        for y0, y1 in spans:
            out.append(f'<line class="bound" data-bound="{b["value"]:g}" x1="{xb}" '
                       f'y1="{_f(y0)}" x2="{xb}" y2="{_f(y1)}" stroke="{FAIL}" '
                       f'stroke-width="1.5" stroke-dasharray="4 3"><title>'
                       f'{escape(str(b.get("rule", "")))}: {escape(b["label"])}</title></line>')
    return out


def _title_and_x_grid(title: str, pad: float, x, domain: tuple[float, float, float],
                      top: float, y_end: float) -> list[str]:
    """The title line and the vertical grid lines with their tick labels of a
    horizontal-axis plot (``x`` maps a value to its pixel column)."""
    lo_d, hi_d, step = domain
    out = [f'<text x="{pad}" y="16" font-size="13" font-weight="600" fill="{INK}">'
           f"{escape(title)}</text>"]
    for t in _ticks(lo_d, hi_d, step):
        out.append(f'<line x1="{_f(x(t))}" y1="{top - 4}" x2="{_f(x(t))}" y2="{y_end}" '
                   f'stroke="{GRID}" stroke-width="1"/>')
        out.append(f'<text x="{_f(x(t))}" y="{y_end + 14}" font-size="10" fill="{MUTED}" '
                   f'text-anchor="middle">{escape(_tick_label(t))}</text>')
    return out


def _tick_label(t: float) -> str:
    if abs(t) < 1e-12:
        return "0"
    return f"{t:.3g}"


def _heat_colour(v: float, vmax: float) -> str:
    """White -> dark red, linear in v / vmax."""
    r = 0.0 if vmax <= 0 else max(0.0, min(1.0, v / vmax))
    c0, c1 = (255, 247, 243), (165, 15, 21)
    rgb = [round(a + (b - a) * r) for a, b in zip(c0, c1, strict=True)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def heatmap(title: str, rows: list[str], cols: list[str], values: list[list[Any]],
            vmax: float | None = None, bound: float | None = None, bound_label: str = "") -> str:
    """Rows x columns of cells coloured white -> dark red over [0, ``vmax``] (shared by
    the heatmaps of one figure; default: the largest value); a cell above ``bound`` is
    outlined, and the legend says so."""
    top, cell_h, pad = 44, 28, 8
    label_w = pad + max([text_width(r, 11) for r in rows] + [40]) + 8
    cell_w = max([70.0] + [text_width(c, 11) + 8 for c in cols]
                 + [text_width(num(v), 11) + 8 for row in values for v in row])
    vals = [finite(v) for row in values for v in row]
    if vmax is None or vmax <= 0:
        vmax = max([v for v in vals if v is not None] or [1.0]) or 1.0
    legend = f"colour: 0 (white) to {num(vmax)} (dark red)"
    if bound is not None:
        legend += f"; outlined: above {bound_label or num(bound)}"
    width = max(label_w + cell_w * max(1, len(cols)) + 20, text_width(title, 13, True) + 2 * pad,
                label_w + text_width(legend, 10) + pad)
    h = top + cell_h * max(1, len(rows)) + 28
    out = _svg_open("heatmap", title, width, h)
    out.append(f'<text x="{pad}" y="16" font-size="13" font-weight="600" fill="{INK}">'
               f"{escape(title)}</text>")
    for j, c in enumerate(cols):
        out.append(f'<text x="{_f(label_w + cell_w * j + cell_w / 2)}" y="{top - 8}" '
                   f'font-size="11" fill="{INK}" text-anchor="middle">{escape(str(c))}</text>')
    for i, r in enumerate(rows):
        y = top + cell_h * i
        out.append(f'<text x="{_f(label_w - 8)}" y="{_f(y + cell_h / 2 + 4)}" font-size="11" '
                   f'fill="{INK}" text-anchor="end">{escape(str(r))}</text>')
        for j, c in enumerate(cols):
            v = values[i][j] if j < len(values[i]) else None
            fv = finite(v)
            fill = _heat_colour(fv, vmax) if fv is not None else "#f0f0f0"
            text_fill = "#ffffff" if fv is not None and fv / vmax > 0.55 else INK
            xx = label_w + cell_w * j
            over = bound is not None and fv is not None and fv > bound
            edge = f' stroke="{INK}" stroke-width="2"' if over else ""
            out.append(f'<rect class="cell{" over" if over else ""}" x="{_f(xx)}" y="{y}" '
                       f'width="{_f(cell_w - 2)}" height="{cell_h - 2}" fill="{fill}"{edge}>'
                       f'<title>{escape(str(r))} x {escape(str(c))}: {escape(num(v))}</title>'
                       "</rect>")
            out.append(f'<text x="{_f(xx + cell_w / 2 - 1)}" y="{_f(y + cell_h / 2 + 3)}" '
                       f'font-size="11" fill="{text_fill}" text-anchor="middle">'
                       f"{escape(num(v))}</text>")
    out.append(f'<text x="{_f(label_w)}" y="{_f(h - 8)}" font-size="10" fill="{MUTED}">'
               f"{escape(legend)}</text>")
    out.append("</svg>")
    return "\n".join(out)


def histogram(title: str, bin_edges: list[float], counts: list[int], xlabel: str = "",
              ymax: float | None = None, ref: float | None = None, ref_label: str = "",
              mean: float | None = None) -> str:
    """Bars over ``bin_edges``; ``ymax``: the count axis shared with other histograms;
    ``ref``: a dashed red line at a rule's bound (``ref_label``); ``mean``: a solid line
    at the items' mean, both labelled above the plot."""
    marks = [(fv, t, c) for v, t, c in ((ref, ref_label or f"{ref}", FAIL),
                                         (mean, f"mean {num(mean, 1)}", INK))
             if (fv := finite(v)) is not None]
    left, bottom = 44, 40
    top = 30 + 12 * len(marks) + (6 if marks else 0)
    h = top + 130 + bottom
    width = max(420.0, text_width(title, 13, True) + left + 8, text_width(xlabel, 11) + 2 * left,
                *(text_width(t, 10) + 2 * left for _, t, _ in marks))
    plot_w, plot_h = width - left - 16, h - top - bottom
    cmax = max([*(counts or [0]), ymax or 0]) or 1
    n_bins = max(1, len(counts))
    bw = plot_w / n_bins
    out = _svg_open("histogram", title, width, h)
    out.append(f'<text x="{left}" y="16" font-size="13" font-weight="600" fill="{INK}">'
               f"{escape(title)}</text>")
    _, cmax_nice, cstep = _nice_domain([0.0, float(cmax)])
    cstep = max(1.0, cstep)
    cmax = max(cmax, int(math.ceil(cmax_nice / cstep) * cstep))
    for t in _ticks(0, cmax, cstep):
        y = top + plot_h - t / cmax * plot_h
        out.append(f'<line x1="{left}" y1="{_f(y)}" x2="{left + plot_w}" y2="{_f(y)}" '
                   f'stroke="{GRID}"/>')
        out.append(f'<text x="{left - 4}" y="{_f(y + 3)}" font-size="10" fill="{MUTED}" '
                   f'text-anchor="end">{escape(_tick_label(t))}</text>')
    for i, c in enumerate(counts):
        bh = c / cmax * plot_h
        x = left + bw * i
        lo, hi = bin_edges[i], bin_edges[i + 1]
        out.append(f'<rect class="bar" x="{_f(x + 1)}" y="{_f(top + plot_h - bh)}" '
                   f'width="{_f(bw - 2)}" height="{_f(bh)}" fill="{ACCENT}"><title>'
                   f"{escape(_tick_label(lo))}-{escape(_tick_label(hi))}: {c}</title></rect>")
    for i, e in enumerate(bin_edges):
        x = left + bw * i
        out.append(f'<text x="{_f(x)}" y="{top + plot_h + 14}" font-size="10" fill="{MUTED}" '
                   f'text-anchor="middle">{escape(_tick_label(e))}</text>')
    if xlabel:
        out.append(f'<text x="{_f(left + plot_w / 2)}" y="{h - 6}" font-size="11" fill="{INK}" '
                   f'text-anchor="middle">{escape(xlabel)}</text>')
    lo, hi = bin_edges[0], bin_edges[-1]
    for k, (v, label, colour) in enumerate(marks):
        xv = left + (max(lo, min(hi, v)) - lo) / ((hi - lo) or 1) * plot_w
        dash = ' stroke-dasharray="4 3"' if colour == FAIL else ""
        out.append(f'<line class="{"bound" if colour == FAIL else "mean"}" x1="{_f(xv)}" '
                   f'y1="{top - 4}" x2="{_f(xv)}" y2="{_f(top + plot_h)}" stroke="{colour}" '
                   f'stroke-width="1.5"{dash}/>')
        w = text_width(label, 10)
        anchor = "end" if xv + w / 2 > width - 2 else "start" if xv - w / 2 < 2 else "middle"
        out.append(f'<text class="{"bound-label" if colour == FAIL else "mean-label"}" '
                   f'x="{_f(xv)}" y="{34 + 12 * k}" font-size="10" fill="{colour}" '
                   f'text-anchor="{anchor}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def bars_ref(title: str, bars: list[dict[str, Any]], ref: float, ref_label: str = "",
             width: float = 420, kind: str = "bars_ref") -> str:
    """Horizontal bars from 0 (``label, value, lo, hi``) with their 95% CI and a dashed
    vertical reference line at ``ref`` (an audit threshold), as in the generative
    position paper's Figure 1; a bar beyond the line is red. An undefined value is
    written "n/a"; "UB" as in :func:`dot_ci`. Margins fit the labels (:func:`text_width`)."""
    top, row_h, pad = 44, 22, 8
    label_w = pad + max([text_width(b.get("label", ""), 11) for b in bars] + [40]) + 8
    right = max([text_width(num(b.get("value")), 9) for b in bars]
                + [text_width("UB", 9)]) + 12
    plot_w = max(200.0, width - label_w - right)
    width = max(label_w + plot_w + right, text_width(title, 13, bold=True) + 2 * pad)
    h = top + row_h * max(1, len(bars)) + 30
    vals = [ref]
    for b in bars:
        vals.extend(v for v in (finite(b.get(k)) for k in ("value", "lo", "hi")) if v is not None)
    lo_d, hi_d, step = _nice_domain(vals)

    def x(v: float) -> float:
        return label_w + (max(lo_d, min(hi_d, v)) - lo_d) / (hi_d - lo_d) * plot_w

    out = _svg_open(kind, title, width, h)
    y_end = top + row_h * max(1, len(bars))
    out += _title_and_x_grid(title, pad, x, (lo_d, hi_d, step), top, y_end)
    for i, b in enumerate(bars):
        y0 = top + row_h * i
        cy = y0 + row_h / 2
        label = str(b.get("label", ""))
        out.append(f'<text x="{_f(label_w - 8)}" y="{_f(cy + 4)}" font-size="11" fill="{INK}" '
                   f'text-anchor="end">{escape(label)}</text>')
        v, lo, hi = b.get("value"), b.get("lo"), b.get("hi")
        fv, fl, fh = finite(v), finite(lo), finite(hi)
        if fv is None and v != "UB":
            out.append(f'<text x="{_f(label_w + 4)}" y="{_f(cy + 4)}" font-size="10" '
                       f'fill="{MUTED}">n/a (undefined)</text>')
            continue
        xv = label_w + plot_w if fv is None else x(fv)
        x0 = x(0.0)
        fill = "#b3261e" if fv is None or fv > ref else ACCENT
        out.append(f'<rect class="bar" x="{_f(min(x0, xv))}" y="{_f(y0 + 4)}" '
                   f'width="{_f(abs(xv - x0))}" height="{row_h - 8}" fill="{fill}" '
                   f'fill-opacity="0.75"><title>{escape(label)}: {escape(num(v))} '
                   f'[{escape(num(lo))}, {escape(num(hi))}]</title></rect>')
        if fl is not None and (fh is not None or hi == "UB"):
            x2 = label_w + plot_w if fh is None else x(fh)
            out.append(f'<line class="ci" x1="{_f(x(fl))}" y1="{_f(cy)}" x2="{_f(x2)}" '
                       f'y2="{_f(cy)}" stroke="{INK}" stroke-width="1.5"/>')
        x_text = max(xv, x(fh) if fh is not None else xv)
        out.append(f'<text x="{_f(x_text + 4)}" y="{_f(cy + 4)}" '
                   f'font-size="9" fill="{MUTED}">{escape(num(v))}</text>')
    xr = x(ref)
    out.append(f'<line class="ref" x1="{_f(xr)}" y1="{top - 8}" x2="{_f(xr)}" y2="{y_end}" '
               f'stroke="#b3261e" stroke-width="1.5" stroke-dasharray="4 3"/>')
    if ref_label:
        left_of = xr + 3 + text_width(ref_label, 10) > width     # would run past the edge
        out.append(f'<text x="{_f(xr - 3 if left_of else xr + 3)}" y="{top - 12}" '
                   f'font-size="10" fill="#b3261e" text-anchor="{"end" if left_of else "start"}">'
                   f"{escape(ref_label)}</text>")
    out.append("</svg>")
    return "\n".join(out)


SERIES = ["#1f5fa8", "#d9822b", "#2e8540", "#8e44ad", "#b3261e", "#17a2b8", "#6b7785",
          "#c2185b"]


def grouped_bars(title: str, groups: list[str], series: list[str],
                 values: list[list[Any]], ylabel: str = "") -> str:
    """Vertical bars: for each group (x axis) one bar per series (a colour each, named
    in the legend), the value above each bar; ``values[i][j]`` = group i, series j
    (None: no bar, "n/a"). Sizes fit the labels (:func:`text_width`)."""
    left, bottom, right, pad, plot_h = 44, 44, 16, 8, 160
    gw = max(60.0, 18 * max(1, len(series)) + 20,
             max([text_width(g, 10) for g in groups] + [0]) + 14)
    width = max(420.0, left + gw * max(1, len(groups)) + right,
                text_width(title, 13, bold=True) + 2 * pad, left + text_width(ylabel, 10) + pad)
    # the legend: entries left to right, wrapped at the width
    legend, lx, ly = [], float(left), 30.0
    for s in series:
        w = 14 + text_width(s, 10) + 14
        if lx > left and lx + w > width - right:
            lx, ly = float(left), ly + 16
        legend.append((lx, ly))
        lx += w
    top = ly + 16
    h = top + plot_h + bottom
    vals = [v for row in values for v in (finite(x) for x in row) if v is not None]
    _, vmax, step = _nice_domain([0.0, *vals])
    out = _svg_open("grouped_bars", title, width, h)
    out.append(f'<text x="{pad}" y="16" font-size="13" font-weight="600" fill="{INK}">'
               f"{escape(title)}</text>")
    for j, (s, (lx, ly)) in enumerate(zip(series, legend, strict=True)):
        out.append(f'<rect x="{_f(lx)}" y="{_f(ly - 9)}" width="10" height="10" '
                   f'fill="{SERIES[j % len(SERIES)]}"/>')
        out.append(f'<text class="legend" x="{_f(lx + 14)}" y="{_f(ly)}" font-size="10" '
                   f'fill="{INK}">{escape(str(s))}</text>')

    def y(v: float) -> float:
        return top + plot_h - v / vmax * plot_h

    for t in _ticks(0.0, vmax, step):
        out.append(f'<line x1="{left}" y1="{_f(y(t))}" x2="{_f(left + gw * len(groups))}" '
                   f'y2="{_f(y(t))}" stroke="{GRID}"/>')
        out.append(f'<text x="{left - 4}" y="{_f(y(t) + 3)}" font-size="10" fill="{MUTED}" '
                   f'text-anchor="end">{escape(_tick_label(t))}</text>')
    bw = (gw - 20) / max(1, len(series))
    for i, g in enumerate(groups):
        gx = left + gw * i + 10
        for j, s in enumerate(series):
            v = values[i][j] if j < len(values[i]) else None
            fv = finite(v)
            xx = gx + bw * j
            if fv is None:
                out.append(f'<text x="{_f(xx + bw / 2)}" y="{_f(y(0) - 3)}" font-size="8" '
                           f'fill="{MUTED}" text-anchor="middle">n/a</text>')
                continue
            out.append(f'<rect class="bar" x="{_f(xx)}" y="{_f(y(fv))}" width="{_f(bw - 1)}" '
                       f'height="{_f(y(0) - y(fv))}" fill="{SERIES[j % len(SERIES)]}"><title>'
                       f"{escape(str(g))}, {escape(str(s))}: {escape(num(v))}</title></rect>")
            out.append(f'<text x="{_f(xx + (bw - 1) / 2)}" y="{_f(y(fv) - 3)}" font-size="8" '
                       f'fill="{MUTED}" text-anchor="middle">{escape(_count(fv))}</text>')
        out.append(f'<text x="{_f(gx + (gw - 20) / 2)}" y="{_f(top + plot_h + 14)}" '
                   f'font-size="10" fill="{INK}" text-anchor="middle">{escape(str(g))}</text>')
    if ylabel:
        out.append(f'<text x="{left}" y="{_f(h - 8)}" font-size="10" fill="{MUTED}">'
                   f"{escape(ylabel)}</text>")
    out.append("</svg>")
    return "\n".join(out)


def _count(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else num(v)
