"""``fairness-tests store merge``: stores recorded apart combine into one; the same key
with different responses is an error naming the key; identical rows are kept once;
secrets are still scrubbed; schema versions are checked."""
from __future__ import annotations

import gzip
import json
import sqlite3
from functools import partial

import pytest
from helpers import req as make_req

from fairness_tests.cli.main import main
from fairness_tests.core.errors import DataError
from fairness_tests.core.io import canonical_dumps as _dumps
from fairness_tests.models.requests.request import Decoding, Response
from fairness_tests.models.store.scrub import StoredTextScrubber, scrub, scrub_text
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.models.store.store_merge import merge_stores

req = partial(make_req, model="openai/m", decoding=Decoding(0.0, 1.0, 8))


def make(path, rows, fingerprint=None):
    """rows: (i, text, status, latency)."""
    with ResponseStore(path) as s:
        for i, text, status, lat in rows:
            s.put(req(i), Response(key="", text=text, answer="abc".index(text[1])
                                   if status == "ok" else None, status=status,
                                   error="" if status == "ok" else "boom", latency_s=lat),
                  fingerprint=fingerprint)
    return path


def rows(path) -> dict[str, tuple]:
    with ResponseStore(path) as s:
        return {k: (r.text, r.status) for k, r in s.get_many(s.keys()).items()}


FP = {"backend": "litellm", "provider_seed": "p"}


def test_identical_rows_are_kept_once_and_new_ones_added(tmp_path):
    a = make(tmp_path / "a.sqlite", [(0, "(a)", "ok", 0.1), (1, "(b)", "ok", 0.2)], FP)
    # the same two responses recorded again (other latency and time), plus a new one
    b = make(tmp_path / "b.sqlite", [(0, "(a)", "ok", 9.0), (1, "(b)", "ok", 9.0),
                                     (2, "(c)", "ok", 0.3)], FP)
    c = merge_stores([a, b], tmp_path / "m.sqlite")
    assert (c["added"], c["duplicates"]) == (3, 2)
    assert rows(tmp_path / "m.sqlite") == {req(0).key(): ("(a)", "ok"),
                                           req(1).key(): ("(b)", "ok"),
                                           req(2).key(): ("(c)", "ok")}
    with ResponseStore(tmp_path / "m.sqlite") as m:          # provenance of the first kept
        assert m.get(req(0).key()).latency_s == 0.1
        assert m.fingerprint_counts(m.keys()) == {next(iter(
            m.fingerprint_counts([req(0).key()]))): 3}
        assert m.fingerprint(next(iter(m.fingerprint_counts(m.keys())))) == FP
    again = merge_stores([a, b], tmp_path / "m.sqlite")      # merging twice changes nothing
    assert (again["added"], again["duplicates"]) == (0, 5)


def test_an_error_row_is_replaced_by_a_success_never_the_reverse(tmp_path):
    a = make(tmp_path / "a.sqlite", [(0, "", "error", 0.1), (1, "(b)", "ok", 0.1)])
    b = make(tmp_path / "b.sqlite", [(0, "(a)", "ok", 0.1), (1, "", "error", 0.1)])
    c = merge_stores([a, b], tmp_path / "m.sqlite")
    assert (c["replaced_errors"], c["kept_errors"]) == (1, 1)
    assert rows(tmp_path / "m.sqlite") == {req(0).key(): ("(a)", "ok"),
                                           req(1).key(): ("(b)", "ok")}


def test_the_same_key_with_other_responses_is_an_error_naming_it(tmp_path):
    a = make(tmp_path / "a.sqlite", [(0, "(a)", "ok", 0.1), (1, "(b)", "ok", 0.1),
                                     (5, "(c)", "ok", 0.1)])
    b = make(tmp_path / "b.sqlite", [(0, "(b)", "ok", 0.1), (1, "(c)", "ok", 0.1),
                                     (3, "(a)", "ok", 0.1)])
    target = make(tmp_path / "t.sqlite", [(9, "(a)", "ok", 0.1)])
    with pytest.raises(DataError) as err:
        merge_stores([a, b], target)
    msg = str(err.value)
    assert msg.startswith("2 key(s) hold different responses") or "2 key(s)" in msg
    for k in (req(0).key(), req(1).key()):
        assert f"key {k}: " in msg
    assert f"{b} has ok '(b)'" in msg and f"{a} has ok '(a)'" in msg
    assert sorted(err.value.conflicts) == sorted([req(0).key(), req(1).key()])
    # all or nothing: not even the rows without a conflict were written
    assert rows(target) == {req(9).key(): ("(a)", "ok")}


def test_fingerprints_unknown_match_any_known_differ(tmp_path):
    a = make(tmp_path / "a.sqlite", [(0, "(a)", "ok", 0.1)], None)      # migrated: unknown
    b = make(tmp_path / "b.sqlite", [(0, "(a)", "ok", 0.1)], FP)
    merge_stores([a, b], tmp_path / "m.sqlite")
    with ResponseStore(tmp_path / "m.sqlite") as m:
        (fp_id,) = m.fingerprint_counts(m.keys())
        assert m.fingerprint(fp_id) == FP                                # filled in
    c = make(tmp_path / "c.sqlite", [(0, "(a)", "ok", 0.1)], {**FP, "provider_seed": "q"})
    with pytest.raises(DataError, match="1 key"):
        merge_stores([b, c], tmp_path / "m2.sqlite")


