"""Repeat modes (calls | n | logprobs) against the loopback OpenAI-compatible server,
with its fallback, and the pure pieces they are built from."""
from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from fairness_tests.benchmarks.bbq.prompt import original_order_probs, predictions_table
from fairness_tests.models.asking.runner import ask, stamp_requests
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend, provider_seed
from fairness_tests.models.backends.litellm_replies import share as _share
from fairness_tests.models.requests import repeat_modes as RM
from fairness_tests.models.requests.letters import draw_letter, letter_distribution
from fairness_tests.models.requests.request import Decoding, Request, Response, chat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_server import FaultServer  # noqa: E402

LETTERS = ("a", "b", "c")
# the loopback model's one-token reply: "b" is letter b; "B" is not (letters are matched
# as the prompt shows them, "(b)"); "I" is no letter
DIST = {"a": 0.5, "b": 0.2, "B": 0.1, "c": 0.15, "I": 0.05}


def dist(prompt: str) -> dict[str, float]:
    return DIST


@pytest.fixture(scope="module")
def server():
    with FaultServer(answers=dist) as s:
        yield s


def choice_reqs(server, tag: str, items: int, repeats: int, mode: str = "calls",
                model: str = "openai/fault-model", temperature: float = 1.0) -> list[Request]:
    out = []
    for i in range(items):
        for k in range(repeats):
            out.append(Request(messages=chat("Be brief.", f"{tag} item {i}"), backend="litellm",
                               model=model, api_base=server.url, kind="choice", choices=LETTERS,
                               decoding=Decoding(temperature, 1.0, 4), seed=3, repeat=k,
                               meta={"item": i}))
    return RM.apply_mode(out, mode)


def backend(**kw) -> LiteLLMBackend:
    opts = dict(timeout_s=5, max_retries=1, backoff_base_s=0.05, backoff_max_s=0.1, seed=1)
    opts.update(kw)
    return LiteLLMBackend(**opts)


# ----------------------------------------------------------------------------- pure parts

def test_letter_scores_exact_letters_brackets_and_no_case_folding():
    top = [("a", math.log(0.5)), (" B", math.log(0.1)), ("(b", math.log(0.2)),
           ("c.", math.log(0.15)), ("I", math.log(0.05)), ("ab", math.log(0.01))]
    # without an answer prefix: a .5, "(b" .2; " B" is not b (no case folding), "c." is
    # no letter token (only brackets around the letter), "I" and "ab" are none
    s, mass = RM.letter_scores(top, LETTERS)
    assert np.allclose(np.exp(s), [0.5, 0.2, 0.0])
    assert mass == pytest.approx(0.7)
    s, mass = RM.letter_scores([("a", 0.0), ("x", -1.0)], LETTERS)
    assert s[0] == 0.0 and np.isneginf(s[1]) and np.isneginf(s[2]) and mass == 1.0
    # a letter at -9999 (OpenAI's "very unlikely" marker) counts as absent
    s, mass = RM.letter_scores([("c", -9999.0)], LETTERS)
    assert mass == 0.0


def test_answer_position_skips_brackets_stars_and_whitespace():
    assert RM.answer_position(["(", "b", ")"]) == 1
    assert RM.answer_position(["**", " ", "c"]) == 2
    assert RM.answer_position(["b"]) == 0
    assert RM.answer_position([" ", "\n"]) is None
    # after an open bracket the answer is the first token, whatever it is
    assert RM.answer_position(["The", "b"], after_open_bracket=True) == 0
    assert RM.answer_position([], after_open_bracket=True) is None


def test_apply_mode_which_requests_and_keys():
    base = Request(messages=chat(None, "q"), backend="litellm", model="m", kind="choice",
                   choices=LETTERS)
    single = base.with_(messages=chat(None, "asked once"))
    gen = Request(messages=chat(None, "g"), backend="litellm", model="m")
    reqs = [base.with_(repeat=k) for k in range(3)] + [single, gen]
    assert RM.apply_mode(reqs, "calls") == reqs
    n = RM.apply_mode(reqs, "n")
    assert [r.repeat_mode for r in n] == ["n", "n", "n", "calls", "calls"]
    lp = RM.apply_mode(reqs, "logprobs")
    assert [r.repeat_mode for r in lp] == ["logprobs"] * 4 + ["calls"]
    # the mode is part of the key; a calls request's key is what it always was
    assert len({reqs[0].key(), n[0].key(), lp[0].key()}) == 3
    assert n[3].key() == reqs[3].key()
    with pytest.raises(Exception, match="repeat mode must be one of"):
        RM.apply_mode(reqs, "batch")


