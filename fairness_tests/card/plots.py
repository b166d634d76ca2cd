"""What the card's plots draw, as data (:class:`~fairness_tests.card.blocks.Plot`):
the panels with their points, one shared scale per unit and the decision rules'
bounds, laid out as a family's views ask (:class:`~fairness_tests.pipeline.views.Panels`,
:class:`~fairness_tests.pipeline.views.Heatmaps`,
:class:`~fairness_tests.pipeline.views.Histograms`). :mod:`.svg` draws them;
:mod:`.render_md` prints their numbers.

Scales: the panels of one figure that show metrics of the same unit (rates, signed
scores, ratios) share one value axis (the metrics some decision rule bounds on one, the
others on another), and that axis always covers the bounds drawn on it, so a
difference of 0.001 looks as small as it is next to a bound of 0.05 (each panel used to
zoom onto its own values).

Bounds (from the card's verdicts; nothing recomputed): a rule on the panel's metric
is drawn as a dashed line at its bound, labelled with its comparison (``<= 0.05``):

- a rule without ``across``: on the rows whose cell id is one of the rule's cells
  (e.g. ``accuracy >= 0.6`` on the disambiguated rows only);
- a rule reducing ``across`` a column with ``max`` or ``min`` (the worst slice): on
  every row, when the panel's rows vary along that column, since every row of it must
  then satisfy the bound;
- ``abs: true``: at -bound and +bound;
- a ``range`` rule (max - min over a column) bounds a difference, not a value: it is
  not drawn, and the plot's note says so.
"""
from __future__ import annotations

from typing import Any

from fairness_tests.card.schema import metric_definitions
from fairness_tests.core.fmt import finite
from fairness_tests.pipeline.views import Heatmaps, Histograms, Panels

OP_TEXT = {"<=": "\u2264", ">=": "\u2265"}
POOLED = (None, "", "all", "nan", "None")


def row_cell(row: dict, columns: tuple[str, ...]) -> str:
    """A table row's cell id as the rules name it: its grouping values in table order,
    pooled ones ("all", empty) left out (:func:`fairness_tests.rules.evaluate.cell_name`)."""
    parts = [str(row[c]) for c in columns if row.get(c) not in POOLED]
    return "/".join(parts) or "all"


def _rules_on(card: dict, metric: str) -> dict[str, list[dict]]:
    """The verdict rows of each rule on ``metric``, by rule id (sorted)."""
    out: dict[str, list[dict]] = {}
    for v in card.get("verdicts") or []:
        if v.get("metric") == metric and finite(v.get("bound")) is not None:
            out.setdefault(str(v.get("rule")), []).append(v)
    return dict(sorted(out.items()))


def _label(v: dict) -> str:
    """``<= 0.05``, ``CI low >= 0.6``, ``CI low |x| <= 0.1`` (with the signs as symbols)."""
    op = OP_TEXT.get(str(v.get("op")), str(v.get("op")))
    what = {"ci_low": "CI low ", "ci_high": "CI high "}.get(str(v.get("compared")), "")
    return f"{what}{'|x| ' if v.get('abs') else ''}{op} {float(v['bound']):.4g}"


def bounds(card: dict, metric: str, cells: dict[str, str], across_dims: tuple[str, ...]
           ) -> tuple[list[dict], list[str]]:
    """(bounds to draw, rules not drawn) for a panel of ``metric`` whose rows are
    ``cells`` (label -> cell id) and vary along ``across_dims``. A bound:
    ``{value, label, text, rule, rows}`` (``label`` above the line, ``text`` the rule's
    comparison, ``rows`` None: every row)."""
    out, skipped = [], []
    for rule, rows in _rules_on(card, metric).items():
        first = rows[0]
        across, reduce = first.get("across"), first.get("reduce")
        if across and reduce == "range":
            skipped.append(f"{rule} (range over {across} {first.get('op')} "
                           f"{float(first['bound']):g})")
            continue
        by_bound: dict[float, list[dict]] = {}
        for v in rows:
            by_bound.setdefault(float(v["bound"]), []).append(v)
        for b, vs in sorted(by_bound.items()):
            if across:
                if across not in across_dims:
                    continue
                on = None
            else:
                want = {str(v.get("cell")) for v in vs}
                on = [lab for lab, c in cells.items() if c in want]
                if not on:
                    continue
            signs = (-1.0, 1.0) if vs[0].get("abs") and b != 0 else (1.0,)
            for s in signs:               # abs: the negative line labelled by its value
                out.append({"value": b * s, "rule": rule, "rows": on, "text": _label(vs[0]),
                            "label": _label(vs[0]) if s > 0 else f"{-b:g}"})
    return out, skipped


def _extent(panels: list[dict]) -> list[float]:
    vals = []
    for p in panels:
        for pt in p["points"]:
            vals += [v for v in (finite(pt.get(k)) for k in ("value", "lo", "hi")) if v is not None]
        vals += [b["value"] for b in p.get("bounds", [])]
    return vals


def share_scales(card: dict, panels: list[dict]) -> list[dict]:
    """Give every panel the raw domain [min, max] (values, CI ends, bounds, 0) over all
    panels of its scale group: the same unit, and the metrics the decision rules bound
    apart from the others (so a descriptive rate near 0.9 does not squeeze a bounded
    harm rate near 0.01 onto one pixel). The renderer rounds it to the same axis."""
    defs = metric_definitions()
    groups: dict[tuple[str, bool], list[dict]] = {}
    for p in panels:
        unit = (defs.get(p["metric"]) or {}).get("unit") or p["metric"]
        groups.setdefault((unit, bool(_rules_on(card, p["metric"]))), []).append(p)
    for group in groups.values():
        vals = _extent(group)
        if vals:
            for p in group:
                p["domain"] = [min(vals + [0.0]), max(vals + [0.0])]
    return panels


