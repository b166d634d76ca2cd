"""The generative audit's sections of ``compare`` (:meth:`GenerativeFamily.compare_sections
<fairness_tests.pipeline.benchmark.Family.compare_sections>`), models as rows, every
number the row of the run's own table (``generative_by_slice``, ``generative_summary``):

- ``generative_slices``: every rate per slice; ``generative_worst``: the worst slice
  per prompt family; ``generative_disparity``: max - min over slices on the whole
  grid; ``refusal_gap``: overall and per family.

Figures: the refusal gap's dot plots, one row per model, and, per model, the two panels
of the generative position paper's Figure 1 (``bars_ref``): the max disparity across
slices of each rate on the whole grid, and the worst-slice stereotype rate per prompt
family, each against the 5% audit line.
"""
from __future__ import annotations

from collections.abc import Sequence

from fairness_tests.benchmarks.generative.schema import GENERATIVE_RATE_METRICS
from fairness_tests.pipeline.view_tables import (
    Column,
    dot_plots,
    lookup,
    models_table,
    point,
    section,
    values,
    worst,
)
from fairness_tests.pipeline.views import Compared, Figure, Section

WORST_FOCUS = ["stereotype", "demeaning", "pilot_harm", "refusal"]
AUDIT_LINE = 0.05


def sections(entries: Sequence[Compared]) -> list[Section]:
    """Per-slice rates, worst slice per family, disparity and refusal gap per model,
    with their figures."""
    out = generative_sections(entries)
    models = [e.name for e in entries]
    by_id = {s.id: s for s in out}
    if "refusal_gap" in by_id:
        by_id["refusal_gap"].figures.extend(dot_plots(by_id["refusal_gap"], models,
                                                      ["refusal_gap"]))
    if "generative_disparity" in by_id and "generative_worst" in by_id:
        by_id["generative_disparity"].figures.extend(
            figure1(by_id["generative_disparity"], by_id["generative_worst"], models))
    return out


def generative_sections(entries: Sequence[Compared]) -> list[Section]:
    """Per-slice rates, worst slice per family, disparity and refusal gap per model."""
    have = [e for e in entries if e.table("generative", "generative_summary") is not None]
    if not have:
        return []
    slices = sorted({s for e in have for s in values(e.table("generative",
                                                               "generative_by_slice"), "slice")})
    families = sorted({f for e in have for f in values(e.table("generative",
                                                                 "generative_summary"), "family")})
    sid = "generative_slices"
    slice_parts = [models_table(sid, m, have, "generative", "generative_by_slice",
                                [Column(s, s, m, dict(slice=s)) for s in slices])
                   for m in GENERATIVE_RATE_METRICS]
    sid = "generative_worst"
    worst_parts = [models_table(sid, f"worst-slice {m}", have, "generative",
                                "generative_summary",
                                [Column(f, f, f"worst_slice_{m}", dict(scope="family", family=f),
                                        worst) for f in families])
                   for m in WORST_FOCUS]
    disparity = [Column(m, "overall", f"disparity_{m}", dict(scope="overall"))
                 for m in GENERATIVE_RATE_METRICS]
    gap = [Column("overall", "overall", "refusal_gap", dict(scope="overall"))] + [
        Column(f, f, "refusal_gap", dict(scope="family", family=f)) for f in families]
    return [
        section("generative_slices", "Generative: rates per slice",
                "Share of the successful generations of each slice that the rubric flags, "
                "with the run's 95% interval (the whole grid pooled).", slice_parts),
        section("generative_worst", "Generative: worst slice per prompt family",
                "The slice with the highest rate in each family: rate (slice).", worst_parts),
        section("generative_disparity", "Generative: slice disparity on the whole grid",
                "max - min over slices of each rate, the grid pooled, with the run's "
                "bootstrap interval (a max-type statistic: its interval is not a test of "
                "no difference).",
                [models_table("generative_disparity", "disparity (max - min over slices)",
                              have, "generative", "generative_summary", disparity)]),
        section("refusal_gap", "Generative: refusal gap",
                "max over slice pairs |P(refusal | g) - P(refusal | g')|, overall and per "
                "prompt family.",
                [models_table("refusal_gap", "refusal gap", have, "generative",
                              "generative_summary", gap)]),
    ]


def figure1(disparity: Section, worst_sec: Section, models: list[str]) -> list[Figure]:
    """Per model: max disparity across slices per rate metric (whole grid) and the
    worst-slice stereotype rate per prompt family, each with the 5% line."""
    out = []
    families = list(dict.fromkeys(r["cell"] for r in worst_sec.long
                                  if r["metric"] == "worst_slice_stereotype"))
    for name in models:
        if not any(r["model"] == name for r in disparity.long):
            continue
        bars = [point(m, lookup(disparity.long, name, "overall", f"disparity_{m}"))
                for m in GENERATIVE_RATE_METRICS]
        out.append(Figure("bars_ref", {
            "title": f"{name}: max disparity across slices", "bars": bars, "ref": AUDIT_LINE,
            "ref_label": "5% audit line", "width": 480, "kind": "figure1_disparity"}))
        bars = [point(f, lookup(worst_sec.long, name, f, "worst_slice_stereotype"))
                for f in families]
        out.append(Figure("bars_ref", {
            "title": f"{name}: worst-slice stereotype per family", "bars": bars,
            "ref": AUDIT_LINE, "ref_label": "5% audit line", "width": 480,
            "kind": "figure1_worst_slice"}))
    return out
