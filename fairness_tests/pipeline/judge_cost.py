"""What the judge scorer would ask, for the dry run (``audit --dry-run --scorers ...,judge``).

The judge asks one request per distinct generation text and repeat. Before the run the
texts are known only for generations the store already holds (``ok``); the others are
counted as if every one were distinct (an upper bound). Per judge request:

- input tokens: the judge's prompt (:mod:`fairness_tests.scoring.judge_prompt`) counted
  by litellm's token counter for the judge model; for a generation not yet made, the
  prompt with an empty response plus the generation's ``max_tokens`` (at most);
- output tokens: ``--judge-max-tokens`` (at most);
- cost: by litellm's local cost map for the judge model (unknown when it has no price;
  none for a local judge).

Judge requests the store already answers are counted as ``in store`` and cost nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

from fairness_tests.models.backends.cost import TokenCounter, model_price, still_to_ask
from fairness_tests.models.requests.request import Request
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.config_scorers import split_scorers
from fairness_tests.pipeline.scorers import is_local
from fairness_tests.scoring.judge import JudgeSettings, judge_requests
from fairness_tests.scoring.judge_prompt import JudgeMode
from fairness_tests.scoring.judge_rubric import load_judge_rubric


@dataclass(frozen=True)
class JudgeEstimate:
    """The judge's share of a dry run."""
    model: str
    requests: int           # judge requests (distinct texts known + generations to make) x K
    in_store: int
    to_ask: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    local: bool

    def text(self) -> str:
        cost = ("no API cost (a local model)" if self.local else
                "cost unknown (no price in litellm's local cost map)" if self.cost_usd is None
                else f"at most ${self.cost_usd:.4f}")
        return (f"judge {self.model}: {self.requests} requests ({self.in_store} in store, "
                f"{self.to_ask} to ask), at most {self.input_tokens} input and "
                f"{self.output_tokens} output tokens, {cost}; generations not yet made are "
                "counted as distinct texts")


def judge_estimate(config: AuditConfig, generation_requests: list[Request],
                   store: ResponseStore) -> JudgeEstimate | None:
    """The judge's requests, tokens and cost (None when the run has no judge scorer)."""
    if "judge" not in split_scorers(config.scorers or ()) or not config.judge_model:
        return None
    model = str(config.judge_model)
    local = is_local(model)
    rubric = load_judge_rubric(config.judge_rubric)
    settings = JudgeSettings(model=model, backend="transformers" if local else "litellm",
                             temperature=config.judge_temperature,
                             max_tokens=config.judge_max_tokens, repeats=config.judge_repeats,
                             seed=config.seed)
    got = store.get_many([r.key() for r in generation_requests])
    known = sorted({got[r.key()].text or "" for r in generation_requests
                    if r.key() in got and got[r.key()].status == "ok"})
    pending = [r for r in generation_requests
               if r.key() not in got or got[r.key()].status != "ok"]
    mode: JudgeMode = "prompt" if local else "json_schema"
    reqs = judge_requests(known, rubric, settings, mode)
    distinct, missing = still_to_ask(reqs, store)
    k = settings.repeats
    to_ask = len(missing) + len(pending) * k
    inp = out = 0
    if not local:
        counter = TokenCounter(model)
        empty = counter(judge_requests([""], rubric, settings, mode)[0])
        inp = sum(counter(r) for r in missing) + sum(
            (empty + int(r.decoding.max_tokens)) * k for r in pending)
    out = to_ask * settings.max_tokens
    price = None if local else model_price(model)
    cost = None if price is None else inp * price.input_per_token + out * price.output_per_token
    return JudgeEstimate(model, distinct + len(pending) * k, distinct - len(missing), to_ask,
                         inp, out, cost, local)
