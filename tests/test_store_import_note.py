"""A recording already imported is not read again (issue 24): the store notes the file's
sha256 after an import that checked every key; a changed file or a prune reads it again."""
from __future__ import annotations

import gzip
import json

import fairness_tests.models.store.store_jsonl as sj
from fairness_tests.core.io import sha256_file
from fairness_tests.models.backends.cost import StoredStatuses, still_to_ask
from fairness_tests.models.requests.request import Decoding, Request, Response, chat
from fairness_tests.models.store.store import ResponseStore


def req(i: int) -> Request:
    return Request(messages=chat("sys", f"question {i}"), decoding=Decoding(0.7, 0.9, 8),
                   seed=1, repeat=i, backend="litellm", model="m1", kind="choice",
                   choices=("a", "b"))


def _recording(tmp_path, n=4):
    src = ResponseStore(tmp_path / "src.sqlite")
    for i in range(n):
        src.put(req(i), Response(key="", text="(a)", answer=0))
    path = tmp_path / "rec.jsonl.gz"
    src.export_jsonl(path)
    src.close()
    return path


def test_a_second_import_reads_only_the_note(tmp_path, monkeypatch):
    path = _recording(tmp_path)
    store = ResponseStore(tmp_path / "s.sqlite")
    assert store.import_jsonl(path) == {"added": 4, "replaced": 0, "skipped": 0}
    note = store._execute("SELECT value FROM store_info WHERE name = ?",
                          (f"imported:{sha256_file(path)}",)).fetchone()
    assert note == ("4",)
    # the file is not parsed again: a reader that fails proves it

    def boom(_path):
        raise AssertionError("read again")
    monkeypatch.setattr(sj, "read_jsonl", boom)
    assert store.import_jsonl(path) == {"added": 0, "replaced": 0, "skipped": 4}
    store.close()


def test_a_changed_file_is_read_and_checked_again(tmp_path):
    path = _recording(tmp_path)
    store = ResponseStore(tmp_path / "s.sqlite")
    store.import_jsonl(path)
    lines = gzip.open(path, "rt").read().splitlines()
    rec = json.loads(lines[0])
    rec["request"]["seed"] = 99                     # edited: the key no longer matches
    lines[0] = json.dumps(rec)
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    try:
        store.import_jsonl(path)
    except Exception as exc:  # noqa: BLE001  the DataError naming the line
        assert "line 1" in str(exc) and "key does not match" in str(exc)
    else:
        raise AssertionError("an edited record was accepted")
    store.close()


def test_prune_forgets_the_notes_and_a_reimport_restores_the_rows(tmp_path):
    path = _recording(tmp_path)
    store = ResponseStore(tmp_path / "s.sqlite")
    store.import_jsonl(path)
    assert store.prune(model="m1", vacuum=False) == 4
    assert store.import_jsonl(path) == {"added": 4, "replaced": 0, "skipped": 0}
    assert store.get(req(2).key()).text == "(a)"
    store.close()


def test_statuses_equal_the_full_rows_statuses(tmp_path):
    """What the dry run counts with: the stored statuses, as the full rows give them."""
    store = ResponseStore(tmp_path / "s.sqlite")
    for i in range(1200):                       # more than one 500-key query
        store.put(req(i), Response(key="", text="(a)", answer=0,
                                   status="error" if i % 7 == 0 else "ok"))
    keys = [req(i).key() for i in range(1300)]  # 100 never stored
    full = {k: r.status for k, r in store.get_many(keys).items()}
    assert store.statuses(keys) == full
    assert len(full) == 1200 and sum(s == "error" for s in full.values()) == 172
    assert store.missing([req(i) for i in range(1300)], retry_errors=True) == \
        [req(i) for i in range(1300) if i >= 1200 or i % 7 == 0]
    store.close()


def test_the_dry_runs_status_cache_answers_as_the_store(tmp_path):
    """``StoredStatuses`` (the dry run's) gives the store's statuses for any key set,
    each key read from the store once."""
    store = ResponseStore(tmp_path / "s.sqlite")
    for i in range(30):
        store.put(req(i), Response(key="", text="(a)", answer=0,
                                   status="error" if i % 4 == 0 else "ok"))
    cache = StoredStatuses(store)
    for lo, hi in ((0, 20), (10, 40), (0, 40)):
        keys = [req(i).key() for i in range(lo, hi)]
        assert cache.statuses(keys) == store.statuses(keys)
        reqs = [req(i) for i in range(lo, hi)]
        assert still_to_ask(reqs, cache) == still_to_ask(reqs, store)
    store.prune(model="m1", vacuum=False)          # read once: the cache still holds them
    assert len(cache.statuses([req(i).key() for i in range(40)])) == 30
    store.close()
