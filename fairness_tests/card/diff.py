"""Compare two Fairness Cards (baseline vs candidate): which verdicts changed.

A verdict is identified by (rule, cell). Kinds of change:

- ``regressed``: the candidate fails where the baseline did not, or a passing
  verdict became not evaluable / expected-fail;
- ``improved``: the baseline failed and the candidate does not;
- ``changed``: any other status change (e.g. not_evaluable -> expected_fail);
- ``added`` / ``removed``: the (rule, cell) exists in one card only
  (an added failing verdict also counts as a regression).

The diff also lists the protocol facts that differ (where the answers came from,
suite hash, prompt templates, data sha256, filter, rotations, rubric and its sha256,
decoding, seeds, repeats, threshold files): when they differ, the two cards do not
measure the same thing and a verdict change may be the protocol's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fairness_tests.card.values import ci, num
from fairness_tests.card.values import get_path as _get
from fairness_tests.pipeline.benchmark import ranked_families

#: the facts every card records that two cards must share (``card path``, label)
SHARED = (
    ("evaluation_protocol.source.kind", "where the answers came from"),
    ("prompt_suite.families", "prompt families and templates"),
    ("scorer.patterns_file", "scorer patterns"),
    ("scorer.patterns_sha256", "scorer patterns sha256"),
    ("decoding.regimes", "decoding regimes"),
)
THRESHOLDS = ("evaluation_protocol.thresholds.files", "threshold files")


def comparability() -> tuple[tuple[str, str], ...]:
    """Every fact two cards must share: the shared ones, each family's
    (:meth:`~fairness_tests.pipeline.benchmark.Family.card_comparability`, in
    ``card_rank`` order), then the threshold files."""
    return (*SHARED, *(fact for _, family in ranked_families()
                       for fact in family.card_comparability()), THRESHOLDS)


@dataclass(frozen=True)
class VerdictChange:
    rule: str
    cell: str
    kind: str
    before: str | None
    after: str | None
    value_before: Any = None
    value_after: Any = None
    ci_before: str = ""
    ci_after: str = ""


@dataclass
class CardDiff:
    baseline: str
    candidate: str
    changes: list[VerdictChange] = field(default_factory=list)
    unchanged: int = 0
    protocol_differences: list[tuple[str, Any, Any]] = field(default_factory=list)
    rule_outcomes: list[tuple[str, str | None, str | None]] = field(default_factory=list)

    @property
    def regressions(self) -> list[VerdictChange]:
        return [c for c in self.changes
                if c.kind == "regressed" or (c.kind == "added" and c.after == "fail")]


def _name(card: dict) -> str:
    s = card.get("system") or {}
    parts = [str(s.get("name") or "?")]
    if s.get("version"):
        parts.append(str(s["version"]))
    if card.get("evaluation_date"):
        parts.append(str(card["evaluation_date"]))
    return " / ".join(parts)


def _kind(before: str, after: str) -> str:
    if after == "fail" and before != "fail":
        return "regressed"
    if before == "pass" and after in ("not_evaluable", "expected_fail"):
        return "regressed"
    if before == "fail" and after != "fail":
        return "improved"
    return "changed"


def diff_cards(baseline: dict, candidate: dict) -> CardDiff:
    d = CardDiff(_name(baseline), _name(candidate))
    va = {(str(v.get("rule")), str(v.get("cell", ""))): v for v in baseline.get("verdicts") or []}
    vb = {(str(v.get("rule")), str(v.get("cell", ""))): v for v in candidate.get("verdicts") or []}
    for key in sorted(set(va) | set(vb)):
        a, b = va.get(key), vb.get(key)
        if a is not None and b is not None:
            sa, sb = a.get("status"), b.get("status")
            if sa == sb:
                d.unchanged += 1
                continue
            kind = _kind(sa, sb)
        else:
            kind = "added" if a is None else "removed"
        d.changes.append(VerdictChange(
            key[0], key[1], kind, a and a.get("status"), b and b.get("status"),
            a and a.get("value"), b and b.get("value"),
            ci(a.get("ci_low"), a.get("ci_high")) if a else "",
            ci(b.get("ci_low"), b.get("ci_high")) if b else ""))
    order = {"regressed": 0, "added": 1, "removed": 2, "changed": 3, "improved": 4}
    d.changes.sort(key=lambda c: (order[c.kind], c.rule, c.cell))
    ra = {r.get("id", r.get("rule")): r.get("outcome")
          for r in baseline.get("decision_rules") or []}
    rb = {r.get("id", r.get("rule")): r.get("outcome")
          for r in candidate.get("decision_rules") or []}
    d.rule_outcomes = [(str(k), ra.get(k), rb.get(k)) for k in sorted(set(ra) | set(rb), key=str)
                       if ra.get(k) != rb.get(k)]
    for path, label in comparability():
        x, y = _get(baseline, path), _get(candidate, path)
        if x != y:
            d.protocol_differences.append((label, x, y))
    return d


def _short(x: Any) -> str:
    s = num(x) if not isinstance(x, (dict, list)) else str(x)
    return s if len(s) <= 40 else s[:37] + "..."


def render_diff_markdown(d: CardDiff) -> str:
    def esc(s: Any) -> str:
        return str(s).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")

    lines = ["# Fairness Card diff", "",
             f"- **Baseline:** {esc(d.baseline)}", f"- **Candidate:** {esc(d.candidate)}",
             f"- **Verdicts:** {len(d.changes)} changed ({len(d.regressions)} regression(s)), "
             f"{d.unchanged} unchanged", ""]
    if d.protocol_differences:
        lines += ["> **Not the same protocol:** the cards differ in "
                  + ", ".join(esc(p[0]) for p in d.protocol_differences)
                  + "; a verdict change may come from the protocol, not the model.", ""]
        lines += ["| protocol fact | baseline | candidate |", "|---|---|---|"]
        lines += [f"| {esc(fact)} | {esc(_short(a))} | {esc(_short(b))} |"
                  for fact, a, b in d.protocol_differences] + [""]
    if d.rule_outcomes:
        lines += ["## Decision rules whose outcome changed", "", "| rule | baseline | candidate |",
                  "|---|---|---|"]
        lines += [f"| {esc(r)} | {esc(a or '—')} | {esc(b or '—')} |"
                  for r, a, b in d.rule_outcomes]
        lines.append("")
    if d.changes:
        lines += ["## Verdicts that changed", "",
                  "| change | rule | cell | baseline | candidate |", "|---|---|---|---|---|"]
        for c in d.changes:
            mark = {"regressed": "**REGRESSED**", "improved": "improved"}.get(c.kind, c.kind)
            before = f"{c.before} ({num(c.value_before)} {c.ci_before})" if c.before else "—"
            after = f"{c.after} ({num(c.value_after)} {c.ci_after})" if c.after else "—"
            lines.append(f"| {mark} | {esc(c.rule)} | {esc(c.cell)} | {esc(before)} | "
                         f"{esc(after)} |")
        lines.append("")
    else:
        lines += ["No verdict changed.", ""]
    return "\n".join(lines)


def render_diff_terminal(d: CardDiff, color: bool = False) -> str:
    red, green, yellow, bold, reset = (("\033[31m", "\033[32m", "\033[33m", "\033[1m", "\033[0m")
                                       if color else ("", "", "", "", ""))
    out = [f"{bold}Fairness Card diff{reset}", f"  baseline : {d.baseline}",
           f"  candidate: {d.candidate}",
           f"  verdicts : {len(d.changes)} changed, {len(d.regressions)} regression(s), "
           f"{d.unchanged} unchanged"]
    for label, a, b in d.protocol_differences:
        out.append(f"  {yellow}! protocol differs: {label}: {_short(a)} -> {_short(b)}{reset}")
    for r, a, b in d.rule_outcomes:
        out.append(f"  rule {r}: {a or '-'} -> {b or '-'}")
    if d.changes:
        w_rule = max(len(c.rule) for c in d.changes)
        w_cell = max(len(c.cell) for c in d.changes)
        for c in d.changes:
            col = {"regressed": red, "improved": green}.get(c.kind, yellow)
            if c.kind == "added" and c.after == "fail":
                col = red
            sign = {"regressed": "-", "improved": "+"}.get(c.kind, "~")
            out.append(f"  {col}{sign} {c.kind:<9} {c.rule:<{w_rule}}  {c.cell:<{w_cell}}  "
                       f"{c.before or '-'} ({num(c.value_before)}) -> "
                       f"{c.after or '-'} ({num(c.value_after)}){reset}")
    else:
        out.append("  no verdict changed")
    return "\n".join(out) + "\n"
