"""The user cache of parsed inputs (issue 24): the BBQ items are parsed and filtered once
per content of their files and per version of the code that parses them, never served
stale, and a broken or unwritable cache only costs the parse."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fairness_tests.benchmarks.bbq.data import load_bbq, load_filtered
from fairness_tests.benchmarks.bbq.filter import filter_items
from fairness_tests.core import cache as C

BBQ = Path(__file__).resolve().parents[1].parent / "shared" / "bbq"
needs_bbq = pytest.mark.skipif(not (BBQ / "Race_x_SES.jsonl").exists(),
                               reason="../shared/bbq not present")


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(C.ENV_CACHE, str(tmp_path / "cache"))
    monkeypatch.delenv(C.ENV_INPUT_CACHE, raising=False)
    return tmp_path / "cache"


def test_cached_builds_once_per_key_and_recovers_from_a_broken_entry(root, monkeypatch):
    calls = []

    def build(v):
        return lambda: calls.append(v) or {"v": v}

    assert C.cached("k", {"a": 1}, build(1)) == {"v": 1}
    assert C.cached("k", {"a": 1}, build(2)) == {"v": 1}          # read back
    assert C.cached("k", {"a": 2}, build(3)) == {"v": 3}          # another key
    assert calls == [1, 3]
    entry = C.entry_path("k", {"a": 1})
    assert entry.parent == root / "k" and entry.exists()
    entry.write_bytes(b"not a pickle")                              # broken: rebuilt
    assert C.cached("k", {"a": 1}, build(4)) == {"v": 4} and calls[-1] == 4
    monkeypatch.setenv(C.ENV_INPUT_CACHE, "off")                    # off: always built
    assert C.cached("k", {"a": 1}, build(5)) == {"v": 5} and calls[-1] == 5


def test_an_unwritable_cache_only_costs_the_build(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv(C.ENV_CACHE, str(blocker))
    assert C.cached("k", {"a": 1}, lambda: 7) == 7
    assert blocker.read_text().startswith("a file")


def test_code_digest_follows_every_file(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"1")
    d1 = C.code_digest(tmp_path / "pkg")
    (tmp_path / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"2")   # ignored
    assert C.code_digest(tmp_path / "pkg") == d1
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert C.code_digest(tmp_path / "pkg") != d1


@needs_bbq
def test_load_filtered_is_load_and_filter_cold_and_warm_and_never_stale(root, tmp_path):
    data = load_bbq(BBQ)
    kept = filter_items(data.items, "intersectional")
    for _ in range(2):                                   # cold (parses), then warm (reads)
        d, k = load_filtered(BBQ, filter="intersectional")
        pd.testing.assert_frame_equal(d.items, data.items)
        pd.testing.assert_frame_equal(k, kept)
        assert (d.sha256, d.blob, d.target_loc, d.notes, d.directory) == \
            (data.sha256, data.blob, data.target_loc, data.notes, data.directory)
    assert len(list((root / "bbq-items").glob("*.pickle"))) == 1
    # the same files elsewhere: the same entry, the new directory named
    copy = tmp_path / "bbq"
    shutil.copytree(BBQ, copy)
    os.chmod(copy / "Race_x_SES.jsonl", 0o644)
    d, _ = load_filtered(copy, filter="intersectional")
    assert d.directory == copy and len(list((root / "bbq-items").glob("*.pickle"))) == 1
    # one question changed in the copy: a new entry that holds the change
    lines = (copy / "Race_x_SES.jsonl").read_text(encoding="utf-8").splitlines(True)
    first = lines[0]
    changed = first.replace('"question": "', '"question": "CHANGED ', 1)
    assert changed != first
    (copy / "Race_x_SES.jsonl").write_text(changed + "".join(lines[1:]), encoding="utf-8")
    ses = ("Race_x_SES",)
    d, _ = load_filtered(copy, ses, filter="none")
    assert d.items["question"].iloc[0].startswith("CHANGED ")
    assert len(list((root / "bbq-items").glob("*.pickle"))) == 2
