"""A model served over ``/v1/completions`` by the real ``transformers serve`` (the
embedded Gemma 3 270M on 127.0.0.1, tests/transformers_server.py, the one server
of the session) answers
BBQ prompts with valid letters through the litellm backend: the completion prompt is
the local backend's (Gemma turns, then ``"Answer: ("``), ``stop`` ends the letter.
The same server's answers to the contents joined without a prefix (what this path sent
before) are checked too, and the server's own answer to a logprobs / ``n`` probe is
read as what it is (``transformers serve`` ignores both)."""
from __future__ import annotations

import json

import pytest
import test_live_server as live

from fairness_tests.cli.main import main
from fairness_tests.models.asking.runner import ask_counted
from fairness_tests.models.backends import embedded as emb
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.backends.transformers_backend import TransformersBackend
from fairness_tests.models.requests import repeat_modes as RM
from fairness_tests.models.requests.request import Decoding
from fairness_tests.models.store.store import ResponseStore

server = live.server            # transformers serve on 127.0.0.1, shared by the session
_bbq_requests = live._bbq_requests

pytestmark = pytest.mark.live_server


def _requests(server, n_items, repeats=1):
    model = f"text-completion-openai/{server['model_dir']}"
    reqs = _bbq_requests(model, server["api_base"], n_items=n_items, repeats=repeats)
    return [r.with_(decoding=Decoding(temperature=0.0, max_tokens=16)) for r in reqs]


def test_served_base_path_answers_bbq_with_letters_the_in_process_backend_would_give(
        server, tmp_path):
    """The served base path answers BBQ with valid letters, and a re-run is served from
    the store. The same prompt, the same weights: the served model's greedy letter after
    "Answer: (" is the local backend's most likely letter (T = 0). (One test: the served
    answers are asked once for both.)"""
    reqs = _requests(server, n_items=4)
    backend = LiteLLMBackend(max_concurrency=2, timeout_s=120, max_retries=1,
                             prompt_format="completion-gemma")
    with ResponseStore(tmp_path / "s.sqlite") as st:
        out, counts = ask_counted(reqs, backend, st, progress=False)
        again, counts2 = ask_counted(reqs, backend, st, progress=False)
    assert [o.status for o in out] == ["ok"] * 4, [o.error for o in out]
    # the reply is the letter alone: the stop (or the cut at ")") ends it
    assert all(o.text in ("a", "b", "c") for o in out), [o.text for o in out]
    assert all(o.answer in (0, 1, 2) for o in out)
    assert (counts.sent, counts.invalid, counts.failed) == (4, 0, 0)
    assert (counts2.sent, counts2.from_store) == (0, 4)        # the store answers a re-run
    assert [o.text for o in again] == [o.text for o in out]
    assert backend.info().prompt_formats == {reqs[0].model: "completion-gemma"}
    # the served greedy letters are the in-process backend's most likely letters
    local_reqs = [r.with_(backend="transformers", model=emb.EMBEDDED_MODEL_ID, api_base=None)
                  for r in reqs]
    local = TransformersBackend("embedded", batch_size=4, threads=1).answer(local_reqs)
    assert [o.text for o in out] == [("a", "b", "c")[x.answer] for x in local]


def test_served_without_the_prefix_the_same_model_is_not_read_as_a_letter(server, tmp_path):
    """What the path sent before: the contents joined, no prefix, no stop."""
    reqs = _requests(server, n_items=2)
    backend = LiteLLMBackend(max_concurrency=2, timeout_s=120, max_retries=1,
                             prompt_format="chat")
    with ResponseStore(tmp_path / "s.sqlite") as st:
        out, counts = ask_counted(reqs, backend, st, progress=False)
    assert [o.status for o in out] == ["ok"] * 2
    assert all(o.text not in ("a", "b", "c") for o in out), [o.text for o in out]


@pytest.mark.parametrize("mode, reason", [("logprobs", "no logprobs in the reply"),
                                          ("n", "returned 1 choice(s) for n=2")])
def test_served_probe_reads_what_the_server_ignores(server, tmp_path, mode, reason):
    reqs = RM.apply_mode(_requests(server, n_items=1, repeats=2), mode)
    with ResponseStore(tmp_path / "s.sqlite") as st:
        with pytest.raises(RM.RepeatModeUnsupported, match=reason.replace("(", r"\(")
                           .replace(")", r"\)")):
            ask_counted(reqs, LiteLLMBackend(timeout_s=120, max_retries=1,
                                             prompt_format="completion-gemma"),
                        st, progress=False)
        assert len(st) == 0
        assert [(r.feature, r.supported) for r in st.capabilities()] == [(mode, False)]


@pytest.mark.parametrize("fmt", ["completion-gemma", "auto"])
def test_audit_through_the_served_base_model_answers_bbq_with_letters(server, tmp_path,
                                                                      monkeypatch, capsys, fmt):
    """``fairness-tests audit --prompt-format ...`` end to end against the served model:
    8 BBQ items (``--categories Race_x_SES --limit 2``: two per context x polarity cell
    of one dataset, which loads half the data of both; no rotations), greedy. Gemma's
    turns then "Answer: (" (what the local backend sends) give valid letters; ``auto``
    resolves by the model id, which here is a directory name without "gemma":
    ``completion-plain`` (role: content lines, then the prefix). The shares are printed
    (-s) for docs/api_models.md."""
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    model = f"text-completion-openai/{server['model_dir']}"
    main(["audit", "--live", "--model", model, "--api-base", server["api_base"],
          "--store", str(tmp_path / "s.sqlite"), "--recordings", "--benchmarks", "bbq",
          "--categories", "Race_x_SES", "--limit", "2", "--rotations", "none",
          "--temperature", "0", "--n-boot", "100", "--prompt-format", fmt,
          "--out", str(tmp_path / "r")])
    meta = json.loads((tmp_path / "r" / "run" / "run.json").read_text())
    used = "completion-gemma" if fmt == "completion-gemma" else "completion-plain"
    assert meta["asking"]["prompt"]["used"] == used
    assert meta["requests"] == {"bbq": 8, "bbq_new": 8}
    n, invalid = meta["bbq"]["n_answers"], meta["bbq"]["invalid_answers"]
    with capsys.disabled():
        print(f"\n{used}: {n - invalid} of {n} answers valid ({(n - invalid) / n:.0%})")
    assert n == 8
    if used == "completion-gemma":
        assert invalid < n
