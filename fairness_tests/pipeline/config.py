"""The configuration spec: every option of every command, declared once.

Each option is a field of one of the option groups below (:func:`~fairness_tests.core.
options.opt` gives its help, range and spelling; its type annotation gives its type and,
with ``Literal``, its choices). A command's configuration class combines the groups it
uses; the command line, the pytest options and ini keys, and the ``[tool.fairness_tests]``
keys are generated from these fields, and every value, whichever entry point gave it, is
converted and checked by the same code (:func:`fairness_tests.core.options.build`).

Groups: :class:`ModelOptions` (what answers and where responses are kept),
:class:`SizeOptions`, :class:`RubricOptions` and the scorers', :class:`AskingOptions` (API
models and local inference), :class:`StatsOptions`, and every registered benchmark's own
(``Benchmark.option_group``, in its folder); :class:`AuditConfig` is all of them (the
Python API's ``run_audit(AuditConfig(...))``), :class:`AuditCommand` adds the command
line's outputs, :class:`PluginOptions` the pytest plugin's; the gate its own, and a
benchmark's own commands theirs (``Benchmark.configs``).
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from fairness_tests.core.errors import ConfigError, suggest
from fairness_tests.core.options import Checked, opt, specs
from fairness_tests.core.registry import BENCHMARK_NAMES, load_all, units_text
from fairness_tests.models.requests.prompt_format import (
    DEFAULT_ANSWER_PREFIX,
    DEFAULT_PROMPT_FORMAT,
    PromptFormat,
    resolve,
)
from fairness_tests.pipeline.config_benchmarks import (
    OPTION_GROUPS,
    BenchmarkClusterOption,
    BenchmarkFileOption,
    cluster_problems,
    group_problems,
    unasked_options,
)
from fairness_tests.pipeline.config_scorers import ScorerOptions

DEFAULT_MODEL = "embedded:gemma-3-270m"
#: the models an ``embedded:`` id may name (shipped with the package)
EMBEDDED_MODELS: tuple[str, ...] = (DEFAULT_MODEL,)
#: fewer bootstrap resamples cannot place the 2.5% and 97.5% percentiles of a 95%
#: interval on stable order statistics
MIN_N_BOOT = 100

Backend = Literal["transformers", "litellm"]
#: the benchmarks an audit runs when none is named: those that declare ``default``
DEFAULT_BENCHMARKS: tuple[str, ...] = tuple(b.name for b in load_all() if b.default)
API = "API models (litellm)"
LOCAL = "local models (transformers)"


@dataclass(frozen=True, kw_only=True)
class ModelOptions(Checked):
    """What answers, and where its responses are recorded."""
    model: str = opt(DEFAULT_MODEL, "model id: embedded:gemma-3-270m (the default), a "
                     "litellm model id such as openai/gpt-4o-mini, or a checkpoint directory",
                     per_model=True, metavar="MODEL")
    backend: Backend | None = opt(None, "backend that answers (and whose recordings are "
                                  "replayed); default: transformers for embedded: models and "
                                  "checkpoint directories, else litellm")
    live: bool = opt(False, "ask the model for whatever the store lacks (and record it); "
                     "default: replay only", negative="replay", toml=False)
    api_base: str | None = opt(None, "OpenAI-compatible server URL (litellm)", metavar="URL",
                               group=API, regen=True)
    store: str | None = opt(None, "SQLite response store (default: $FAIRNESS_STORE or "
                            ".fairness/store.sqlite)", metavar="PATH", path=True, regen=False,
                            role="inout")
    recordings: tuple[str, ...] | None = opt(
        None, "JSONL(.gz) recordings to import first (default: the files the recordings "
        "manifest lists for the model; given empty: import nothing)", metavar="FILE",
        empty_ok=True, path=True, regen=False, pytest=False)

    def backend_name(self) -> Backend:
        """The backend in force: the explicit one, else by the model id."""
        if self.backend:
            return self.backend
        if self.model.startswith("embedded:") or os.path.exists(self.model):
            return "transformers"
        return "litellm"

    def backend_model(self) -> str:
        """What the backend is given as its model argument."""
        return "embedded" if self.model.startswith("embedded:") else self.model


@dataclass(frozen=True, kw_only=True)
class SizeOptions(Checked):
    """How much a run asks: the smoke run's limit, the tokens of a chosen answer."""
    limit: int | None = opt(None, "smoke run: at most N items per cell of each benchmark "
                            "(BBQ: per dataset x context x polarity, from the consistency "
                            "sample first when the run asks it; 0: every item)", ge=0,
                            metavar="N")
    max_tokens: int = opt(16, "new tokens for a multiple-choice answer (reasoning models "
                          "need more)", ge=1, metavar="N")


