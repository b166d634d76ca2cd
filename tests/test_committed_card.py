"""The committed card of the embedded model (``docs/cards/embedded-gemma-3-270m/``) is
what the main job writes today, byte for byte: its tables, its YAML and its Markdown.

The main job is the session's one replay run (``replay`` in tests/conftest.py:
``fairness-tests audit`` on the committed recordings). The one line that may differ is
where the answers were replayed from (the test's store is a copy in a temporary
directory; the main job's is ``.fairness/store.sqlite``). When this fails after an
intended change, regenerate the card and review the diff::

    fairness-tests audit --out /tmp/r && cp -r /tmp/r/card/. docs/cards/embedded-gemma-3-270m/
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

COMMITTED = Path(__file__).resolve().parents[1] / "docs" / "cards" / "embedded-gemma-3-270m"
REGENERATE = ("regenerate it: fairness-tests audit --out /tmp/r && "
              "cp -r /tmp/r/card/. docs/cards/embedded-gemma-3-270m/")


def _store_neutral(text: str) -> str:
    """The store path, wherever the replay read it from, as one placeholder."""
    return re.sub(r"response store \S+", "response store STORE", text)


@pytest.mark.parametrize("name", sorted(p.name for p in (COMMITTED / "tables").glob("*.csv")))
def test_committed_card_tables_are_the_main_jobs(replay, name):
    mine = (replay.card / "tables" / name).read_bytes()
    assert mine == (COMMITTED / "tables" / name).read_bytes(), f"tables/{name}: {REGENERATE}"


def test_committed_card_has_every_table_the_main_job_writes(replay):
    mine = sorted(p.name for p in (replay.card / "tables").glob("*.csv"))
    assert mine == sorted(p.name for p in (COMMITTED / "tables").glob("*.csv")), REGENERATE


@pytest.mark.parametrize("name", ["card.md", "card.yaml"])
def test_committed_card_text_is_the_main_jobs(replay, name):
    mine = _store_neutral((replay.card / name).read_text())
    assert mine == _store_neutral((COMMITTED / name).read_text()), f"{name}: {REGENERATE}"
