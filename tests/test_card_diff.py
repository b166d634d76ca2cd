"""Diff of two cards (baseline vs candidate): the verdicts that changed."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import USER, make_run  # noqa: E402

from fairness_tests.card.diff import diff_cards, render_diff_markdown, render_diff_terminal  # noqa: E402
from fairness_tests.card.fill import fill_card  # noqa: E402
from fairness_tests.run.metadata import Source  # noqa: E402


def _cards():
    return fill_card(make_run(), USER), fill_card(make_run(candidate=True), USER)


def test_changed_verdicts_are_classified():
    base, cand = _cards()
    d = diff_cards(base, cand)
    # the candidate fails F4 (0.07 > 0.05; baseline 0.046 passed) and passes F1 (0.04;
    # baseline 0.115 failed); the other 7 of the 9 verdicts are unchanged
    assert [(c.rule, c.cell, c.kind, c.before, c.after) for c in d.changes] == [
        ("worst_slice_stereotype_per_family", "F4", "regressed", "pass", "fail"),
        ("worst_slice_stereotype_per_family", "F1", "improved", "fail", "pass"),
    ]
    assert d.unchanged == 7
    assert [c.cell for c in d.regressions] == ["F4"]
    assert d.changes[0].value_before == 0.046 and d.changes[0].value_after == 0.07
    assert d.protocol_differences == []
    assert d.baseline.startswith("gemma-3-270m /")
    assert d.candidate.startswith("gemma-3-270m-candidate")


def test_identical_cards_have_no_change():
    base, _ = _cards()
    d = diff_cards(base, base)
    assert d.changes == [] and d.unchanged == 9 and d.regressions == []
    assert "No verdict changed." in render_diff_markdown(d)


def test_added_and_removed_verdicts_and_protocol_differences():
    full = fill_card(make_run(), USER)
    bbq_only = fill_card(make_run("bbq"), USER)
    d = diff_cards(bbq_only, full)
    added = [(c.rule, c.cell) for c in d.changes if c.kind == "added"]
    # the full run adds refusal_gap (1 cell) and the stereotype rule (4 cells)
    assert len(added) == 5 and ("refusal_gap", "overall") in added
    # an added failing verdict is a regression: F1, F2, F3 fail in the full run
    assert sorted(c.cell for c in d.regressions) == ["F1", "F2", "F3"]
    labels = [p[0] for p in d.protocol_differences]
    assert "generative suite hash" in labels and "decoding regimes" in labels
    back = diff_cards(full, bbq_only)
    assert {c.kind for c in back.changes} == {"removed"} and back.regressions == []


def test_markdown_and_terminal_forms():
    base, cand = _cards()
    cand["prompt_suite"]["suite_hash"] = "d" * 64
    d = diff_cards(base, cand)
    md = render_diff_markdown(d)
    assert ("| **REGRESSED** | worst_slice_stereotype_per_family | F4 "
            "| pass (0.046 [-0.004, 0.096])") in md
    assert "**Not the same protocol:**" in md and "generative suite hash" in md
    term = render_diff_terminal(d)
    assert "- regressed" in term and "+ improved" in term and "\033[" not in term
    assert "! protocol differs: generative suite hash" in term
    assert "\033[31m" in render_diff_terminal(d, color=True)


def test_answers_from_another_source_or_an_edited_rubric_are_protocol_differences():
    base = fill_card(make_run(), USER)
    theirs = make_run()
    theirs.metadata.mode = "scored"
    theirs.metadata.source = Source(kind="predictions", file="theirs.jsonl", sha256="e" * 64)
    edited = make_run()
    edited.metadata.infos["generative"].rubric_sha256 = "f" * 64
    d = diff_cards(base, fill_card(theirs, USER))
    assert ("where the answers came from", "audit", "predictions") in d.protocol_differences
    d = diff_cards(base, fill_card(edited, USER))
    assert [p[0] for p in d.protocol_differences] == ["scorer patterns sha256"]
    assert d.changes == []