@dataclass(frozen=True, kw_only=True)
class RubricOptions(Checked):
    """How generations are scored."""
    rubric: str = opt("published", "scoring rubric: published, strict or a rubric file",
                      metavar="RUBRIC", role="input")
    compare_rubric: str | None = opt("strict", "second rubric for scorer sensitivity "
                                     "(none: skip)", none_word="none", metavar="RUBRIC",
                                     role="input")


@dataclass(frozen=True, kw_only=True)
class AskingOptions(Checked):
    """How a model is asked: API settings (litellm) and local inference (transformers)."""
    repeat_mode: Literal["calls", "n", "logprobs"] = opt(
        "calls", "calls: one request per repeat (the study's protocol); n: one request with "
        "n choices; logprobs: one request, repeats drawn from the letter distribution "
        "(falls back to calls when the provider does not honour it)", group=API)
    reasoning_effort: str | None = opt(None, "litellm reasoning_effort for every request, "
                                       "e.g. low, medium, high", metavar="LEVEL", group=API)
    thinking_budget: int | None = opt(None, "thinking budget in tokens (litellm "
                                      "thinking.budget_tokens)", ge=1, metavar="N", group=API)
    max_cost: float | None = opt(None, "stop cleanly when this run's spend reaches USD "
                                 "(exit 4; run again to resume)", gt=0, metavar="USD",
                                 group=API, regen=False)
    rpm: float | None = opt(None, "API requests per minute, shared by every process using "
                            "the store", gt=0, metavar="N", group=API, regen=False)
    tpm: float | None = opt(None, "API tokens per minute, shared by every process using "
                            "the store", gt=0, metavar="N", group=API, regen=False)
    prompt_format: PromptFormat = opt(
        DEFAULT_PROMPT_FORMAT, "how an API model reads a prompt: auto (a chat endpoint: the "
        "messages, rendered by the server's chat template; a text-completion-*/ endpoint: "
        "completion-gemma for a model id naming Gemma, else completion-plain), chat (the "
        "messages as given), chat-prefill (then an assistant turn holding the answer "
        "prefix; providers that continue it), completion-gemma / completion-plain (the "
        "local backend's prompt text: Gemma turns or role: content lines, then the answer "
        "prefix, stop at ')' and newline)", group=API)
    answer_prefix: str = opt(DEFAULT_ANSWER_PREFIX, "text that ends a multiple-choice "
                             "prompt so that the next token is the answer letter (every "
                             "prompt format but chat)", metavar="TEXT", group=API)
    shard: str | None = opt(None, "with --live: record only shard I of N of the requests (by "
                            "key hash); combine stores with `fairness-tests store merge`",
                            metavar="I/N", group=API, regen=False, pytest=False)
    batch_size: int = opt(32, "rows per forward pass", ge=1, metavar="N", group=LOCAL,
                          regen=False)
    workers: int | Literal["auto"] = opt("auto", "forward passes side by side on the CPU, "
                                         "each on threads/N torch threads (auto: one per "
                                         "CPU thread, at most 8)", ge=1, metavar="N|auto",
                                         group=LOCAL, regen=False)


