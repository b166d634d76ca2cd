"""The committed card of the embedded model (``docs/cards/embedded-gemma-3-270m/``) is
what the main job writes today, byte for byte: its tables, its YAML and its Markdown.

The main job is run here as a user runs it, ``fairness-tests audit`` with no protocol
option (the session's ``replay`` leaves the probe out), once per session on a copy of the
recorded store (the ``main_job`` fixture of tests/conftest.py, which tests/test_compare.py
and tests/test_one_pipeline.py share). The one line that may differ is where the answers
were replayed from (the test's store is a copy in a temporary directory; the main job's
is ``.fairness/store.sqlite``). When this fails after an intended change, regenerate the
card and review the diff::

    fairness-tests audit --out /tmp/r && cp -r /tmp/r/card/. docs/cards/embedded-gemma-3-270m/
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

COMMITTED = Path(__file__).resolve().parents[1] / "docs" / "cards" / "embedded-gemma-3-270m"
REGENERATE = ("regenerate it: fairness-tests audit --out /tmp/r && "
              "cp -r /tmp/r/card/. docs/cards/embedded-gemma-3-270m/")


@pytest.fixture(scope="module")
def card(main_job) -> Path:
    """The card directory of ``fairness-tests audit`` with its defaults (the session's
    ``main_job``, tests/conftest.py)."""
    return main_job.card


def _store_neutral(text: str) -> str:
    """The store path, wherever the replay read it from, as one placeholder; white space
    runs as one space (YAML folds a long line where the path's length puts the break)."""
    return " ".join(re.sub(r"response store\s+\S+", "response store STORE", text).split())


@pytest.mark.parametrize("name", sorted(p.name for p in (COMMITTED / "tables").glob("*.csv")))
def test_committed_card_tables_are_the_main_jobs(card, name):
    mine = (card / "tables" / name).read_bytes()
    assert mine == (COMMITTED / "tables" / name).read_bytes(), f"tables/{name}: {REGENERATE}"


def test_committed_card_has_every_table_the_main_job_writes(card):
    mine = sorted(p.name for p in (card / "tables").glob("*.csv"))
    assert mine == sorted(p.name for p in (COMMITTED / "tables").glob("*.csv")), REGENERATE


def _first_difference(mine: str, committed: str) -> str:
    """Where two texts first differ, with 120 characters of each around it (pytest's own
    diff of two texts this long runs for minutes, past the test's time limit)."""
    i = next((k for k, (a, b) in enumerate(zip(mine, committed, strict=False)) if a != b),
             min(len(mine), len(committed)))
    return (f"first difference at character {i}: the main job writes "
            f"{mine[max(0, i - 40):i + 80]!r}, the committed card has "
            f"{committed[max(0, i - 40):i + 80]!r}")


def test_first_difference_names_the_place():
    assert _first_difference("abcXef", "abcYef").startswith("first difference at character 3")
    assert "character 2" in _first_difference("ab", "abc")


@pytest.mark.parametrize("name", ["card.md", "card.yaml"])
def test_committed_card_text_is_the_main_jobs(card, name):
    mine = _store_neutral((card / name).read_text())
    committed = _store_neutral((COMMITTED / name).read_text())
    same = mine == committed
    assert same, f"{name}: {_first_difference(mine, committed)}; {REGENERATE}"