def note(panels: list[dict], skipped: list[str]) -> str:
    """One sentence under a figure: the shared scale and the bounds drawn or not."""
    drawn = sorted({b["rule"] for p in panels for b in p.get("bounds", [])})
    parts = ["One axis per unit (bounded metrics apart), covering the bounds"
             if len(panels) > 1 else "The axis covers the bound"]
    parts.append("dashed: the bounds of " + ", ".join(drawn) if drawn
                 else "no decision rule bounds these values directly")
    if skipped:
        parts.append("not drawn (they bound a difference between rows): "
                     + ", ".join(sorted(set(skipped))))
    return "; ".join(parts) + "."


def panels(card: dict, rows: list[dict], spec: Panels) -> tuple[list[dict], list[str]]:
    """Metric panels of ``rows`` as ``spec`` lays them out (its metrics, row labels and
    order), each with its bounds, sharing one scale per unit."""
    defs = metric_definitions()
    present = list(dict.fromkeys(str(r["metric"]) for r in rows if r.get("metric")))
    metrics = [m for m in spec.order if m in present]
    if spec.others:
        metrics += sorted(m for m in present if m not in spec.order)
    out, skipped = [], []
    for m in metrics:
        if spec.unit is not None and (defs.get(m) or {}).get("unit") != spec.unit:
            continue
        pts, cells = [], {}
        for r in (r for r in rows if r.get("metric") == m):
            label = "/".join(str(r[k]) for k in spec.columns if r.get(k) not in (None, ""))
            pts.append({"label": label, "value": r.get("value"), "lo": r.get("ci_low"),
                        "hi": r.get("ci_high")})
            cells[label] = row_cell(r, spec.columns)
        if spec.sort:
            pts.sort(key=lambda p: str(p["label"]))
        bs, sk = bounds(card, m, cells, spec.columns)
        skipped += sk
        out.append({"metric": m, "points": pts, "bounds": bs})
    return share_scales(card, out), skipped


def heatmaps(card: dict, rows: list[dict], spec: Heatmaps) -> list[dict]:
    """``spec.rows`` x ``spec.cols`` heatmaps, one per metric of ``spec.metrics``,
    sharing one colour scale (0 to the largest value or bound); a cell beyond a
    worst-row bound (a ``max`` over ``spec.rows`` rule on the metric) is outlined."""
    maps = []
    for metric in spec.metrics:
        sel = [r for r in rows if r.get("metric") == metric]
        if not sel:
            continue
        ys = sorted({str(r.get(spec.rows)) for r in sel})
        xs = sorted({str(r.get(spec.cols)) for r in sel})
        cells = {(str(r.get(spec.rows)), str(r.get(spec.cols))): r.get("value") for r in sel}
        hm: dict[str, Any]
        hm = {"metric": metric, "rows": ys, "cols": xs,
              "values": [[cells.get((y, x)) for x in xs] for y in ys]}
        worst = _worst_row_rule(card, metric, spec.rows, xs)
        if worst:
            hm["bound"], rule = worst
            hm["bound_label"] = f"the bound {hm['bound']:g} of {rule}"
        maps.append(hm)
    top = [v for hm in maps for row in hm["values"] for v in (finite(x) for x in row)
           if v is not None] + [hm["bound"] for hm in maps if "bound" in hm]
    for hm in maps:
        hm["vmax"] = max(top) if top and max(top) > 0 else 1.0
    return maps


def _worst_row_rule(card: dict, metric: str, across: str, cols: list[str]
                    ) -> tuple[float, str] | None:
    """(bound, rule) of a ``max`` over ``across`` ``<=`` rule on ``metric``, preferring
    the one whose cells are the heatmap's columns."""
    found = []
    for rule, rows in _rules_on(card, metric).items():
        v = rows[0]
        if v.get("across") == across and v.get("reduce") == "max" and v.get("op") == "<=" \
                and not v.get("abs"):
            per_col = {str(r.get("cell")) for r in rows} <= set(cols)
            found.append((not per_col, float(v["bound"]), rule))
    return min(found)[1:] if found else None


def histograms(card: dict, dist: dict, spec: Histograms) -> list[dict]:
    """Per-item histograms (of ``spec.metrics`` in ``dist``) with one count axis, each with
    the floor the rules put on ``spec.bound_metric`` (e.g. its per-cell mean) and the
    items' mean."""
    out = []
    for m in spec.metrics:
        if m not in dist:
            continue
        h: dict[str, Any] = {"metric": m, **dist[m]}
        vs = [v for rows in _rules_on(card, spec.bound_metric.format(metric=m)).values()
              for v in rows if not v.get("across")]
        floors = sorted({float(v["bound"]) for v in vs})
        if len(floors) == 1:
            ops = {OP_TEXT.get(str(v.get("op")), "") for v in vs}
            h["ref"] = floors[0]
            h["ref_label"] = (f"rule: mean per cell {ops.pop() if len(ops) == 1 else ''} "
                              f"{floors[0]:.4g}").replace("  ", " ")
        out.append(h)
    ymax = max([max(h.get("counts") or [0]) for h in out] + [0])
    for h in out:
        h["ymax"] = ymax
    return out
