"""The API path's prompt formats: the texts written out by hand, the options checked by
name, the request keys (a chat request's key unchanged), and a base model served over
/v1/completions (the loopback stand-in of llama.cpp's server) answering with letters."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from fairness_tests.benchmarks.bbq.prompt import LETTERS
from fairness_tests.core.errors import ConfigError
from fairness_tests.models.asking.runner import ask_counted, stamp_requests
from fairness_tests.models.backends.cost import TokenCounter
from fairness_tests.models.backends.embedded import choice_prompt
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.requests import prompt_format as PF
from fairness_tests.models.requests.prompt_format import Message
from fairness_tests.models.requests.request import Decoding, Request, chat
from fairness_tests.models.store.store import ResponseStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_server import FaultServer  # noqa: E402

MSGS = (Message("system", "Be brief."), Message("user", "Who? (a) x (b) y (c) z"))
L = ("a", "b", "c")


# ----------------------------------------------------------------------------- texts

def test_completion_gemma_is_the_local_backends_text():
    r = PF.render(MSGS, "completion-gemma", "Answer: (", "choice", completion=True)
    assert r.prompt == ("<start_of_turn>user\nBe brief.\n\nWho? (a) x (b) y (c) z<end_of_turn>\n"
                        "<start_of_turn>model\nAnswer: (")
    assert r.stop == [")", "\n"] and r.after_open_bracket and r.messages is None
    # the embedded model's own prompt (the transformers backend's Gemma path)
    assert r.prompt == choice_prompt(MSGS)


def test_completion_plain_and_the_open_ended_and_legacy_texts():
    r = PF.render(MSGS, "completion-plain", "Answer: (", "choice", completion=True)
    assert r.prompt == "system: Be brief.\nuser: Who? (a) x (b) y (c) z\nassistant: Answer: ("
    g = PF.render(MSGS, "completion-plain", "Answer: (", "generate", completion=True)
    assert g.prompt == "system: Be brief.\nuser: Who? (a) x (b) y (c) z\nassistant: "
    assert g.stop is None and not g.after_open_bracket
    legacy = PF.render(MSGS, "chat", "Answer: (", "choice", completion=True)
    assert legacy.prompt == "Be brief.\n\nWho? (a) x (b) y (c) z" and legacy.stop is None


def test_chat_and_chat_prefill_messages():
    c = PF.render(MSGS, "chat", "Answer: (", "choice", completion=False)
    assert c.messages == [{"role": "system", "content": "Be brief."},
                          {"role": "user", "content": "Who? (a) x (b) y (c) z"}]
    assert c.stop is None and not c.after_open_bracket
    p = PF.render(MSGS, "chat-prefill", "Answer: (", "choice", completion=False)
    assert p.messages[-1] == {"role": "assistant", "content": "Answer: ("}
    assert p.stop == [")"] and p.cut == [")", "\n"] and p.after_open_bracket


def test_a_prefix_without_a_bracket_stops_at_the_newline_only():
    r = PF.render(MSGS, "completion-plain", "Answer:", "choice", completion=True)
    assert r.prompt.endswith("assistant: Answer:") and r.stop == ["\n"]
    assert not r.after_open_bracket
    assert PF.cut_at_stop("b) The cook\nQuestion", [")", "\n"]) == "b"
    assert PF.cut_at_stop(" b) The cook\nQuestion", ["\n"]) == " b) The cook"
    assert PF.cut_at_stop("b", None) == "b"


@pytest.mark.parametrize("fmt, model, expect", [
    ("auto", "openai/gpt-4o-mini", "chat"),
    ("auto", "text-completion-openai/google/gemma-3-270m", "completion-gemma"),
    ("auto", "text-completion-openai/Qwen2.5-0.5B", "completion-plain"),
    ("completion-plain", "text-completion-openai/gemma-3", "completion-plain"),
    ("chat", "text-completion-openai/x", "chat"),
])
def test_auto_resolves_from_the_model_id_alone(fmt, model, expect):
    assert PF.resolve(fmt, model) == expect


def test_options_are_checked_by_name():
    with pytest.raises(ConfigError, match="prompt_format must be one of auto, chat") as e:
        LiteLLMBackend(prompt_format="gemma")
    assert e.value.key == "prompt_format"
    with pytest.raises(ConfigError, match="answer_prefix must be a non-empty string"):
        LiteLLMBackend(answer_prefix="  ")
    with pytest.raises(ConfigError, match="unknown option 'prompt_fromat'") as e:
        LiteLLMBackend(prompt_fromat="chat")
    assert e.value.key == "prompt_fromat"
    with pytest.raises(ConfigError, match="top_logprobs must be a positive integer"):
        LiteLLMBackend(top_logprobs=0)
    be = LiteLLMBackend(prompt_format="completion-gemma")
    chat_req = Request(messages=MSGS, backend="litellm", model="openai/x", kind="choice",
                       choices=L)
    with pytest.raises(ConfigError, match="is a chat model"):
        be.request_fields(chat_req)
    with pytest.raises(ConfigError, match="litellm does not know 'openai/x' to"):
        LiteLLMBackend(prompt_format="chat-prefill").request_fields(chat_req)
    # a provider that continues an assistant turn (litellm's model map)
    fields = LiteLLMBackend(prompt_format="chat-prefill").request_fields(
        chat_req.with_(model="deepseek/deepseek-chat"))
    assert fields == {"prompt_format": "chat-prefill", "answer_prefix": None}


# ----------------------------------------------------------------------------- keys

def _old_key(r: Request) -> str:
    """The key as it was hashed before prompt formats existed (the layout of
    Request.key_fields then): sha256 of the canonical JSON."""
    old = {"backend": r.backend, "model": r.model, "kind": r.kind,
           "messages": [[m.role, m.content] for m in r.messages], "choices": list(r.choices),
           "decoding": {"temperature": 1, "top_p": 1, "max_tokens": 16}, "seed": r.seed,
           "repeat": r.repeat}
    blob = json.dumps(old, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def test_chat_keys_unchanged_completion_keys_name_the_format():
    chat_req = Request(messages=MSGS, backend="litellm", model="openai/x", kind="choice",
                       choices=L)
    text_req = chat_req.with_(model="text-completion-openai/gemma-3-270m")
    # a chat request's key is what it always was
    assert chat_req.key() == _old_key(chat_req)
    assert "prompt_format" not in chat_req.key_fields()
    # a completion request's key names the format auto resolves to, without stamping,
    # so every caller computes it; the answer asked with the contents joined is another
    assert text_req.key_fields()["prompt_format"] == "completion-gemma"
    assert "answer_prefix" not in text_req.key_fields()        # the default prefix
    assert text_req.key() != _old_key(text_req)
    # the default options stamp nothing: the caller's keys are the store's
    assert stamp_requests([chat_req, text_req], LiteLLMBackend()) == [chat_req, text_req]
    assert [r.key() for r in stamp_requests([chat_req, text_req], LiteLLMBackend())] == \
        [chat_req.key(), text_req.key()]
    # another prefix is another request
    [t2] = stamp_requests([text_req], LiteLLMBackend(answer_prefix="The answer is ("))
    assert t2.key_fields()["answer_prefix"] == "The answer is (" and t2.key() != text_req.key()
    # explicitly the auto format: the same key as leaving it out
    assert text_req.with_(prompt_format="completion-gemma").key() == text_req.key()
    # an open-ended request carries the format, never the prefix
    gen = text_req.with_(kind="generate", choices=())
    [g] = stamp_requests([gen], LiteLLMBackend(answer_prefix="The answer is ("))
    assert g.key_fields()["prompt_format"] == "completion-gemma"
    assert "answer_prefix" not in g.key_fields()
    # explicit chat for a completion endpoint: the contents joined, the old key
    [legacy] = stamp_requests([text_req], LiteLLMBackend(prompt_format="chat"))
    assert legacy.prompt_format == "chat" and legacy.key() == _old_key(text_req)
    # another backend's requests: the fields as set (none: the key as it was)
    local = chat_req.with_(backend="transformers", model="embedded")
    assert "prompt_format" not in local.key_fields()


# ----------------------------------------------------------------------------- a base model

def _bbq_like(server, model, n=3):
    return [Request(messages=chat(None, f"Context {i}. Who? (a) the cook (b) the nurse "
                                        f"(c) unknown"), backend="litellm", model=model,
                    api_base=server.url, kind="choice", choices=LETTERS,
                    decoding=Decoding(1.0, 1.0, 16), seed=0, repeat=0,
                    meta={"shown_options": ["the cook", "the nurse", "unknown"]})
            for i in range(n)]


@pytest.mark.parametrize("stop_support", [True, False])
def test_a_base_model_over_completions_answers_with_letters(tmp_path, stop_support):
    """llama.cpp's server with a base model: with the answer prefix and the stop the reply
    is the letter; a server that ignores stop runs on, and the reply is cut the same."""
    with FaultServer.llama_cpp(stop_support=stop_support) as s, \
            ResponseStore(tmp_path / "s.sqlite") as st:
        reqs = _bbq_like(s, "text-completion-openai/base-model")
        out, counts = ask_counted(reqs, LiteLLMBackend(timeout_s=5), st, progress=False)
        bodies = [h.body for h in s.hits]
    assert all(b["prompt"].endswith("\nassistant: Answer: (") for b in bodies)
    assert all(b["stop"] == [")", "\n"] for b in bodies)
    assert [(o.status, o.text, o.answer) for o in out] == [("ok", "b", 1)] * 3
    assert counts.invalid == 0 and counts.sent == 3


def test_the_same_base_model_without_the_prefix_answers_nothing_valid(tmp_path):
    """What issue 27 saw (120 of 120 invalid): the contents joined, no prefix, no stop."""
    with FaultServer.llama_cpp() as s, ResponseStore(tmp_path / "s.sqlite") as st:
        out, counts = ask_counted(_bbq_like(s, "text-completion-openai/base-model"),
                                  LiteLLMBackend(timeout_s=5, prompt_format="chat"), st,
                                  progress=False)
        bodies = [h.body for h in s.hits]
    assert all("stop" not in b and not b["prompt"].endswith("(") for b in bodies)
    assert all(o.status == "ok" and o.text for o in out)     # texts like "\n\nIn which city.."
    assert [o.answer for o in out] == [None] * 3 and counts.invalid == 3


def test_the_dry_run_counts_the_prompt_that_is_sent():
    req = Request(messages=MSGS, backend="litellm", model="text-completion-openai/gemma-x",
                  kind="choice", choices=L)
    counter = TokenCounter(req.model)
    assert counter.prompt_text(req) == PF.render(MSGS, "completion-gemma", "Answer: (",
                                                 "choice", completion=True).prompt
    legacy = req.with_(prompt_format="chat")
    assert counter.prompt_text(legacy) == "Be brief.\n\nWho? (a) x (b) y (c) z"
    assert counter(req) > counter(legacy)          # the turn markers and the prefix count
