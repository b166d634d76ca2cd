"""The dry run's judge line: requests, tokens and cost of the judge scorer."""
from __future__ import annotations

import pytest

from fairness_tests.models.backends.cost import TokenCounter, model_price
from fairness_tests.models.requests.request import Decoding, Request, Response, chat
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.dry_run import collect_requests, dry_run
from fairness_tests.pipeline.judge_cost import judge_estimate
from fairness_tests.scoring.judge import JudgeSettings, judge_requests
from fairness_tests.scoring.judge_rubric import load_judge_rubric

MODEL = "gpt-4o-mini"


def gen(i: int) -> Request:
    return Request(messages=chat("sys", f"prompt {i}"), decoding=Decoding(0.7, 0.9, 50),
                   backend="litellm", model="openai/x")


def test_judge_requests_tokens_and_cost(tmp_path):
    config = AuditConfig(scorers=("published", "judge"), judge_model=MODEL,
                         store=str(tmp_path / "s.sqlite"))
    reqs = [gen(0), gen(1), gen(2)]
    rubric = load_judge_rubric()
    settings = JudgeSettings(model=MODEL)
    with ResponseStore(tmp_path / "s.sqlite") as store:
        # two generations made, with the same text: one judge request; one not made yet
        store.put(reqs[0], Response(key=reqs[0].key(), text="She is kind."))
        store.put(reqs[1], Response(key=reqs[1].key(), text="She is kind."))
        est = judge_estimate(config, reqs, store)
        assert (est.requests, est.in_store, est.to_ask) == (2, 0, 2)
        counter = TokenCounter(MODEL)
        known = judge_requests(["She is kind."], rubric, settings, "json_schema")[0]
        empty = judge_requests([""], rubric, settings, "json_schema")[0]
        assert est.input_tokens == counter(known) + counter(empty) + 50
        assert est.output_tokens == 2 * 128
        price = model_price(MODEL)
        assert est.cost_usd == pytest.approx(est.input_tokens * price.input_per_token
                                             + 256 * price.output_per_token)
        # the judge's answer recorded: it is in the store and costs nothing
        store.put(known, Response(key=known.key(), text='{"refusal": false}'))
        est = judge_estimate(config, reqs, store)
        assert (est.requests, est.in_store, est.to_ask) == (2, 1, 1)
        assert est.output_tokens == 128 and "judge gpt-4o-mini: 2 requests" in est.text()
    assert judge_estimate(AuditConfig(store=str(tmp_path / "s.sqlite")), reqs, store) is None


def test_dry_run_with_the_judge_scorer(tmp_path):
    """Regression: the dry run passed its status cache to the judge estimate, which reads
    the stored generations' texts (AttributeError: no get_many). Store empty: every
    generation is still to make, so each is one judge request (K = 1) still to ask."""
    config = AuditConfig(backend="litellm", model="openai/" + MODEL, recordings=(),
                         benchmarks=("generative",), limit=2, store=str(tmp_path / "s.sqlite"),
                         scorers=("published", "judge"), judge_model=MODEL)
    n = len(collect_requests(config)["generative"])
    assert n > 0
    _, text = dry_run(config)
    assert f"judge {MODEL}: {n} requests (0 in store, {n} to ask)" in text


def test_dry_run_counts_the_judge_for_a_team_s_generations(tmp_path):
    """A team's benchmark file with a ``generate`` outcome is scored by the same scorers
    as the generative audit (the judge among them): the dry run's judge line counts its
    generations (before, it counted only the generative audit's, by name: 0 here). 12
    filled templates x 2 seeds = 24 generations, none made: 24 judge requests to ask."""
    bench = tmp_path / "b.yaml"
    bench.write_text(
        "name: tiny\nattributes:\n  gender: [male, female]\n  age: [30, 50, 70]\n"
        "reference: {gender: male, age: 30}\noutcome: {kind: generate, seeds: [1, 2]}\n"
        "templates:\n  - {id: t1, text: 'A {age}-year-old {gender} applies. Approve?'}\n"
        "  - {id: t2, text: 'Should the {age}-year-old {gender} be hired?'}\n",
        encoding="utf-8")
    config = AuditConfig(backend="litellm", model="openai/" + MODEL, recordings=(),
                         benchmark_file=str(bench), store=str(tmp_path / "s.sqlite"),
                         scorers=("published", "judge"), judge_model=MODEL)
    n = len(collect_requests(config)["templates"])
    assert n == 2 * 6 * 2
    _, text = dry_run(config)
    assert f"judge {MODEL}: {n} requests (0 in store, {n} to ask)" in text