@dataclass(frozen=True, kw_only=True)
class BatchOptions(Checked):
    """Provider batch APIs (:mod:`fairness_tests.models.batch.batch`): the requests the store
    lacks go as asynchronous batch jobs, billed at the provider's batch price."""
    batch: bool = opt(False, "send the requests the store lacks as provider batch jobs "
                      "(OpenAI-format Files + Batches API: about half price, results within "
                      "24 h); resumable: the same command collects", group=API, regen=False)
    batch_poll: float = opt(60.0, "seconds between polls of a batch job's status", gt=0,
                            metavar="SECONDS", group=API, regen=False)
    batch_wait: Literal["all", "none"] = opt(
        "all", "all: wait for every batch job and finish the run; none: submit and exit 7 "
        "(the same command collects later)", group=API, regen=False)
    batch_fallback: Literal["batch", "direct"] = opt(
        "batch", "lines a batch job failed or let expire: resubmitted once as a new batch, or "
        "asked directly", group=API, regen=False)


@dataclass(frozen=True, kw_only=True)
class ResampleOptions(Checked):
    seed: int = opt(0, "seed of the bootstrap, the consistency sample and sampling", ge=0,
                    metavar="N")
    n_boot: int = opt(2000, f"bootstrap resamples; at least {MIN_N_BOOT}: fewer cannot "
                      "place the 2.5% and 97.5% percentiles of a 95% interval on stable "
                      "order statistics", ge=MIN_N_BOOT, metavar="N")


@dataclass(frozen=True, kw_only=True)
class StatsOptions(ResampleOptions):
    thresholds: str | None = opt(None, "thresholds directory (default.yaml + models/) or "
                                 "file (default: the project's thresholds/, else the "
                                 "packaged one)", metavar="PATH", path=True)


@dataclass(frozen=True, kw_only=True)
class ComparisonOptions(Checked):
    """How two or more runs are compared (the gate, compare)."""
    allow_protocol_change: bool = opt(False, "compare runs made under different protocols "
                                      "on their common items (the differences are listed)",
                                      pytest=False, toml=False)
    alpha: float = opt(0.05, "family-wise error rate of the comparisons", gt=0, lt=1)


