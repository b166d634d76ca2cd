"""The SQLite response store: rows, leases, JSONL round trip, secrets, stats, prune."""
from __future__ import annotations

import gzip
import json
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
from helpers import req as make_req

from fairness_tests.core.errors import DataError
from fairness_tests.models.requests.request import Decoding, Request, Response
from fairness_tests.models.store.scrub import scrub, scrub_text
from fairness_tests.models.store.store import ResponseStore


def req(i: int, model: str = "m1", **kw) -> Request:
    """The shared request (tests/helpers.py) with a system prompt, decoding, seed and
    a repeat that cycles 0-2."""
    return make_req(i, system="sys", decoding=Decoding(0.7, 0.9, 8), seed=1, repeat=i % 3,
                    model=model, api_base="http://127.0.0.1:9/v1", **kw)


def test_put_get_round_trip_keeps_every_field(store):
    r = req(1)
    resp = Response(key=r.key(), text="(b)", answer=1, letter_probs=[0.2, 0.5, 0.3],
                    prompt_tokens=12, completion_tokens=2, latency_s=0.25, cost_usd=0.001,
                    status="ok", error="")
    store.put(r, resp)
    got = store.get(r.key())
    assert got == resp
    assert store.meta(r.key()) == {"item": 1}
    assert store.get("nope") is None
    assert len(store) == 1


def test_wal_mode_and_schema(store):
    mode = sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_missing_and_error_rows(store):
    rs = [req(i) for i in range(4)]
    store.put(rs[0], Response(key="", text="a", status="ok"))
    store.put(rs[1], Response(key="", status="error", error="boom"))
    assert {r.key() for r in store.missing(rs)} == {rs[2].key(), rs[3].key()}
    assert {r.key() for r in store.missing(rs, retry_errors=True)} == \
        {rs[1].key(), rs[2].key(), rs[3].key()}


def test_response_for_another_request_is_rejected(store):
    with pytest.raises(DataError, match="does not belong"):
        store.put(req(1), Response(key=req(2).key()))
    with pytest.raises(DataError, match="unknown status"):
        store.put(req(1), Response(key="", status="weird"))


def test_claim_is_exclusive_between_owners(tmp_path):
    a = ResponseStore(tmp_path / "s.sqlite")
    b = ResponseStore(tmp_path / "s.sqlite")
    keys = [req(i).key() for i in range(6)]
    got_a = a.claim(keys[:4])
    got_b = b.claim(keys)
    assert got_a == keys[:4]
    assert got_b == keys[4:]                       # never the ones a holds
    assert b.leased_by_others(keys) == set(keys[:4])
    a.put(req(0), Response(key="", text="x"))      # storing releases the lease
    assert b.claim(keys) == keys[4:]               # stored key is not claimable either
    a.release()
    assert set(b.claim(keys)) == set(keys[1:])
    a.close()
    b.close()


def test_expired_lease_can_be_taken(tmp_path):
    a = ResponseStore(tmp_path / "s.sqlite", lease_s=0.05)
    b = ResponseStore(tmp_path / "s.sqlite")
    k = req(1).key()
    assert a.claim([k]) == [k]
    assert b.claim([k]) == []
    time.sleep(0.1)
    assert b.claim([k]) == [k]
    a.close()
    b.close()