def test_default_request_key_is_unchanged_by_the_new_fields():
    """A request that uses none of the new settings (repeat mode, reasoning) hashes the
    field layout it had without them: sha256 of the canonical JSON (sorted keys, no
    spaces, integral numbers as ints), so keys of earlier recordings still match."""
    r = Request(messages=chat("s", "u"), decoding=Decoding(0.7, 0.9, 12), seed=2, repeat=1,
                backend="litellm", model="m", kind="choice", choices=LETTERS)
    old = {"backend": "litellm", "model": "m", "kind": "choice",
           "messages": [["system", "s"], ["user", "u"]], "choices": list(LETTERS),
           "decoding": {"temperature": 0.7, "top_p": 0.9, "max_tokens": 12},
           "seed": 2, "repeat": 1}
    blob = json.dumps(old, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert r.key() == hashlib.sha256(blob.encode()).hexdigest()
    with_effort = r.with_(decoding=Decoding(0.7, 0.9, 12, reasoning_effort="low"))
    with_budget = r.with_(decoding=Decoding(0.7, 0.9, 12, thinking_budget=64))
    with_mode = r.with_(repeat_mode="n")
    assert len({r.key(), with_effort.key(), with_budget.key(), with_mode.key()}) == 4
    assert with_effort.key_fields()["decoding"]["reasoning_effort"] == "low"
    assert with_mode.key_fields()["repeat_mode"] == "n" and "repeat_mode" not in r.key_fields()


def test_units_and_batches_keep_repeat_groups_whole():
    base = Request(messages=chat(None, "q"), backend="litellm", model="m", kind="choice",
                   choices=LETTERS)
    other = base.with_(messages=chat(None, "other"))
    reqs = RM.apply_mode([base.with_(repeat=2), other.with_(repeat=0), base.with_(repeat=0),
                          other.with_(repeat=1), base.with_(repeat=1)], "n")
    assert RM.units(reqs) == [[2, 4, 0], [1, 3]]          # repeat order inside a unit
    by_key = {r.key(): r for r in reqs}
    keys = [r.key() for r in reqs]
    got = RM.batches(keys, by_key, size=2)
    # size 2, groups of 3 and 2: never split; each group one batch, in first-key order
    assert [[by_key[k].messages[-1].content for k in b] for b in got] == [["q"] * 3, ["other"] * 2]
    assert sorted(k for b in got for k in b) == sorted(keys)


def test_share_splits_a_total_exactly():
    assert [_share(10, 3, i) for i in range(3)] == [4, 3, 3]
    assert sum(_share(7, 5, i) for i in range(5)) == 7
    assert _share(None, 3, 0) is None


# ----------------------------------------------------------------------------- n

def test_n_mode_one_request_per_prompt_and_billing_adds_up(server, store):
    server.reset()
    reqs = choice_reqs(server, "n-mode", items=4, repeats=5, mode="n")
    be = backend()
    out = ask(reqs, be, store, progress=False)
    hits = [h for h in server.hits if "n-mode" in h.prompt]
    assert len(hits) == 4 and all(h.body["n"] == 5 for h in hits)
    assert all(o.status == "ok" for o in out)
    # choice i of the server's reply answers repeat i: the server seeds choice i by
    # (the seed it was sent, prompt, i); one seed per unit, that of its first repeat
    sent = {h.prompt: h.body["seed"] for h in hits}
    assert set(sent.values()) == {provider_seed(3, 0)}
    for r, o in zip(reqs, out, strict=True):
        prompt = r.messages[-1].content
        expect = server._sample({"temperature": 1.0, "seed": sent[prompt]}, prompt, r.repeat)
        assert o.text == expect
        assert o.answer == (None if expect == "I" else LETTERS.index(expect.lower()))
    # tokens: the prompt once per request, on the unit's first response; sums = what was billed
    assert sum(o.prompt_tokens for o in out) == server.prompt_tokens
    assert sum(o.completion_tokens for o in out) == server.completion_tokens == 20
    assert [o.prompt_tokens > 0 for o in out[:5]] == [True, False, False, False, False]
    assert be.totals().calls == 4
    assert all(store.get(r.key()) is not None for r in reqs)


def test_n_mode_ignored_by_the_provider_is_detected_before_anything_is_stored(store):
    with FaultServer(answers=dist, n_support=False) as s:
        reqs = choice_reqs(s, "no-n", items=3, repeats=4, mode="n")
        with pytest.raises(RM.RepeatModeUnsupported) as info:
            ask(reqs, backend(), store, progress=False)
        assert "returned 1 choice(s) for n=4" in str(info.value)
        assert "openai (openai/fault-model at http://127.0.0.1:" in str(info.value)
        assert len(s.hits) == 1                      # the first unit only, alone
        assert len(store) == 0                       # nothing of the mode was kept
        assert store._execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0   # released


# ----------------------------------------------------------------------------- logprobs

@pytest.mark.parametrize("model", ["openai/fault-model", "text-completion-openai/fault-model"])
@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_logprobs_mode_draws_repeats_from_the_letter_distribution(server, store, model,
                                                                 temperature):
    server.reset()
    tag = f"lp-{model[:4]}-{temperature}"
    reqs = choice_reqs(server, tag, items=3, repeats=6, mode="logprobs", model=model,
                       temperature=temperature)
    be = backend()
    out = ask(reqs, be, store, progress=False)
    # a completion endpoint's requests carry the prompt format in their key (the runner
    # stamps them); the draws are seeded by the stamped request's prompt key
    reqs = stamp_requests(reqs, be)
    assert [o.key for o in out] == [r.key() for r in reqs]
    hits = [h for h in server.hits if tag in h.prompt]
    assert len(hits) == 3
    body = hits[0].body
    if model.startswith("text-completion"):
        assert hits[0].path == "/v1/completions" and body["logprobs"] == RM.TOP_LOGPROBS
    else:
        assert body["logprobs"] is True and body["top_logprobs"] == RM.TOP_LOGPROBS
    assert body["max_tokens"] == 3
    # letters from the raw logprobs: a .5, b .2, c .15 ("B" is not b, "I" no letter);
    # temperature T applied here: p_l ~ q_l ** (1/T)
    q = np.array([0.5, 0.2, 0.15]) ** (1.0 / temperature)
    expect = q / q.sum()
    for r, o in zip(reqs, out, strict=True):
        assert o.status == "ok"
        assert np.allclose(o.letter_probs, expect)
        assert o.letter_mass == pytest.approx(0.85)
        # the one implementation the local backends use
        assert o.answer == draw_letter(np.array(o.letter_probs), r.seed, r.prompt_key(), r.repeat)
        assert o.text == LETTERS[o.answer]
    assert np.allclose(letter_distribution(np.log([0.5, 0.2, 0.15]), temperature), expect)


def test_logprobs_draws_follow_the_distribution_over_many_repeats(server, store):
    """2,000 repeats of one prompt in ONE request: the drawn letters' frequencies are
    within 4 standard errors of letter_probs (seeded, so the test is deterministic)."""
    reqs = choice_reqs(server, "lp-many", items=1, repeats=2000, mode="logprobs")
    out = ask(reqs, backend(), store, progress=False, batch_size=64)
    assert server.count("lp-many") == 1
    p = np.array(out[0].letter_probs)
    freq = np.bincount([o.answer for o in out], minlength=3) / len(out)
    se = np.sqrt(p * (1 - p) / len(out))
    assert np.all(np.abs(freq - p) < 4 * se)


def test_no_logprobs_from_the_provider_is_detected(store):
    with FaultServer(answers=dist, logprobs_support=False) as s:
        reqs = choice_reqs(s, "no-lp", items=3, repeats=2, mode="logprobs")
        with pytest.raises(RM.RepeatModeUnsupported, match="no logprobs in the reply"):
            ask(reqs, backend(), store, progress=False)
        assert len(s.hits) == 1 and len(store) == 0


def test_logprobs_without_any_letter_is_an_invalid_answer_not_a_guess(store):
    with FaultServer(answers=lambda p: {"Sorry": 0.7, "I": 0.3}) as s:
        reqs = choice_reqs(s, "no-letter", items=1, repeats=3, mode="logprobs")
        out = ask(reqs, backend(), store, progress=False)
    assert [(o.status, o.answer, o.text, o.letter_mass) for o in out] == [("ok", None, "", 0.0)] * 3
    assert "no answer letter" in out[0].error


def test_litellm_refusing_to_send_a_mode_falls_back_before_any_request(store):
    """o3-mini: litellm itself does not send logprobs for it (get_supported_openai_params)."""
    with FaultServer(answers=dist) as s:
        reqs = choice_reqs(s, "o3", items=2, repeats=2, mode="logprobs", model="openai/o3-mini")
        with pytest.raises(RM.RepeatModeUnsupported, match="litellm does not send 'logprobs'"):
            ask(reqs, backend(), store, progress=False)
        assert s.hits == []


def test_calls_mode_asks_every_repeat(server, store):
    server.reset()
    reqs = choice_reqs(server, "calls-mode", items=2, repeats=3)
    out = ask(reqs, backend(), store, progress=False)
    hits = [h for h in server.hits if "calls-mode" in h.prompt]
    assert len(hits) == 6 and all("n" not in h.body and "logprobs" not in h.body for h in hits)
    assert sorted(h.body["seed"] for h in hits if "item 0" in h.prompt) == \
        sorted(provider_seed(3, k) for k in range(3))
    assert all(o.status == "ok" for o in out)


def test_mode_record_for_the_card():
    rec = RM.record("n").to_dict()
    assert rec["used"] == "n" and rec["shared_forward_pass"] and rec["fallback"] is None
    assert "between-call nondeterminism is not measured" in rec["note"]
    exc = RM.RepeatModeUnsupported("n", "openai (openai/x)", "returned 1 choice(s) for n=20")
    rec = RM.record("n", exc).to_dict()
    assert rec["used"] == "calls" and not rec["shared_forward_pass"]
    assert "openai (openai/x)" in rec["fallback"] and "fell back to 'calls'" in rec["fallback"]
    assert asdict(RM.record("calls"))["note"].startswith("one request per repeat")


def test_predictions_table_gives_letter_probs_in_original_option_order():
    reqs = [Request(messages=chat(None, "q"), kind="choice", choices=LETTERS,
                    meta={"dataset": "Race_x_SES", "example_id": 7, "rotation": rot,
                          "options": ["x", "y", "z"]}) for rot in (0, 1, 2)]
    lp = [0.6, 0.3, 0.1]                       # P(a), P(b), P(c) as displayed
    resps = [Response(key=r.key(), text="a", answer=0, letter_probs=lp) for r in reqs]
    # rotation r shows original option (p + r) mod 3 at position p
    assert original_order_probs(reqs[0], resps[0]) == [0.6, 0.3, 0.1]
    assert original_order_probs(reqs[1], resps[1]) == [0.1, 0.6, 0.3]
    assert original_order_probs(reqs[2], resps[2]) == [0.3, 0.1, 0.6]
    t = predictions_table(reqs, resps)
    assert t["answer"].tolist() == [0.0, 1.0, 2.0]             # letter a = original (0 + r)
    assert [p[int(a)] for p, a in zip(t["letter_probs"], t["answer"], strict=True)] == [0.6] * 3
    failed = Response(key=reqs[0].key(), status="error", letter_probs=lp)
    assert original_order_probs(reqs[0], failed) is None


def test_n_mode_on_the_completions_endpoint(server, store):
    server.reset()
    reqs = choice_reqs(server, "n-text", items=2, repeats=3, mode="n",
                       model="text-completion-openai/fault-model")
    out = ask(reqs, backend(), store, progress=False)
    hits = [h for h in server.hits if "n-text" in h.prompt]
    assert [(h.path, h.body["n"]) for h in hits] == [("/v1/completions", 3)] * 2
    for r, o in zip(reqs, out, strict=True):
        hit = next(h for h in hits if f"item {r.meta['item']}" in h.prompt)
        assert o.text == server._sample({"temperature": 1.0, "seed": hit.body["seed"]},
                                        hit.prompt, r.repeat)