@dataclass(frozen=True, kw_only=True)
class AuditConfig(ModelOptions, SizeOptions, RubricOptions, ScorerOptions, AskingOptions,
                  BatchOptions, StatsOptions, BenchmarkClusterOption, BenchmarkFileOption,
                  *OPTION_GROUPS):  # type: ignore[misc]  # the groups are known at run time
    """Every choice of an audit. Recorded in the run's metadata and on the card. Besides
    the shared groups it inherits every registered benchmark's own option group
    (``Benchmark.option_group``, :data:`~.config_benchmarks.OPTION_GROUPS`)."""
    benchmarks: tuple[str, ...] = opt(DEFAULT_BENCHMARKS, "benchmarks to run, space- or "
                                      "comma-separated (the registry's: "
                                     f"{', '.join(BENCHMARK_NAMES)})", choices=BENCHMARK_NAMES,
                                      metavar="BENCHMARK")
    progress: bool | None = opt(None, "progress lines on stderr (default: on a terminal or "
                                "in CI)", negative="quiet", cli=False, pytest=False,
                                toml=False, regen=False)
    export: str | None = opt(None, "also export this run's store rows to this JSONL(.gz) "
                             "file", metavar="FILE", path=True, regen=False, pytest=False,
                             role="output_file")

    def cross_check(self) -> Iterable[tuple[str, str]]:
        if self.model.startswith("embedded:") and self.model not in EMBEDDED_MODELS:
            yield "model", (f"unknown embedded model {self.model!r}"
                            f"{suggest(self.model, EMBEDDED_MODELS)}; embedded models: "
                            f"{', '.join(EMBEDDED_MODELS)} (else a litellm model id such as "
                            "openai/gpt-4o-mini, or a checkpoint directory)")
        yield from ScorerOptions.cross_check(self)
        yield from BenchmarkClusterOption.cross_check(self)
        yield from unasked_options(self)
        yield from group_problems(self)
        if len(set(self.benchmarks)) != len(self.benchmarks):
            yield "benchmarks", f"a benchmark is named twice: {' '.join(self.benchmarks)}"
        if self.backend_name() != "litellm":
            if self.batch:
                yield "batch", (f"applies to API models (backend litellm); the "
                                f"{self.backend_name()} backend has no batch API")
            for name in ("reasoning_effort", "thinking_budget", "max_cost", "rpm", "tpm"):
                if getattr(self, name) is not None:
                    yield name, (f"applies to API models (backend litellm); the "
                                 f"{self.backend_name()} backend costs nothing and has no "
                                 "rate limits")
            for name, default in (("prompt_format", DEFAULT_PROMPT_FORMAT),
                                  ("answer_prefix", DEFAULT_ANSWER_PREFIX)):
                if getattr(self, name) != default:
                    yield name, (f"applies to API models (backend litellm); the "
                                 f"{self.backend_name()} backend renders the model's own "
                                 f"prompt format and ends it with {DEFAULT_ANSWER_PREFIX!r}")
            if self.repeat_mode != "calls":
                yield "repeat_mode", ("applies to API models (backend litellm); the "
                                      f"{self.backend_name()} backend draws every repeat "
                                      "from one forward pass")
        else:
            yield from self._prompt_problems()
        if self.batch and self.max_cost is not None:
            yield "max_cost", ("cannot stop a batch job midway (it is billed whole): leave it "
                               "out with --batch and check the cost with --dry-run --batch")
        if self.shard is not None:
            m = re.fullmatch(r"(\d+)/(\d+)", self.shard)
            if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
                yield "shard", f"must be I/N with 1 <= I <= N, got {self.shard!r}"
            elif not self.live:
                yield "shard", "records a part of the requests: use it with --live"

    def _prompt_problems(self) -> Iterable[tuple[str, str]]:
        """A prompt format the model's endpoint cannot take (a completion format for a
        chat model, chat-prefill for a completion model), an empty answer prefix, an
        answer prefix other than the default where the format sends none (``chat``)."""
        if not self.answer_prefix.strip():
            yield "answer_prefix", "must be a non-empty text, got an empty one"
        try:
            used = resolve(self.prompt_format, self.api_model())
        except ConfigError as exc:
            message = str(exc).removeprefix(f"key {exc.key!r}: ")
            yield "prompt_format", f"{self.prompt_format!r} " + message.removeprefix(
                f"prompt_format {self.prompt_format!r} ")
            return
        if used == "chat" and self.answer_prefix != DEFAULT_ANSWER_PREFIX:
            yield "answer_prefix", (
                f"unused: {self.api_model()!r} is asked in prompt format 'chat' (the "
                "messages as given, rendered by the server's template: no answer prefix); "
                "use --prompt-format chat-prefill (providers that continue an assistant "
                "turn) or a text-completion-*/ model id")

    def api_model(self) -> str:
        """The litellm model string the backend sends (a bare name with an API base is an
        ``openai/`` model)."""
        if self.api_base and "/" not in self.model:
            return f"openai/{self.model}"
        return self.model


@dataclass(frozen=True, kw_only=True)
class OutputOptions(Checked):
    out: str = opt("report", "output directory: run/ and card/ (a directory this tool "
                   "wrote, or a new one)", metavar="DIR", path=True, pytest=False,
                   toml=False, regen=False, role="output_dir")
    force: bool = opt(False, "replace the tool's own files in --out even if it holds other "
                      "files (never deletes those)", pytest=False, toml=False, regen=False)
    user_yaml: str | None = opt(None, "what a run cannot know for the card (intended use, "
                                "governance, ...); default: the model's fixtures/cards/"
                                "<model>.yaml", metavar="FILE", path=True, pytest=False,
                                regen=False)
    quiet: bool = opt(False, "no progress lines on stderr", flag="-q", aliases=("--quiet",),
                      pytest=False, toml=False, regen=False)
    explore: bool = opt(False, "also write explore/index.html, the run explorer, linked from "
                        "the card", pytest=False, toml=False, regen=False)


