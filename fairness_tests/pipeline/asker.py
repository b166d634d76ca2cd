"""Store + backend for one run: every protocol asks through an :class:`Asker`.

The store answers what it has (the recordings the manifest lists for the model are
imported first); the backend is asked for the rest, live, or the replay backend refuses
what was never recorded. Repeats are asked in the run's repeat mode, falling back to
``calls`` once when the provider does not honour it; a sharded run asks only its shard.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fairness_tests.core.errors import ConfigError, DataError
from fairness_tests.core.paths import default_store_path
from fairness_tests.models.asking.runner import ask_counted
from fairness_tests.models.asking.shard import in_shard, parse_shard
from fairness_tests.models.backends import get_backend
from fairness_tests.models.backends.cost import BudgetReached, model_price
from fairness_tests.models.batch.batch import BatchBackend
from fairness_tests.models.requests.answers import (
    REASONING_SPENT,
    AskCounts,
    truncated_by_reasoning,
)
from fairness_tests.models.requests.prompt_format import (
    DEFAULT_ANSWER_PREFIX,
    DEFAULT_PROMPT_FORMAT,
)
from fairness_tests.models.requests.repeat_modes import RepeatModeUnsupported, apply_mode
from fairness_tests.models.requests.request import Request, Response
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.recordings import default_recordings

DEFAULTS = {"prompt_format": DEFAULT_PROMPT_FORMAT, "answer_prefix": DEFAULT_ANSWER_PREFIX}


def with_reasoning(requests: Sequence[Request], config: AuditConfig) -> list[Request]:
    """``requests`` with the run's reasoning settings (part of their keys) when set."""
    if config.reasoning_effort is None and config.thinking_budget is None:
        return list(requests)
    return [r.with_(decoding=replace(r.decoding, reasoning_effort=config.reasoning_effort,
                                     thinking_budget=config.thinking_budget))
            for r in requests]


def with_prompt_format(requests: Sequence[Request], config: AuditConfig) -> list[Request]:
    """``requests`` with the run's prompt format and answer prefix (part of their keys)
    where they are not the defaults: every key this run computes (the store's, the
    dry run's, the shard's, the export's) says how the prompt is sent."""
    fields = {k: v for k, v in (("prompt_format", config.prompt_format),
                                ("answer_prefix", config.answer_prefix))
              if v != DEFAULTS[k]}
    if not fields:
        return list(requests)
    return [r.with_(**{k: v for k, v in fields.items() if getattr(r, k) is None})
            for r in requests]


def run_requests(requests: Sequence[Request], config: AuditConfig) -> list[Request]:
    """``requests`` as this run sends them: reasoning settings and prompt format."""
    return with_prompt_format(with_reasoning(requests, config), config)


def build_backend(config: AuditConfig, rate_limit_path: str | None = None) -> Any:
    """The backend ``config`` chooses (:meth:`~.config.ModelOptions.backend_name`), with
    its options: unstarted. ``rate_limit_path``: the file a rate limit is shared through."""
    c = config
    if c.backend_name() == "transformers":
        return get_backend("transformers", model=c.backend_model(),
                           batch_size=c.batch_size, workers=c.workers)
    opts: dict[str, Any] = {"max_cost_usd": c.max_cost, "prompt_format": c.prompt_format,
                            "answer_prefix": c.answer_prefix}
    if c.api_base:
        opts["api_base"] = c.api_base
    limits = {k: v for k, v in (("rpm", c.rpm), ("tpm", c.tpm)) if v}
    if limits:
        opts.update(limits, rate_limit_path=rate_limit_path)
    return get_backend(c.backend_name(), **opts)


def open_run_store(config: AuditConfig) -> ResponseStore:
    """The run's store (created when new)."""
    path = Path(config.store) if config.store else default_store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return ResponseStore(path)


