"""``audit --batch``: how a run uses provider batch jobs (:mod:`fairness_tests.models.batch.batch`).

- :func:`check_batch`: at the start of a live run, the model's provider must have a batch
  API litellm can drive (else one line, exit 2, before anything is uploaded).
- the asker (:class:`~fairness_tests.pipeline.asker.Asker`) asks the run's live litellm
  backend through a :class:`~fairness_tests.models.batch.batch.BatchBackend` (the runner, the
  store and the leases are as for direct asking; only the misses go, as batch lines).
- :func:`dry_run_text`: the dry run's batch lines (the batch price beside the direct one).
- :func:`submit_all`: before any protocol is collected, every protocol's misses are
  submitted (one set of jobs per protocol, side by side at the provider), so a run waits
  for one completion window, not one per protocol. With ``--batch-wait none`` the run
  stops there (:class:`~fairness_tests.models.batch.batch.BatchPending`, exit 7) while any job
  runs; the same command collects.
"""
from __future__ import annotations

import sys
from typing import Any

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.asking.runner import stamp_requests
from fairness_tests.models.asking.shard import in_shard, parse_shard
from fairness_tests.models.backends.cost import EstimateRow
from fairness_tests.models.batch.batch import BatchBackend, BatchPending
from fairness_tests.models.batch.batch_lines import COMPLETION_WINDOW, batch_price, batch_route
from fairness_tests.models.info import BatchInfo
from fairness_tests.models.requests.repeat_modes import RepeatModeUnsupported, apply_mode
from fairness_tests.pipeline.asker import run_requests
from fairness_tests.pipeline.benchmark import by_family
from fairness_tests.pipeline.config import AuditConfig


def check_batch(config: AuditConfig) -> None:
    """A live ``--batch`` run's model must have a batch route (ConfigError naming --batch)."""
    if config.batch and config.live:
        batch_route(_model(config))


def _model(config: AuditConfig) -> str:
    name = config.model
    return f"openai/{name}" if config.api_base and "/" not in name else name


def submit_all(config: AuditConfig, asker: Any) -> None:
    """Submit every protocol's requests the store lacks (see the module docstring)."""
    if not (config.batch and config.live):
        return
    backend: BatchBackend = asker.backend
    jobs = []
    for family_cls, benches in by_family(config.benchmarks):
        family = family_cls(config)
        for p in benches:
            requests = run_requests(p.requests(family), config)
            if config.shard:
                i, n = parse_shard(config.shard)
                requests = [r for r in requests if in_shard(r.key(), i, n)]
            backend.label = p.name
            jobs += _submit(asker, backend, requests)
    if config.batch_wait == "none":
        running = backend.pending(jobs)
        if running:
            raise BatchPending(running)


def _submit(asker: Any, backend: BatchBackend, requests: list) -> list:
    """Submit the misses of ``requests`` in the asker's repeat mode (falling back to
    ``calls`` as the asker does when the provider does not honour it), holding their
    leases meanwhile so no other process submits them too."""
    try:
        shaped = stamp_requests(apply_mode(requests, asker.mode), backend)
        return _claimed_submit(asker.store, backend, shaped)
    except RepeatModeUnsupported as exc:
        asker.fallback, asker.mode = exc, "calls"
        print(f"fairness-tests: {exc}; asking with --repeat-mode calls instead "
              f"(recorded in the run's metadata)", file=sys.stderr)
        return _claimed_submit(asker.store, backend, stamp_requests(requests, backend))


def _claimed_submit(store: Any, backend: BatchBackend, requests: list) -> list:
    first: dict[str, Any] = {}
    for r in requests:
        first.setdefault(r.key(), r)
    claimed = store.claim(list(first), retry_errors=True)
    try:
        return backend.submit([first[k] for k in claimed])
    finally:
        store.release(claimed)


def batch_report(config: AuditConfig, asker: Any) -> BatchInfo | None:
    """The run's batch provenance (None when it did not use ``--batch`` live)."""
    backend = asker._live
    if not (config.batch and config.live) or not isinstance(backend, BatchBackend):
        return None
    return backend.report(asker.keys)


def dry_run_text(rows: list[EstimateRow], config: AuditConfig) -> str:
    """The dry run's batch lines: where the batch lines would go, the completion window,
    the batch price and its source, and per protocol row of the run's repeat mode the
    direct and the batch cost (``input tokens x batch input price + output tokens x batch
    output price``; "unknown" where there is no batch price)."""
    model = _model(config)
    try:
        route = batch_route(model)
    except ConfigError as exc:
        return f"--batch: {exc}"
    price = batch_price(model)
    lines = [f"--batch: {route.endpoint} through {route.calls_provider}'s Files + Batches "
             f"API, completion window {COMPLETION_WINDOW} (results within it, not at once)",
             "batch price: " + (f"{price.source}: ${price.input_per_token * 1e6:.4g} / "
                                f"${price.output_per_token * 1e6:.4g} per million input / "
                                f"output tokens ({price.discount} off the direct price)"
                                if price else "unknown (no batch price in litellm's local "
                                "cost map and no documented discount for this provider)")]
    head = f"{'benchmark':12} {'mode':9} {'lines':>8} {'direct USD':>12} {'batch USD':>12}"
    lines += [head, "-" * len(head)]
    for r in rows:
        if not r.selected:
            continue
        cost = None if price is None else (r.input_tokens * price.input_per_token
                                           + r.output_tokens * price.output_per_token)
        lines.append(f"{r.protocol:12} {r.repeat_mode:9} {r.calls:>8} {_usd(r.cost_usd):>12} "
                     f"{_usd(cost):>12}")
    return "\n".join(lines)


def _usd(x: float | None) -> str:
    return "unknown" if x is None else f"{x:.6f}"
