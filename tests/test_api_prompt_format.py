"""The prompt format of API models through the whole audit (issue 27, item 5, wiring):
``--prompt-format`` / ``--answer-prefix`` from the configuration spec to the litellm
backend, into the request keys (a rerun in the same format asks nothing, another prefix
asks again), the dry run, ``run.json`` and the card; bad combinations are one line and
exit 2. Against the loopback server's base model (tests/fault_server.py: a completion
that runs on unless the prompt ends with ``"("`` and ``stop`` cuts it).

Counts by hand: ``--benchmarks consistency --categories Race_x_SES --limit 1 --repeats 2``
asks the consistency sample of 1 item per context x polarity cell of one dataset =
2 x 2 = 4 items, 2 repeats each: 8 requests (what is checked does not depend on the
count)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fairness_tests.cli.main import main
from fairness_tests.pipeline.audit import prompt_info
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.dry_run import dry_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_server import FaultServer  # noqa: E402

BASE = "text-completion-openai/base-x"       # no "gemma" in the id: auto is completion-plain
N = 4 * 2


def letters(prompt: str) -> dict[str, float]:
    return {"a": 0.6, "b": 0.3, "c": 0.1}


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")


def audit(server, tmp_path, *extra, out="report", model=BASE):
    return main(["audit", "--live", "--backend", "litellm", "--model", model,
                 "--api-base", server.url, "--store", str(tmp_path / "s.sqlite"),
                 "--recordings", "--benchmarks", "consistency", "--categories",
                 "Race_x_SES", "--limit", "1", "--repeats", "2", "--temperature", "0",
                 "--n-boot", "100", "--out", str(tmp_path / out), "--force", *extra])


def run_meta(tmp_path, out="report") -> dict:
    return json.loads((tmp_path / out / "run" / "run.json").read_text())


def test_base_model_answers_with_letters_in_the_default_format_and_not_in_chat(tmp_path):
    """auto for a text-completion model: role: content lines, then "Answer: (" and stop at
    ")" / newline; the base model's greedy letter (T = 0: "a") is every answer. The same
    model sent the messages joined (chat) runs on with a line of its own: no answer."""
    with FaultServer(base_model=True, answers=letters) as s:
        audit(s, tmp_path)
        assert len(s.hits) == N
        prompts = [h.body["prompt"] for h in s.hits]
        assert all(p.endswith("\nassistant: Answer: (") and p.startswith("user: ")
                   for p in prompts), prompts[0][-80:]
        assert all(h.body["stop"] == [")", "\n"] for h in s.hits)
        s.reset()
        audit(s, tmp_path, "--prompt-format", "chat", out="chat")
        assert len(s.hits) == N                         # another key: asked again
        assert all("stop" not in h.body and not h.body["prompt"].endswith("(")
                   for h in s.hits)
    meta = run_meta(tmp_path)
    assert meta["bbq"]["n_answers"] == N and meta["bbq"]["invalid_answers"] == 0
    assert meta["asking"]["prompt"] == {"requested": "auto", "used": "completion-plain",
                                        "answer_prefix": "Answer: (", "stop": [")", "\n"]}
    assert meta["config"]["prompt_format"] == "auto"
    assert meta["backend_info"]["prompt_formats"] == {BASE: "completion-plain"}
    chat = run_meta(tmp_path, "chat")
    assert chat["bbq"]["invalid_answers"] == N
    assert chat["asking"]["prompt"] == {"requested": "chat", "used": "chat",
                                        "answer_prefix": None, "stop": None}
    assert "--prompt-format chat" in chat["regen_command"]
    card = (tmp_path / "report" / "card" / "card.md").read_text()
    assert "prompt format completion-plain (auto for this model): role: content lines" in card
    assert "'Answer: (', stop at ')' or newline" in card
    assert "prompt format chat: the messages as given" in \
        (tmp_path / "chat" / "card" / "card.md").read_text()


def test_the_format_and_prefix_are_in_the_keys(tmp_path):
    """The same prompt sent the same way is one key, however it was spelled (auto or the
    format it resolves to; the default prefix given or not); another prefix is another
    key, asked again, and the dry run counts its answers in the store."""
    custom = "The answer is ("
    with FaultServer(base_model=True, answers=letters) as s:
        audit(s, tmp_path)
        assert len(s.hits) == N
        s.reset()
        audit(s, tmp_path, "--prompt-format", "completion-plain", "--answer-prefix",
              "Answer: (", out="same")
        assert len(s.hits) == 0
        assert run_meta(tmp_path, "same")["requests"] == {"consistency": N,
                                                          "consistency_new": 0}
        audit(s, tmp_path, "--answer-prefix", custom, out="custom")
        assert len(s.hits) == N
        assert all(h.body["prompt"].endswith("assistant: " + custom) for h in s.hits)
        cfg = AuditConfig(live=True, backend="litellm", model=BASE, api_base=s.url,
                          store=str(tmp_path / "s.sqlite"), recordings=(),
                          benchmarks=("consistency",), categories=("Race_x_SES",),
                          limit=1, repeats=2, temperature=0.0,
                          answer_prefix=custom)
        rows, _ = dry_run(cfg)
    assert run_meta(tmp_path, "custom")["bbq"]["invalid_answers"] == 0
    row = next(r for r in rows if r.selected)
    assert (row.responses, row.in_store) == (N, N)


def test_gemma_ids_get_gemma_turns_and_chat_models_the_messages():
    gemma = AuditConfig(backend="litellm", model="text-completion-openai/google/gemma-3-270m")
    assert prompt_info(gemma) == {"requested": "auto", "used": "completion-gemma",
                                  "answer_prefix": "Answer: (", "stop": [")", "\n"]}
    chat = AuditConfig(backend="litellm", model="gpt-x", api_base="http://127.0.0.1:9/v1")
    assert prompt_info(chat) == {"requested": "auto", "used": "chat", "answer_prefix": None,
                                 "stop": None}
    assert prompt_info(AuditConfig()) is None            # the local backend: its own format


@pytest.mark.parametrize("argv, message", [
    (["--model", "openai/m", "--prompt-format", "completion-gemma"],
     "--prompt-format: 'completion-gemma' renders a prompt for a completion endpoint; "
     "'openai/m' is a chat model"),
    (["--model", "m", "--api-base", "http://127.0.0.1:9/v1", "--prompt-format",
      "completion-plain"], "'openai/m' is a chat model"),
    (["--model", BASE, "--prompt-format", "chat-prefill"],
     "--prompt-format: 'chat-prefill' needs a chat endpoint"),
    (["--model", BASE, "--answer-prefix", " "], "--answer-prefix: must be a non-empty text"),
    (["--prompt-format", "completion-plain"],
     "--prompt-format: applies to API models (backend litellm)"),
    (["--answer-prefix", "Reply: ("], "--answer-prefix: applies to API models"),
    (["--model", BASE, "--prompt-format", "gemma"], "--prompt-format"),
])
def test_bad_prompt_options_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    rc = main(["audit", *argv, "--store", str(tmp_path / "s.sqlite"), "--out",
               str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r").exists()


def test_chat_prefill_for_a_provider_litellm_does_not_know_to_continue_is_exit_2(
        tmp_path, capsys):
    """Known only once litellm is loaded (the configuration does not import it): refused
    before any request, one line naming the option, no run written."""
    with FaultServer(answers=letters) as s:
        rc = main(["audit", "--live", "--model", "openai/m", "--api-base", s.url,
                   "--prompt-format", "chat-prefill", "--benchmarks", "consistency", "-q",
                   "--limit", "1", "--repeats", "1", "--recordings", "--store",
                   str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "r")])
        assert len(s.hits) == 0
    err = capsys.readouterr().err
    assert rc == 2 and "prompt_format 'chat-prefill' needs a provider that continues an " \
        "assistant turn; litellm does not know 'openai/m'" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