def test_a_fingerprint_recorded_before_an_entry_matches_on_the_others(tmp_path):
    """The transformers fingerprint gained ``dtype`` (fingerprint.ADDED_LATER): a row
    recorded before it is the same recording as one with it, in either order; two
    different dtypes are not."""
    old = {"backend": "transformers", "weights_sha256": "w", "answer_prefix": "Answer: ("}
    new = {**old, "dtype": "float32"}
    a = make(tmp_path / "a.sqlite", [(0, "(a)", "ok", 0.1)], old)
    b = make(tmp_path / "b.sqlite", [(0, "(a)", "ok", 0.2), (1, "(b)", "ok", 0.1)], new)
    assert merge_stores([a, b], tmp_path / "m.sqlite")["duplicates"] == 1
    assert merge_stores([b, a], tmp_path / "m2.sqlite")["duplicates"] == 1
    c = make(tmp_path / "c.sqlite", [(0, "(a)", "ok", 0.1)], {**old, "dtype": "bfloat16"})
    with pytest.raises(DataError, match="1 key"):
        merge_stores([b, c], tmp_path / "m3.sqlite")
    d = make(tmp_path / "d.sqlite", [(0, "(a)", "ok", 0.1)], {**old, "weights_sha256": "v"})
    with pytest.raises(DataError, match="1 key"):                 # still checked on the rest
        merge_stores([b, d], tmp_path / "m4.sqlite")


def test_secrets_are_scrubbed_on_the_way_in(tmp_path, monkeypatch):
    a = make(tmp_path / "a.sqlite", [(0, "", "error", 0.1), (1, "(b)", "ok", 0.1)])
    # a store written by something else: secrets in the error text, meta and extras
    con = sqlite3.connect(a)
    con.execute("UPDATE responses SET error = 'upstream said Authorization: Bearer abc.def.ghi "
                "and key sk-live1234567890', meta_json = "
                "'{\"api_key\": \"sk-zzzzzzzzzzzz\", \"item\": 0}' WHERE status = 'error'")
    con.execute("UPDATE responses SET extra_json = '{\"letter_mass\": 0.5}', "
                "meta_json = '{\"note\": \"machine-secret-value-42\"}' WHERE status = 'ok'")
    con.commit()
    con.close()
    monkeypatch.setenv("SOMEPROVIDER_API_KEY", "machine-secret-value-42")
    merge_stores([a], tmp_path / "m.sqlite")
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("m.sqlite*"))
    for secret in (b"abc.def.ghi", b"sk-live1234567890", b"sk-zzzz", b"machine-secret-value-42"):
        assert secret not in raw
    with ResponseStore(tmp_path / "m.sqlite") as m:
        assert m.meta(req(0).key()) == {"item": 0}                  # the key entry dropped
        assert m.meta(req(1).key()) == {"note": "***"}
        assert m.get(req(0).key()).error.startswith("upstream said Authorization: ***")
        assert m.get(req(1).key()).letter_mass == 0.5               # the rest kept


def test_sources_schemas_are_checked(tmp_path):
    good = make(tmp_path / "a.sqlite", [(0, "(a)", "ok", 0.1)])
    newer = make(tmp_path / "n.sqlite", [(1, "(a)", "ok", 0.1)])
    con = sqlite3.connect(newer)
    con.execute("UPDATE store_info SET value = '7' WHERE name = 'schema'")
    con.commit()
    con.close()
    with pytest.raises(DataError, match=r"n\.sqlite: store schema 7 is newer"):
        merge_stores([good, newer], tmp_path / "m.sqlite")
    with pytest.raises(DataError, match=r"absent\.sqlite: no such store"):
        merge_stores([good, tmp_path / "absent.sqlite"], tmp_path / "m.sqlite")
    with pytest.raises(DataError, match="into itself"):
        merge_stores([good], good)


def test_cli_merge_and_conflict_exit_code(tmp_path, capsys):
    a = make(tmp_path / "a.sqlite", [(0, "(a)", "ok", 0.1)])
    b = make(tmp_path / "b.sqlite", [(1, "(b)", "ok", 0.1)])
    assert main(["store", "merge", str(a), str(b), "--into", str(tmp_path / "m.sqlite")]) == 0
    assert "merged 2 store(s)" in capsys.readouterr().out
    assert main(["store", "export", str(tmp_path / "m.jsonl.gz"), "--store",
                 str(tmp_path / "m.sqlite")]) == 0
    with gzip.open(tmp_path / "m.jsonl.gz", "rt") as fh:
        assert sorted(json.loads(x)["key"] for x in fh) == sorted([req(0).key(), req(1).key()])
    c = make(tmp_path / "c.sqlite", [(0, "(c)", "ok", 0.1)])
    assert main(["store", "merge", str(c), "--into", str(tmp_path / "m.sqlite")]) == 2
    err = capsys.readouterr().err
    assert f"key {req(0).key()}" in err and "Traceback" not in err


@pytest.mark.parametrize("text", [
    "plain text", '{"max_tokens": 16, "temperature": 1}', "token=abcdef", "my token: xyz",
    "Authorization: Bearer abc.def", "sk-abcdefghijk", "https://user:pw@host/v1",
    '{"api_key": "k", "x": 1}', '{"headers": {"a": 1}}', "x\\u0073k-abcdefgh",
    "env value machine-secret-value-42 inside", "access_token=zzz", "mytokens are fine"])
def test_the_fast_scrubber_agrees_with_scrub(text, monkeypatch):
    """The bulk scrubber's shortcut never skips what :func:`scrub` would change."""
    monkeypatch.setenv("SOMEPROVIDER_API_KEY", "machine-secret-value-42")
    fast = StoredTextScrubber()
    assert fast.text(text) == scrub_text(text)
    blob = _dumps({"field": text, "nested": [text]})
    assert fast.json_text(blob) == _dumps(scrub(json.loads(blob)))
    if text.startswith("{"):
        assert json.loads(fast.json_text(text)) == scrub(json.loads(text))
