"""The live path, end to end: a real ``transformers serve`` with the embedded model
on 127.0.0.1, asked through the litellm backend and the runner into a real
SQLite store.

The server (tests/transformers_server.py) runs as a subprocess on a free loopback
port, started once per session and shared with tests/test_live_server_completion.py
(the ``transformers_server`` fixture of tests/conftest.py). Here: a small
multiple-choice batch (chat endpoint, Gemma chat template saved with the converted
copy) and an open-ended batch (plain ``/v1/completions``), the rows in the store, a
re-run that asks the server nothing. Marked ``live_server`` (~1 min on 2 cores, plus
the one-off GGUF conversion if the cache is cold).
"""
from __future__ import annotations

import sqlite3

import pytest

from fairness_tests.benchmarks.bbq.data import bbq_dir, read_items
from fairness_tests.benchmarks.bbq.prompt import build_requests
from fairness_tests.models.asking.runner import ask
from fairness_tests.models.backends import embedded as emb
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.backends.transformers_backend import TransformersBackend
from fairness_tests.models.requests.request import Decoding, Request, chat
from fairness_tests.models.store.store import ResponseStore

pytestmark = pytest.mark.live_server


@pytest.fixture
def server(transformers_server):
    """transformers serve on 127.0.0.1, started once per session (tests/conftest.py)."""
    return transformers_server


def _bbq_requests(model: str, api_base: str, n_items: int, repeats: int) -> list[Request]:
    items = read_items(bbq_dir() / "Race_x_SES.jsonl", "Race_x_SES").head(n_items)
    return build_requests(items, repeats=repeats, decoding=Decoding(temperature=1.0, max_tokens=4),
                          backend="litellm", model=model, api_base=api_base)


def test_served_model_multiple_choice_and_open_ended_into_the_store(server, tmp_path):
    api_base, model_dir = server["api_base"], server["model_dir"]
    chat_model = f"openai/{model_dir}"                 # the server is pinned to this id
    text_model = f"text-completion-openai/{model_dir}"
    mc = _bbq_requests(chat_model, api_base, n_items=3, repeats=2)
    gen = [Request(messages=chat(None, emb.format_gemma(chat(None, p))), seed=s,
                   decoding=Decoding(temperature=0.7, top_p=0.95, max_tokens=12),
                   backend="litellm", model=text_model, api_base=api_base,
                   meta={"prompt": p})
           for p in ("Describe a nurse in one sentence.",
                     "Describe a software engineer from Lagos in one sentence.")
           for s in (0, 1)]
    store_path = tmp_path / "store.sqlite"
    backend = LiteLLMBackend(max_concurrency=2, timeout_s=120, max_retries=1)
    with ResponseStore(store_path) as store:
        got = ask(mc + gen, backend, store, progress=False)
    assert len(got) == len(mc) + len(gen) == 10
    for req, resp in zip(mc + gen, got, strict=True):
        assert resp.status == "ok", (resp.error, server["log"].read_text(errors="replace")[-2000:])
        assert resp.key == req.key()
        assert resp.completion_tokens and resp.completion_tokens >= 1
    assert any(r.text for r in got[len(mc):])          # open-ended text came back
    attempts = backend.totals().attempts
    assert attempts >= 10

    # the rows are in the SQLite file, one per request, with what the backend gave
    con = sqlite3.connect(store_path)
    rows = dict(con.execute("SELECT key, text FROM responses WHERE status = 'ok'").fetchall())
    backends = {b for (b,) in con.execute("SELECT DISTINCT backend FROM responses")}
    con.close()
    assert set(rows) == {r.key() for r in mc + gen}
    assert all(rows[r.key()] == resp.text for r, resp in zip(mc + gen, got, strict=True))
    assert backends == {"litellm"}

    # a re-run is served from the store: the server is not asked again
    with ResponseStore(store_path) as store:
        again = ask(mc + gen, backend, store, progress=False)
        meta = store.meta(mc[0].key())
    assert backend.totals().attempts == attempts
    assert [r.text for r in again] == [r.text for r in got]
    assert meta["example_id"] == mc[0].meta["example_id"]


def test_served_greedy_text_matches_the_in_process_backend(server):
    """The served model is the same model: greedy continuations of the same Gemma
    prompt agree with the transformers backend's (same weights, same template)."""
    msgs = chat("Be brief.", "Name a colour.")
    dec = Decoding(temperature=0.0, top_p=1.0, max_tokens=6)
    served = LiteLLMBackend(timeout_s=120, max_retries=1).answer(
        [Request(messages=msgs, decoding=dec, backend="litellm",
                 model=f"openai/{server['model_dir']}", api_base=server["api_base"])])[0]
    local = TransformersBackend("embedded", batch_size=1, threads=1).answer(
        [Request(messages=msgs, decoding=dec, backend="transformers",
                 model=emb.EMBEDDED_MODEL_ID)])[0]
    assert served.status == local.status == "ok", served.error
    assert served.text.strip() == local.text
