"""The verdict summary every judging command prints (``audit``, ``bbq score``,
``generative score``) and the exit code it implies.

Exit code (:class:`~fairness_tests.core.exits.ExitCode`): ``RULE_FAILED`` when a rule
fails in some cell or a declared expected failure passes (as pytest's strict xfail);
``NOTHING_EVALUATED`` when no rule was evaluated in any cell (every verdict is not
evaluable, or there is none); ``OK`` otherwise.
"""
from __future__ import annotations

import pandas as pd

from fairness_tests.core.exits import ExitCode
from fairness_tests.core.fmt import json_value
from fairness_tests.rules.evaluate import worst_cells

#: the summary's last line: what its columns mean
LEGEND = ("xfail: a declared expected failure that failed as declared (does not fail the "
          "run); n/e: not evaluable (too few items or an undefined value; the reason is in "
          "verdicts.csv and on the card)")
#: statuses of a rule that was evaluated in a cell
EVALUATED = ("pass", "fail", "expected_fail")


def unexpected_passes(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Verdict rows that pass although the rule declares an expected failure for them."""
    return verdicts[(verdicts["status"] == "pass")
                    & verdicts["why"].astype(str).str.contains("declared expected_fail",
                                                               regex=False)]


def verdict_exit(verdicts: pd.DataFrame | None) -> ExitCode:
    """RULE_FAILED, NOTHING_EVALUATED or OK (the module's docstring)."""
    if verdicts is None or not len(verdicts):
        return ExitCode.NOTHING_EVALUATED
    if (verdicts["status"] == "fail").any() or len(unexpected_passes(verdicts)):
        return ExitCode.RULE_FAILED
    if not verdicts["status"].isin(EVALUATED).any():
        return ExitCode.NOTHING_EVALUATED
    return ExitCode.OK


def _worst(g: pd.DataFrame, rule: str) -> str:
    bad = worst_cells(g[g["status"].isin(["fail", "expected_fail"])], rule, k=1)
    if not len(bad):
        return ""
    r = bad.iloc[0]
    val = json_value(r[r["compared"]])
    worst = f"{r['cell']}: {r['compared']} {val:.3g}" if isinstance(val, float) \
        else f"{r['cell']}"
    return worst + f" ({r['op']} {r['bound']})"


def verdict_summary(verdicts: pd.DataFrame | None) -> str:
    """One line per rule: how many cells pass / fail / expected_fail / not evaluable,
    and the worst failing cell (furthest on the wrong side of the bound, in the rule's
    own direction); then every declared expected failure that passed, the legend, and
    a line when nothing was evaluated."""
    v = verdicts
    if v is None or not len(v):
        return "nothing was evaluated: no decision rule applies to this run"
    lines = [f"{'rule':38} {'pass':>5} {'fail':>5} {'xfail':>5} {'n/e':>5}  worst failing cell"]
    for rule, g in v.groupby("rule", sort=False):
        counts = g["status"].value_counts()
        lines.append(f"{rule:38} {counts.get('pass', 0):>5} {counts.get('fail', 0):>5} "
                     f"{counts.get('expected_fail', 0):>5} {counts.get('not_evaluable', 0):>5}  "
                     f"{_worst(g, str(rule))}")
    for _, r in unexpected_passes(v).iterrows():
        lines.append(f"error: {r['rule']} {r['cell']} is declared an expected failure but "
                     "passed: remove the declaration (or the model regressed back)")
    lines.append(LEGEND)
    if verdict_exit(v) == ExitCode.NOTHING_EVALUATED:
        lines.append("nothing was evaluated: every rule is not evaluable here (see the "
                     "reasons in verdicts.csv)")
    return "\n".join(lines)


def judge_incomplete(metadata) -> str | None:
    """The judge's "incomplete: N of M judge requests ..." note when any judge request of
    the run ended in an error (the scores lack them: the run is incomplete), else None.
    The scorers are those any benchmark's info lists (its ``scorers``)."""
    scorers = [s for info in (getattr(metadata, "infos", None) or {}).values()
               for s in getattr(info, "scorers", None) or ()]
    for s in scorers:
        if s.get("kind") == "judge" and s.get("failed"):
            return next((n for n in s.get("notes") or () if n.startswith("incomplete:")),
                        f"incomplete: {s['failed']} judge requests ended in an error "
                        f"(first: {s.get('first_error')})")
    return None


def _counts(metadata) -> dict[str, dict]:
    asking = getattr(metadata, "asking", None)
    return dict(getattr(asking, "counts", None) or {})


def incomplete(metadata) -> tuple[int, int, str | None]:
    """``(failed, requests, first error)`` of a run's asking (0, n, None when complete;
    a run without counts, such as a scored one, is complete)."""
    counts = _counts(metadata)
    failed = sum(int(c.get("failed") or 0) for c in counts.values())
    total = sum(int(c.get("requests") or 0) for c in counts.values())
    first = next((c.get("first_error") for c in counts.values() if c.get("failed")), None)
    return failed, total, first


def asking_lines(metadata) -> list[str]:
    """One line: per protocol, the requests sent, answered from the store and failed."""
    counts = _counts(metadata)
    if not counts:
        return []
    return ["requests: " + "; ".join(
        f"{name} {c.get('requests', 0)} ({c.get('sent', 0)} sent, {c.get('from_store', 0)} "
        f"from the store, {c.get('failed', 0)} failed)" for name, c in counts.items())]


def verdict_counts(verdicts: pd.DataFrame | None) -> dict:
    """``{"rules": {rule: {status: cells}}, "status": {status: cells}}`` (JSON-ready)."""
    if verdicts is None or not len(verdicts):
        return {"rules": {}, "status": {}}
    rules = {str(rule): {str(k): int(n) for k, n in g["status"].value_counts().items()}
             for rule, g in verdicts.groupby("rule", sort=False)}
    return {"rules": rules,
            "status": {str(k): int(n) for k, n in verdicts["status"].value_counts().items()}}
