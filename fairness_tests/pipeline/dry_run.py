"""The dry run: per protocol and repeat mode, the requests, tokens and cost a run would
spend and what the store already holds (:mod:`fairness_tests.models.backends.cost`). It builds
each protocol's requests from the registry and asks nothing."""
from __future__ import annotations

from typing import Any

from fairness_tests.models.backends.base import capabilities_of
from fairness_tests.models.backends.cost import (
    EstimateRow,
    OwnTokenizerCounter,
    StoredStatuses,
    dry_run_rows,
    format_rows,
    model_price,
    still_to_ask,
)
from fairness_tests.models.requests.request import Request
from fairness_tests.pipeline.asker import build_backend, open_run_store, run_requests
from fairness_tests.pipeline.batch_run import dry_run_text as batch_dry_run_text
from fairness_tests.pipeline.benchmark import benchmarks, by_family
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.judge_cost import judge_estimate


def collect_requests(config: AuditConfig) -> dict[str, list[Request]]:
    """The requests each protocol of ``config`` asks, as the run sends them (reasoning
    settings, prompt format); nothing is asked."""
    out: dict[str, list[Request]] = {}
    for family_cls, benches in by_family(config.benchmarks):
        family = family_cls(config)
        for p in benches:
            out[p.name] = run_requests(p.requests(family), config)
    return out


def dry_run(config: AuditConfig) -> tuple[list[EstimateRow], str]:
    """``(rows, printable table)``: what the run would ask, spend and find in the store.
    What is counted follows the configured backend's capabilities: a remote one is priced
    and shown in every repeat mode; one that shares prompt prefixes counts tokens with its
    own tokenizer and adds its prefix-sharing lines."""
    by_protocol = collect_requests(config)
    backend = build_backend(config)
    caps = capabilities_of(backend)
    local = backend if caps.prefix_sharing else None
    with open_run_store(config) as opened:
        store = StoredStatuses(opened)
        # a local model computes each distinct prompt once whatever the repeat mode (the
        # other modes are shapes of API requests): its row only, its own token counts
        rows = dry_run_rows(by_protocol, store, config.model, config.repeat_mode, caps,
                            counter=OwnTokenizerCounter(local.prompt_tokens_of) if local
                            else None)
        sharing = prefix_sharing_text(by_protocol, store, local) if local else None
        # the judge reads the stored generations' texts, not only their statuses
        scored = {b.name for b in benchmarks() if b.scored}
        judge = judge_estimate(config, [r for name, reqs in by_protocol.items()
                                        if name in scored for r in reqs
                                        if r.kind == "generate"], opened)
    price = model_price(config.model) if caps.remote else None
    text = format_rows(rows, config.model, price, local=not caps.remote)
    if not caps.remote:
        text += f"\n{config.backend_name()} backend: a local model, no API cost"
    if sharing:
        text += "\n" + sharing
    if config.batch and caps.remote:
        text += "\n" + batch_dry_run_text(rows, config)
    if judge is not None:
        text += "\n" + judge.text()
    return rows, text


def prefix_sharing_text(by_protocol: dict[str, list[Request]], store: Any, backend: Any) -> str:
    """The dry run's prefix-sharing lines for a local model (``backend``, a
    :class:`~fairness_tests.models.backends.transformers_backend.TransformersBackend`):
    per protocol and for the whole run, the multiple-choice prompts still to ask (not in
    the store), their tokens, and the tokens the backend's prefix tree would compute
    (its ``plan_tokens``; loads the model's tokenizer and weights, asks nothing)."""

    named = list(by_protocol.items())
    if len(named) > 1:
        named.append(("total", [r for reqs in by_protocol.values() for r in reqs]))
    lines = ["prefix sharing (tokens the model computes / tokens in the prompts still to ask):"]
    for name, reqs in named:
        prompts, tokens, computed = backend.plan_tokens(still_to_ask(reqs, store)[1])
        share = f"{100 * computed / tokens:.1f}%" if tokens else "-"
        lines.append(f"  {name:12} {prompts:>7} prompts {computed:>10} / {tokens:>10} tokens "
                     f"({share})")
    return "\n".join(lines)