def test_lease_of_dead_process_lapses_at_once(tmp_path):
    path = tmp_path / "s.sqlite"
    k = req(1).key()
    code = ("import sys; from fairness_tests.models.store.store import ResponseStore; "
            f"s=ResponseStore({str(path)!r}, lease_s=3600); print(s.claim([{k!r}]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert k in out                                 # the child held it for an hour...
    # ...but its close() released it; plant a lease for a dead pid to test the liveness check
    con = sqlite3.connect(path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=60)
    con.execute("INSERT OR REPLACE INTO leases VALUES (?,?,?)",
                (k, f"{socket.gethostname()}:{dead.pid}:abcd", time.time() + 3600))
    con.commit()
    con.close()
    s = ResponseStore(path)
    assert s.leased_by_others([k]) == set()
    assert s.claim([k]) == [k]
    s.close()


def test_export_import_round_trip_sorted_and_deterministic(tmp_path, store):
    rs = [req(i) for i in range(5)]
    for i, r in enumerate(rs):
        store.put(r, Response(key="", text=f"({'abc'[i % 3]})", answer=i % 3,
                              prompt_tokens=i, status="ok"))
    p1, p2 = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    assert store.export_jsonl(p1) == 5
    store.export_jsonl(p2)
    assert p1.read_bytes() == p2.read_bytes()       # same content, same bytes (mtime 0)
    lines = gzip.open(p1, "rt").read().splitlines()
    keys = [json.loads(x)["key"] for x in lines]
    assert keys == sorted(r.key() for r in rs)
    other = ResponseStore(tmp_path / "o.sqlite")
    assert other.import_jsonl(p1) == {"added": 5, "replaced": 0, "skipped": 0}
    assert other.import_jsonl(p1) == {"added": 0, "replaced": 0, "skipped": 5}
    for r in rs:
        assert other.get(r.key()) == store.get(r.key())
    plain = tmp_path / "c.jsonl"
    other.export_jsonl(plain)
    assert [json.loads(x)["key"] for x in plain.read_text().splitlines()] == keys
    other.close()


def test_import_replaces_error_rows_with_ok(tmp_path, store):
    r = req(1)
    store.put(r, Response(key="", text="(a)", answer=0))
    store.export_jsonl(tmp_path / "x.jsonl")
    other = ResponseStore(tmp_path / "o.sqlite")
    other.put(r, Response(key="", status="error", error="timeout"))
    assert other.import_jsonl(tmp_path / "x.jsonl")["replaced"] == 1
    assert other.get(r.key()).status == "ok"
    other.close()


def test_import_bad_lines_name_file_and_line(tmp_path, store):
    r = req(1)
    store.put(r, Response(key="", text="x"))
    good = tmp_path / "g.jsonl"
    store.export_jsonl(good)
    line = good.read_text().strip()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line + "\n{oops\n")
    with pytest.raises(DataError, match=r"bad.jsonl, line 2: invalid JSON"):
        store.import_jsonl(bad)
    rec = json.loads(line)
    rec["request"]["seed"] = 99                     # edited record: key no longer matches
    bad.write_text(json.dumps(rec) + "\n")
    with pytest.raises(DataError, match="line 1.*key does not match"):
        store.import_jsonl(bad)
    rec = json.loads(line)
    rec["response"]["status"] = "maybe"
    bad.write_text(json.dumps(rec) + "\n")
    with pytest.raises(DataError, match="unknown status"):
        store.import_jsonl(bad)
    with pytest.raises(DataError, match="no such file"):
        store.import_jsonl(tmp_path / "absent.jsonl")


def test_scrub_masks_keys_and_headers(monkeypatch):
    monkeypatch.setenv("MY_PROVIDER_API_KEY", "plainsecretvalue123")
    obj = {"api_key": "x", "headers": {"Authorization": "Bearer abc"},
           "nested": [{"Authorization": "y", "ok": "fine"}],
           "text": "failed with key sk-abcdefghijklmnop and Bearer tok.en-123 "
                   "and plainsecretvalue123 at https://user:pw@host/v1"}
    out = scrub(obj)
    assert set(out) == {"nested", "text"}
    assert out["nested"] == [{"ok": "fine"}]
    assert "sk-abcdefghijklmnop" not in out["text"]
    assert "tok.en-123" not in out["text"]
    assert "plainsecretvalue123" not in out["text"]
    assert "user:pw" not in out["text"]
    assert scrub_text("api_key=abc123&x=1") == "api_key=***&x=1"


def test_secrets_never_reach_the_file(tmp_path):
    secret = "sk-live-SECRETSECRET1234"
    s = ResponseStore(tmp_path / "s.sqlite")
    r = req(1).with_(meta={"api_key": secret, "note": f"Authorization: Bearer {secret}"})
    s.put(r, Response(key="", status="error",
                      error=f"401 from server; headers={{'Authorization': 'Bearer {secret}'}}"),
          secrets=[secret])
    s.export_jsonl(tmp_path / "e.jsonl")
    s.close()
    for p in tmp_path.iterdir():
        assert b"SECRETSECRET" not in p.read_bytes(), p


def test_stats_and_prune(tmp_path, store):
    for i in range(3):
        store.put(req(i, "m1"), Response(key="", text="x", prompt_tokens=10,
                                         completion_tokens=1))
    store.put(req(3, "m1"), Response(key="", status="error", error="e"))
    store.put(req(4, "m2"), Response(key="", status="refused"))
    st = store.stats()
    assert st["total"] == 5
    assert st["by_status"] == {"ok": 3, "error": 1, "refused": 1, "truncated": 0}
    g = {(x["model"], x["status"]): x for x in st["groups"]}
    assert g[("m1", "ok")]["count"] == 3 and g[("m1", "ok")]["prompt_tokens"] == 30
    assert st["size_bytes"] > 0
    assert store.prune(status="error") == 1
    assert store.prune(model="m2") == 1
    assert store.prune(older_than_s=3600) == 0       # all younger than an hour
    time.sleep(0.02)
    assert store.prune(older_than_s=0) == 3
    with pytest.raises(DataError, match="at least one condition"):
        store.prune()


def test_not_a_database_is_a_clear_error(tmp_path):
    p = tmp_path / "junk.sqlite"
    p.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(DataError, match="junk.sqlite"):
        ResponseStore(p)