class Asker:
    """Store + backend for one run; every protocol asks through it."""

    def __init__(self, config: AuditConfig):
        self.config = config
        self.mode = config.repeat_mode          # "calls" after a fallback
        self.fallback: RepeatModeUnsupported | None = None
        self.truncated: dict[str, int] = {}
        self.store = open_run_store(config)
        recordings = default_recordings(config.model, config.benchmarks) \
            if config.recordings is None else config.recordings
        self.imported = 0
        for rec in recordings:
            self.imported += self.store.import_jsonl(rec).get("added", 0)
        self._backend: Any = None
        self._live: Any = None
        self.counts: dict[str, int] = {}
        self.ask_counts: dict[str, AskCounts] = {}   # per protocol: sent, from store, failed
        self.keys: list[str] = []           # every request key this run asked, in order
        self.size_at_start = len(self.store)

    @property
    def backend(self) -> Any:
        if self._backend is None:
            if self.config.live:
                self._backend = self.live_backend()
            else:
                try:   # replay checks each row against what the live backend would add
                    fingerprint = self.live_backend().fingerprint()
                except DataError:    # a local checkpoint not on this machine: unchecked
                    fingerprint = {}
                self._backend = get_backend("replay", store=self.store, fingerprint=fingerprint)
        return self._backend

    def live_backend(self) -> Any:
        """The backend that answers live, built once (unstarted: loading weights or
        importing litellm happens on its first request)."""
        if self._live is None:
            self._live = build_backend(self.config, f"{self.store.path}.limits")
            c = self.config
            if c.batch and c.live:          # --batch: the misses go as provider batch jobs
                self._live = BatchBackend(self._live, self.store, model=c.model,
                                          poll_s=c.batch_poll,
                                          wait=c.batch_wait, fallback=c.batch_fallback)
        return self._live

    def ask(self, requests: Sequence[Request], label: str) -> list[Response]:
        """Responses to a protocol's requests (``label``: the protocol), asked with the
        run's reasoning settings and repeat mode. A sharded run (``--shard i/N``) asks
        only its shard's requests; the others come back as error rows ("outside shard"),
        so it records and reports no tables."""
        requests = run_requests(requests, self.config)
        if isinstance(self._live, BatchBackend):
            self._live.label = label            # the protocol its batch jobs are for
        mine = requests
        if self.config.shard:
            i, n = parse_shard(self.config.shard)
            mine = [r for r in requests if in_shard(r.key(), i, n)]
        out, sent = self._ask(mine, label)
        if isinstance(self._live, BatchBackend):   # the keys its provenance reports
            self._live.note(apply_mode(mine, self.mode))
        self.keys.extend(r.key() for r in mine)
        self.counts[label] = len(requests)
        self.counts[f"{label}_new"] = sent     # requests sent (an error row asked again too)
        self._warn_truncated(out, label, any(r.kind == "generate" for r in requests))
        if not self.config.shard:
            return out
        self.counts[f"{label}_shard"] = len(mine)
        got = dict(zip((r.key() for r in mine), out, strict=True))
        return [got.get(r.key()) or Response(key=r.key(), status="error",
                                             error=f"outside shard {self.config.shard}")
                for r in requests]

    def _warn_truncated(self, out: list[Response], label: str, generations: bool) -> None:
        """One line per cause of the truncated answers: the budget spent on reasoning
        (only where the reply showed reasoning), or cut for another reason (what the
        first such reply says happened). The setting to raise: the decoding's
        max_new_tokens for generations, ``--max-tokens`` for the other request kinds."""
        truncated = [r for r in out if r.status == "truncated"]
        if not truncated:
            return
        self.truncated[label] = len(truncated)
        reasoning = [r for r in truncated if truncated_by_reasoning(r)]
        other = [r for r in truncated if not truncated_by_reasoning(r)]
        setting = ("max_new_tokens (the suite's decoding, or --gen-max-new-tokens)"
                   if generations else f"--max-tokens (now {self.config.max_tokens})")
        if reasoning:
            print(f"fairness-tests: {len(reasoning)} of {len(out)} {label} answers were "
                  f"truncated (finish_reason=length with no answer: {REASONING_SPENT}); "
                  f"raise {setting} or lower --reasoning-effort / --thinking-budget",
                  file=sys.stderr)
        if other:
            first = other[0]
            said = (first.error if "no reasoning" in first.error else
                    f"the reply showed no reasoning; {first.completion_tokens} completion "
                    f"token(s)")
            print(f"fairness-tests: {len(other)} of {len(out)} {label} answers were "
                  f"truncated without an answer, e.g. {said}", file=sys.stderr)

    def _ask(self, requests: list[Request], label: str) -> tuple[list[Response], int]:
        """The responses and how many distinct requests were sent to the backend (an
        error row asked again counts: the ``<label>_new`` of the run's ``requests``)."""
        try:
            try:
                out, counts = ask_counted(apply_mode(requests, self.mode), self.backend,
                                          self.store, progress=self.config.progress,
                                          label=label)
            except RepeatModeUnsupported as exc:
                self.fallback, self.mode = exc, "calls"
                print(f"fairness-tests: {exc}; asking with --repeat-mode calls instead "
                      f"(recorded in the run's metadata)", file=sys.stderr)
                out, counts = ask_counted(requests, self.backend, self.store,
                                          progress=self.config.progress, label=label)
        except BudgetReached as exc:
            raise exc.with_recorded(len(self.store) - self.size_at_start) from None
        self.ask_counts[label] = counts
        return out, counts.sent

    def failed(self) -> tuple[int, str | None]:
        """Requests of this run that ended in an error after their retries (outside a
        shard's own part), and the first error's message."""
        n = sum(c.failed for c in self.ask_counts.values())
        first = next((c.first_error for c in self.ask_counts.values() if c.failed), None)
        return n, first

    def close(self) -> None:
        self.store.close()


def check_live(config: AuditConfig) -> None:
    """What only a live API run can check before anything is asked: ``--max-cost`` needs
    the model's price."""
    if config.max_cost is not None and config.live and model_price(config.model) is None:
        raise ConfigError(f"--max-cost needs the model's price, and litellm's local cost map "
                          f"has none for {config.model!r}", key="--max-cost")
