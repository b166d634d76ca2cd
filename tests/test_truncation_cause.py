"""What a truncated answer says happened (issue 32): "the token budget went to
reasoning" only when the reply shows reasoning (reasoning tokens in its usage, or
reasoning content in its message); otherwise the tokens it used and what it wrote.

The replies are OpenAI chat completions in the documented shape (``choices[i].message``,
``choices[i].logprobs.content[j] = {token, logprob, bytes, top_logprobs}``,
``usage.completion_tokens_details.reasoning_tokens``), read by litellm's own response
type, as the backend receives them."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")

from fairness_tests.models.backends.litellm_replies import read_reply  # noqa: E402
from fairness_tests.models.requests import prompt_format as PF  # noqa: E402
from fairness_tests.models.requests.answers import truncated_by_reasoning  # noqa: E402
from fairness_tests.models.requests.repeat_modes import LOGPROBS_MAX_TOKENS, apply_mode  # noqa: E402
from fairness_tests.models.requests.request import Decoding, Request, chat  # noqa: E402
from fairness_tests.pipeline.asker import Asker  # noqa: E402


def requests(mode: str, repeats: int = 2) -> list[Request]:
    reqs = [Request(messages=chat(None, "Who? (a) x (b) y (c) z"), backend="litellm",
                    model="openai/gpt-4o-mini", kind="choice", choices=("a", "b", "c"),
                    decoding=Decoding(1.0, 1.0, 16), repeat=k) for k in range(repeats)]
    return apply_mode(reqs, mode)


def completion(content: str | None, finish: str, completion_tokens: int,
               reasoning_tokens: int, logprob_tokens: list[str] | None = None,
               **message) -> object:
    """An OpenAI chat completion, as the API reference documents it, in litellm's type."""
    lp = None
    if logprob_tokens is not None:
        lp = {"content": [{"token": t, "logprob": -0.01, "bytes": list(t.encode()),
                           "top_logprobs": [{"token": t, "logprob": -0.01,
                                             "bytes": list(t.encode())}]}
                          for t in logprob_tokens]}
    return litellm.ModelResponse(**{
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content,
                                             "refusal": None, **message},
                     "logprobs": lp, "finish_reason": finish}],
        "usage": {"prompt_tokens": 40, "completion_tokens": completion_tokens,
                  "total_tokens": 40 + completion_tokens,
                  "completion_tokens_details": {"reasoning_tokens": reasoning_tokens}}})


def read(reqs: list[Request], raw: object, max_tokens: int):
    rendered = PF.render(reqs[0].messages, "chat", None, "choice", False)
    return read_reply(litellm, reqs, raw, False, max_tokens, rendered, [], None).responses


def test_logprobs_mode_non_reasoning_model_is_not_blamed_on_reasoning():
    """The user's case: the chat route with logprobs (max_tokens 3), a model that does
    no reasoning (reasoning_tokens 0, no reasoning content) and wrote three blank
    tokens. Before: "the token budget went to reasoning; raise --max-tokens". Now:
    what happened, and that --max-tokens cannot help in this mode."""
    reqs = requests("logprobs")
    raw = completion("\n\n\n", "length", 3, 0, logprob_tokens=["\n", "\n", "\n"])
    out = read(reqs, raw, LOGPROBS_MAX_TOKENS)
    assert [r.status for r in out] == ["truncated", "truncated"]
    err = out[0].error
    assert "reasoning" not in err.replace("no reasoning tokens or content", "")
    assert err.startswith("finish_reason=length after 3 completion token(s) with "
                          "max_tokens 3 and no answer: it wrote only blank text '\\n\\n\\n'")
    assert "--repeat-mode n or calls" in err and "--max-tokens" not in err
    assert not any(truncated_by_reasoning(r) for r in out)


def test_calls_mode_says_reasoning_only_when_the_reply_shows_it():
    """max_tokens 16: a reasoning model that spent all 16 tokens reasoning
    (completion_tokens_details.reasoning_tokens 16), one whose message carries
    reasoning_content without a token count, and one that wrote 16 blank tokens."""
    req = requests("calls", repeats=1)
    spent = read(req, completion("", "length", 16, 16), 16)[0]
    assert "the token budget went to reasoning (16 of the reply's 16 completion tokens " \
        "were reasoning; max_tokens 16)" in spent.error
    assert truncated_by_reasoning(spent)
    shown = read(req, completion(None, "length", 16, 0,
                                 reasoning_content="Let me think about who ..."), 16)[0]
    assert "went to reasoning (the reply holds reasoning content" in shown.error
    blank = read(req, completion(" \n", "length", 16, 0), 16)[0]
    assert blank.status == "truncated" and not truncated_by_reasoning(blank)
    assert blank.error.startswith("finish_reason=length after 16 completion token(s)")
    assert "raise --max-tokens (now 16)" in blank.error


def test_the_run_line_names_each_cause(capsys):
    """The line the audit prints: 60 of 320 truncated by a model that showed no
    reasoning say so (before: "the token budget went to reasoning" for all 60)."""
    reqs = requests("logprobs")
    blank = read(reqs, completion("\n\n\n", "length", 3, 0, ["\n", "\n", "\n"]),
                 LOGPROBS_MAX_TOKENS)[0]
    ok = SimpleNamespace(status="ok", error="", reasoning_tokens=None)
    stub = SimpleNamespace(truncated={}, config=SimpleNamespace(max_tokens=16))
    Asker._warn_truncated(stub, [blank] * 60 + [ok] * 260, "consistency",  # type: ignore[arg-type]
                          generations=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and stub.truncated == {"consistency": 60}
    assert err[0].startswith("fairness-tests: 60 of 320 consistency answers were truncated "
                             "without an answer, e.g. finish_reason=length after 3 "
                             "completion token(s)")
    assert "went to reasoning" not in err[0]


@pytest.mark.parametrize("generations, setting", [(False, "--max-tokens (now 16)"),
                                                   (True, "max_new_tokens")])
def test_the_setting_named_follows_the_request_kind(capsys, generations, setting):
    """The setting a truncated answer asks to raise depends on what was asked: a
    generation's max_new_tokens, else ``--max-tokens`` (any benchmark's choice or
    loglikelihood requests, not only BBQ's by name)."""
    reqs = requests("logprobs")
    blank = read(reqs, completion("\n\n\n", "length", 3, 0, ["\n", "\n", "\n"]),
                 LOGPROBS_MAX_TOKENS)[0]
    blank.reasoning_tokens = 5
    stub = SimpleNamespace(truncated={}, config=SimpleNamespace(max_tokens=16))
    Asker._warn_truncated(stub, [blank], "kobbq", generations)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert f"raise {setting}" in err and stub.truncated == {"kobbq": 1}
