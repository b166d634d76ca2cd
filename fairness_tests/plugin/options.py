"""The plugin's options: one table, registered once as command-line options (group
"fairness", every name ``--fairness-*``) and as ini keys (``fairness_*``, for
``[tool.pytest.ini_options]``, like pytest-cov and syrupy). The command line wins over
the ini file, the ini file over the default.

:func:`settings` resolves them into the session's :class:`Settings`; a bad value is a
:class:`pytest.UsageError` (one line, no traceback).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pytest

DEFAULT_MODEL = "embedded:gemma-3-270m"


@dataclass(frozen=True)
class Option:
    name: str                 # the suffix: --fairness-<name>, ini fairness_<name>
    help: str
    kind: str = "string"      # string | int | bool | list
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    flag: bool = False        # a store_true switch on the command line

    @property
    def dest(self) -> str:
        return "fairness_" + self.name.replace("-", "_")

    @property
    def ini(self) -> str:
        return self.dest


OPTIONS = (
    Option("model", f"model id to audit (repeatable; default {DEFAULT_MODEL})", "list",
           metavar="MODEL"),
    Option("backend", "backend for live runs: transformers or litellm (default: the model's "
                      "own, e.g. transformers for the embedded model)", metavar="NAME"),
    Option("live", "call the model for responses not yet recorded (and record them); "
                   "default: replay only", "bool", flag=True),
    Option("api-base", "OpenAI-compatible server URL for the litellm backend", metavar="URL"),
    Option("store", "SQLite response store (default .fairness/store.sqlite or "
                    "$FAIRNESS_STORE)", metavar="PATH"),
    Option("bbq-dir", "BBQ data directory (default ../shared/bbq or $FAIRNESS_BBQ_DIR)",
           metavar="DIR"),
    Option("protocol", "protocol(s) to run: bbq, consistency, generative, probe (repeatable; "
                       "default: the model's recorded set)", "list", metavar="NAME"),
    Option("repeats", "repeats per consistency item (default 20)", "int", metavar="N"),
    Option("thresholds", "thresholds directory (default.yaml + models/) or file",
           metavar="PATH"),
    Option("n-boot", "bootstrap resamples (default 2000)", "int", metavar="N"),
    Option("seed", "seed of the bootstrap, the consistency sample and sampling (default 0)",
           "int", metavar="N"),
    Option("baseline-model", "gate the --fairness-model(s) against this model on the same "
                             "items", metavar="MODEL"),
    Option("report", "write runs, verdicts, the gate table and Fairness Cards here",
           metavar="DIR"),
    Option("run", "use a saved run directory (of the audit or a score command) instead of "
                  "auditing its model (repeatable)", "list", metavar="DIR"),
    Option("on-missing", "when nothing is recorded to replay: skip the fairness tests or "
                         "fail them (default skip)", choices=("skip", "fail")),
    # how an API model is asked (the audit's options of the same names, without the prefix)
    Option("repeat-mode", "calls | n | logprobs: how repeats are asked of an API model "
                          "(falls back to calls when the provider ignores n / logprobs)",
           choices=("calls", "n", "logprobs")),
    Option("consistency-items", "consistency on the seeded 448-item sample (default) or all "
                                "items", choices=("sample", "all")),
    Option("max-tokens", "new tokens for a BBQ answer (default 16)", "int", metavar="N"),
    Option("reasoning-effort", "litellm reasoning_effort for every request", metavar="LEVEL"),
    Option("thinking-budget", "thinking budget in tokens", "int", metavar="N"),
    Option("max-cost", "stop cleanly when a live run's spend reaches USD", "float",
           metavar="USD"),
    Option("rpm", "requests per minute, shared by every process using the store", "float",
           metavar="N"),
    Option("tpm", "tokens per minute, shared by every process using the store", "float",
           metavar="N"),
    Option("bbq-cluster", "BBQ bootstrap clusters: template (default) or item",
           choices=("template", "item")),
    Option("gen-cluster", "generative bootstrap clusters: prompt (default) or row",
           choices=("prompt", "row")),
    Option("dry-run", "print the requests, tokens and cost each model's audit would spend, "
                      "then stop (asks nothing)", "bool", flag=True),
)
#: options passed to the audit under their own field name
AUDIT_FIELDS = ("repeat-mode", "consistency-items", "max-tokens", "reasoning-effort",
                "thinking-budget", "max-cost", "rpm", "tpm", "bbq-cluster", "gen-cluster")


def add_options(parser: pytest.Parser) -> None:
    g = parser.getgroup("fairness", "fairness_tests: models, recordings, thresholds, gate")
    for o in OPTIONS:
        kw: dict[str, Any] = {"dest": o.dest, "default": None, "help": o.help}
        if o.flag:
            kw["action"] = "store_true"
        elif o.kind == "list":
            kw["action"] = "append"
        elif o.kind in ("int", "float"):
            kw["type"] = int if o.kind == "int" else float
        if o.choices:
            kw["choices"] = o.choices
        if o.metavar and not o.flag:
            kw["metavar"] = o.metavar
        g.addoption(f"--fairness-{o.name}", **kw)
        ini_type = {"list": "linelist", "bool": "bool"}.get(o.kind, "string")
        parser.addini(o.ini, f"{o.help} (--fairness-{o.name})", type=ini_type, default=None)
    g.addoption("--fairness-replay", dest="fairness_live", action="store_false", default=None,
                help="serve only recorded responses, never call a model (the default)")


def value(config: pytest.Config, o: Option) -> Any:
    """Command line, else ini file, else None; ini strings converted and checked."""
    v = config.getoption(o.dest)
    if v is not None:
        return v
    raw = config.getini(o.ini)
    if raw in (None, "", []):
        return None
    convert: Callable[[Any], Any] = {"int": int, "float": float}.get(o.kind, lambda x: x)
    try:
        v = convert(raw)
    except ValueError:
        raise pytest.UsageError(f"ini key {o.ini} = {raw!r}: must be a number") from None
    if o.choices and v not in o.choices:
        raise pytest.UsageError(f"ini key {o.ini} = {v!r}: must be one of "
                                f"{', '.join(o.choices)}")
    return v


@dataclass(frozen=True)
class Settings:
    models: tuple[str, ...] = (DEFAULT_MODEL,)
    backend: str | None = None
    live: bool = False
    api_base: str | None = None
    store: str | None = None
    bbq_dir: str | None = None
    protocols: tuple[str, ...] = ()
    repeats: int | None = None
    thresholds: str | None = None
    n_boot: int | None = None
    seed: int | None = None
    baseline: str | None = None
    report_dir: str | None = None
    runs: tuple[str, ...] = ()           # saved run directories to use instead of auditing
    on_missing: str = "skip"             # "skip" | "fail" when nothing can be replayed
    dry_run: bool = False
    audit: tuple[tuple[str, Any], ...] = ()   # (AuditConfig field, value) set by an option

    def audit_options(self, model: str) -> dict[str, Any]:
        """Everything the session decides about a model's audit: the keyword arguments
        of :func:`fairness_tests.pipeline.audit.config_from_options`."""
        return dict(model=model, backend=self.backend, live=self.live, bbq_dir=self.bbq_dir,
                    protocols=list(self.protocols) or None, repeats=self.repeats,
                    store=self.store, api_base=self.api_base, thresholds=self.thresholds,
                    n_boot=self.n_boot, seed=self.seed, **dict(self.audit))


def settings(config: pytest.Config) -> Settings:
    v = {o.name: value(config, o) for o in OPTIONS}
    runs = tuple(v["run"] or ())
    models = tuple(v["model"] or ())
    if not models and runs:
        models = tuple(dict.fromkeys(saved_model(d) for d in runs))
    return Settings(
        models=models or (DEFAULT_MODEL,), backend=v["backend"], live=bool(v["live"]),
        api_base=v["api-base"], store=v["store"], bbq_dir=v["bbq-dir"],
        protocols=tuple(v["protocol"] or ()), repeats=v["repeats"],
        thresholds=v["thresholds"], n_boot=v["n-boot"], seed=v["seed"],
        baseline=v["baseline-model"], report_dir=v["report"], runs=runs,
        on_missing=v["on-missing"] or "skip", dry_run=bool(v["dry-run"]),
        audit=tuple((name.replace("-", "_"), v[name]) for name in AUDIT_FIELDS
                    if v[name] is not None))


def saved_model(directory: str) -> str:
    """The model id a saved run directory is of (its run.json)."""
    from fairness_tests.core.errors import FairnessTestsError
    from fairness_tests.run.result import RunResult
    try:
        model = RunResult.load(directory).metadata.model
    except FairnessTestsError as exc:
        raise pytest.UsageError(f"--fairness-run {directory}: {exc}") from None
    if not model:
        raise pytest.UsageError(f"--fairness-run {directory}: the run names no model (score "
                                "it again with --model ID)")
    return model
