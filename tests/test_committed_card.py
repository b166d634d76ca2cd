"""The committed card of the embedded model (``docs/cards/embedded-gemma-3-270m/``) is
what the main job writes today, byte for byte: its tables, its YAML and its Markdown.

The main job is run here as a user runs it, ``fairness-tests audit`` with no protocol
option (the session's ``replay`` leaves the probe out), once per session on a copy of the
recorded store. The one line that may differ is where the answers were replayed from
(the test's store is a copy in a temporary directory; the main job's is
``.fairness/store.sqlite``). When this fails after an
intended change, regenerate the card and review the diff::

    fairness-tests audit --out /tmp/r && cp -r /tmp/r/card/. docs/cards/embedded-gemma-3-270m/
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import copy_store

from conftest import once
from fairness_tests.cli.main import main

COMMITTED = Path(__file__).resolve().parents[1] / "docs" / "cards" / "embedded-gemma-3-270m"
REGENERATE = ("regenerate it: fairness-tests audit --out /tmp/r && "
              "cp -r /tmp/r/card/. docs/cards/embedded-gemma-3-270m/")


@pytest.fixture(scope="module")
def main_job(tmp_path_factory, recorded_store) -> Path:
    """The card directory of ``fairness-tests audit`` with its defaults."""
    def build(d: Path) -> None:
        store = copy_store(recorded_store, d / "store.sqlite")
        rc = main(["audit", "-q", "--out", str(d / "report"), "--store", str(store)])
        assert rc == 0, f"the main job exited {rc}"

    return once(tmp_path_factory, "main-job", {"argv": "audit"}, build) / "report" / "card"


def _store_neutral(text: str) -> str:
    """The store path, wherever the replay read it from, as one placeholder; white space
    runs as one space (YAML folds a long line where the path's length puts the break)."""
    return " ".join(re.sub(r"response store\s+\S+", "response store STORE", text).split())


@pytest.mark.parametrize("name", sorted(p.name for p in (COMMITTED / "tables").glob("*.csv")))
def test_committed_card_tables_are_the_main_jobs(main_job, name):
    mine = (main_job / "tables" / name).read_bytes()
    assert mine == (COMMITTED / "tables" / name).read_bytes(), f"tables/{name}: {REGENERATE}"


def test_committed_card_has_every_table_the_main_job_writes(main_job):
    mine = sorted(p.name for p in (main_job / "tables").glob("*.csv"))
    assert mine == sorted(p.name for p in (COMMITTED / "tables").glob("*.csv")), REGENERATE


@pytest.mark.parametrize("name", ["card.md", "card.yaml"])
def test_committed_card_text_is_the_main_jobs(main_job, name):
    mine = _store_neutral((main_job / name).read_text())
    assert mine == _store_neutral((COMMITTED / name).read_text()), f"{name}: {REGENERATE}"
