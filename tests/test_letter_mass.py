"""The letter-mass rule of the logprobs repeat mode, on cases computed by hand:
which tokens are which letter (exactly as the answer prefix makes them appear, no case
folding), the letter mass, the 0.5 floor below which a prompt's distribution is
invalid, and the same rule end to end against the loopback server."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from fairness_tests.models.asking.runner import ask_counted
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.requests import repeat_modes as RM
from fairness_tests.models.requests.answers import answer_state
from fairness_tests.models.requests.letters import letter_distribution
from fairness_tests.models.requests.request import Decoding, Request, Response, chat
from fairness_tests.models.store.store import ResponseStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_server import FaultServer  # noqa: E402

L = ("a", "b", "c")


def lp(p: float) -> float:
    return math.log(p)


# ----------------------------------------------------------------------------- tokens

@pytest.mark.parametrize("token, after_open, expect", [
    ("b", True, 1), ("b)", True, 1), (" b", True, None), ("(b", True, None),
    ("B", True, None), ("A", True, None), ("bb", True, None), ("b.", True, None),
    ("b", False, 1), (" b", False, 1), ("(b", False, 1), (" (b)", False, 1),
    ("b)", False, 1), ("A", False, None), (" A", False, None), ("B", False, None),
    ("c.", False, None), ("The", False, None), ("", False, None),
])
def test_which_token_is_which_letter(token, after_open, expect):
    assert RM.letter_index(token, L, after_open) == expect


def test_upper_case_letters_match_upper_case_choices_only():
    assert RM.letter_index("A", ("A", "B", "C"), True) == 0
    assert RM.letter_index("a", ("A", "B", "C"), True) is None


# ----------------------------------------------------------------------------- mass

def test_after_the_answer_prefix_only_bare_letters_count():
    # after "Answer: (": b .6, a .2, c .1 count; "The" .05, "B" .03, " b" .02 do not
    top = [("b", lp(.6)), ("a", lp(.2)), ("c", lp(.1)), ("The", lp(.05)), ("B", lp(.03)),
           (" b", lp(.02))]
    s, mass = RM.letter_scores(top, L, after_open_bracket=True)
    assert mass == pytest.approx(0.9)
    assert np.allclose(np.exp(s), [0.2, 0.6, 0.1])
    # the distribution the repeats are drawn from at T = 1: q_l / mass
    assert np.allclose(letter_distribution(s, 1.0), [0.2 / 0.9, 0.6 / 0.9, 0.1 / 0.9])


def test_a_sentence_starting_article_is_not_option_a():
    """The artefact of issue 27: a chat reply starting "A ..." read as option (a)."""
    top = [("A", lp(.6)), ("The", lp(.3)), ("b", lp(.1))]
    s, mass = RM.letter_scores(top, L)
    assert mass == pytest.approx(0.1)              # only "b" is a letter
    assert mass < RM.MIN_LETTER_MASS               # -> the prompt's answers are invalid
    # the old rule (case folded) made it a .6 + b .1 = .7, renormalised to [6/7, 1/7, 0]


def test_merged_closing_bracket_and_the_very_unlikely_marker():
    s, mass = RM.letter_scores([("b)", lp(.7)), ("a", lp(.1)), ("c", -9999.0)], L, True)
    assert mass == pytest.approx(0.8) and np.allclose(np.exp(s), [0.1, 0.7, 0.0])
    assert np.isneginf(s[2])


def test_without_a_prefix_the_answer_is_after_brackets():
    tokens = ["(", "b", ")"]
    j = RM.answer_position(tokens)
    assert j == 1
    s, mass = RM.letter_scores([("b", lp(.5)), ("c", lp(.3)), ("C", lp(.2))], L)
    assert mass == pytest.approx(0.8) and np.allclose(np.exp(s) / mass, [0, .625, .375])


@pytest.mark.parametrize("probs, valid", [
    ((0.25, 0.25), True),          # mass 0.5: at the floor, usable
    ((0.251, 0.25), True),
    ((0.249, 0.25), False),        # mass 0.499: below
    ((0.0, 0.0), False),
])
def test_the_floor_is_half_the_mass(probs, valid):
    top = [(x, lp(p)) for x, p in zip(("a", "b"), probs, strict=True) if p > 0] + [("x", lp(0.4))]
    _, mass = RM.letter_scores(top, L, True)
    assert (mass >= RM.MIN_LETTER_MASS) == valid
    assert RM.MIN_LETTER_MASS == 0.5


# ----------------------------------------------------------------------------- end to end

def _reqs(server, model, tag, repeats=4):
    return RM.apply_mode([Request(messages=chat("Pick one.", f"{tag} q"), backend="litellm",
                                  model=model, api_base=server.url, kind="choice", choices=L,
                                  decoding=Decoding(1.0, 1.0, 4), seed=1, repeat=k)
                          for k in range(repeats)], "logprobs")


def test_low_mass_prompt_is_invalid_not_a_guess(tmp_path):
    with FaultServer(answers=lambda p: {"A": .6, "The": .3, "b": .1}) as s, \
            ResponseStore(tmp_path / "s.sqlite") as st:
        out, counts = ask_counted(_reqs(s, "openai/m", "article"), LiteLLMBackend(timeout_s=5),
                                  st, progress=False)
    assert [(o.status, o.answer, o.letter_probs) for o in out] == [("ok", None, None)] * 4
    assert all(o.letter_mass == pytest.approx(0.1) for o in out)
    assert "letter mass 0.100 below 0.5" in out[0].error
    assert (counts.letter_prompts, counts.low_mass_prompts, counts.invalid) == (1, 1, 4)
    assert counts.low_mass_share == 1.0


def test_after_the_prefix_on_a_completion_endpoint_the_letters_are_exact(tmp_path):
    """llama.cpp (logits_all on) serving a base model over /v1/completions: the prompt ends
    with "Answer: (", the first token's top log-probabilities give the letters."""
    dist = {"b": .6, "a": .2, "c": .1, "The": .05, "B": .05}
    with FaultServer.llama_cpp(logits_all=True, answers=lambda p: dist) as s, \
            ResponseStore(tmp_path / "s.sqlite") as st:
        be = LiteLLMBackend(timeout_s=5)
        out, counts = ask_counted(_reqs(s, "text-completion-openai/m", "prefixed"), be, st,
                                  progress=False)
        body = s.hits[0].body
    assert body["prompt"].endswith("assistant: Answer: (") and body["logprobs"] == 20
    assert body["stop"] == [")", "\n"]
    for o in out:
        assert o.status == "ok" and o.answer is not None
        assert o.letter_mass == pytest.approx(0.9)
        assert np.allclose(o.letter_probs, [0.2 / 0.9, 0.6 / 0.9, 0.1 / 0.9])
    assert (counts.letter_prompts, counts.low_mass_prompts, counts.invalid) == (1, 0, 0)
    assert be.totals().top_logprobs_returned == 5        # the whole toy vocabulary


def test_answer_states_for_the_rules_layer():
    q = Request(messages=chat(None, "q"), kind="choice", choices=L)
    cases = [(Response(key="", status="error"), "error"),
             (Response(key="", status="refused"), "refused"),
             (Response(key="", status="truncated"), "truncated"),
             (Response(key="", text="b", answer=1), "valid"),
             (Response(key="", text="maybe"), "invalid"),
             (Response(key="", letter_mass=0.1), "low_mass"),
             (Response(key="", letter_mass=0.9, answer=2, letter_probs=[0, 0, 1]), "valid"),
             # a local backend keeps its answer whatever the mass: it was measured
             (Response(key="", letter_mass=0.1, answer=0, letter_probs=[1, 0, 0]), "valid")]
    assert [answer_state(q, r) for r, _ in cases] == [s for _, s in cases]
    gen = Request(messages=chat(None, "g"))
    assert answer_state(gen, Response(key="", text="")) == "valid"