@dataclass(frozen=True, kw_only=True)
class AuditCommand(AuditConfig, OutputOptions):
    """``fairness-tests audit``: the audit and what the command writes."""
    dry_run: bool = opt(False, "print the requests, tokens and cost per benchmark; ask "
                        "nothing", pytest=False, toml=False, regen=False)

    def cross_check(self) -> Iterable[tuple[str, str]]:
        yield from AuditConfig.cross_check(self)
        yield from OutputOptions.cross_check(self)

    def audit(self) -> AuditConfig:
        """The audit's own configuration (without the command's outputs)."""
        return AuditConfig(**{n: getattr(self, n) for n in specs(AuditConfig)})


@dataclass(frozen=True, kw_only=True)
class PluginOptions(Checked):
    """The pytest plugin's own options (the audit's are :class:`AuditConfig`'s)."""
    baseline_model: str | None = opt(None, "gate the --fairness-model(s) against this model "
                                     "on the same items", metavar="MODEL", cli=False)
    report: str | None = opt(None, "write runs, verdicts, the gate table and Fairness Cards "
                             "here", metavar="DIR", cli=False, role="output_dir")
    run: tuple[str, ...] | None = opt(None, "use a saved run directory (of the audit or a "
                                      "score command) instead of auditing its model",
                                      metavar="DIR", cli=False, per_model=True,
                                      role="input")
    on_missing: Literal["skip", "fail"] = opt("skip", "when nothing is recorded to replay: "
                                              "skip the fairness tests or fail them",
                                              cli=False)
    dry_run: bool = opt(False, "print the requests, tokens and cost each model's audit "
                        "would spend, then stop (asks nothing)", cli=False, toml=False)


# ----------------------------------------------------------------------------- score commands

@dataclass(frozen=True, kw_only=True)
class ScoredRunOptions(Checked):
    """A score command's run directory and verdicts."""
    model: str | None = opt(None, "model id the answers are of (run metadata; selects the "
                            "model's threshold overrides)", metavar="MODEL", pytest=False,
                            toml=False)
    out: str | None = opt(None, "also write a run directory (tables, verdicts, records, "
                          "metadata) that the card, the gate, compare and pytest "
                          "--fairness-run read", metavar="DIR", path=True, pytest=False,
                          toml=False, role="output_dir")
    force: bool = opt(False, "replace the tool's own files in --out even if it holds other "
                      "files (never deletes those)", pytest=False, toml=False)
    no_rules: bool = opt(False, "print the metrics only: evaluate no decision rule (exit 0)",
                         pytest=False, toml=False)


@dataclass(frozen=True, kw_only=True)
class GateConfig(StatsOptions, ComparisonOptions):
    """``fairness-tests gate BASELINE_RUN CANDIDATE_RUN``."""
    baseline: str = opt(None, "run directory of the baseline", positional=True,
                        metavar="BASELINE_RUN", path=True, pytest=False, toml=False)
    candidate: str = opt(None, "run directory of the candidate", positional=True,
                         metavar="CANDIDATE_RUN", path=True, pytest=False, toml=False)
    format: Literal["table", "md", "json"] = opt("table", "output format", pytest=False, toml=False)
    out: str | None = opt(None, "write gate.csv, .json, .md and explore/ here", metavar="DIR",
                          path=True, pytest=False, toml=False, role="output_dir")
    mode: Literal["harm", "non_inferiority"] | None = opt(
        None, "every cell in this mode (default: each rule's gate.mode, else harm)", pytest=False)
    cluster: tuple[str, ...] | None = opt(None, "resampling unit: FAMILY=UNIT, or UNIT for all "
                                          f"families with it ({units_text()}; default: the first)",
                                          pytest=False, metavar="[FAMILY=]UNIT")

    def cross_check(self) -> Iterable[tuple[str, str]]:
        yield from cluster_problems(self.cluster)


#: the shared configuration classes of an entry point (the ``[tool.fairness_tests]`` keys
#: are checked against their options, the tools' and the benchmarks' own commands')
COMMANDS: tuple[type, ...] = (AuditCommand, PluginOptions, GateConfig)
