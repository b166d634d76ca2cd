"""The typed, versioned metadata of a run directory (``run.json``).

Written by the audit and by the score commands (from anyone's predictions or
generations), read by the card, the gate, ``compare`` and the pytest plugin. One
shape, no guessing: :meth:`RunMetadata.from_dict` refuses an unknown key, a missing
required key or another schema version, naming the file and the key.

Layout (``schema_version`` 2)::

    schema_version, model, backend, mode ("live" | "replay" | "scored"),
    source {kind: "audit" | "predictions" | "outputs", file, sha256},
    fairness_tests_version, evaluation_date, config {the options as run},
    thresholds [files], regen_command, model_version, backend_info {BackendInfo} | null,
    requests, store, asking {AskingInfo, its usage {Usage} | null} | null,
    notes [what the run wants a reader to know, e.g. a fallback it took],
    bbq {BBQInfo} | null, generative {GenerativeInfo} | null,
    counterfactual {CounterfactualInfo} | null
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from fairness_tests.core.errors import DataError
from fairness_tests.models.info import BackendInfo, BatchInfo, Usage

RUN_SCHEMA_VERSION = 2
#: how the answers were had: asked now, served by the store, or read from a file
RunMode = Literal["live", "replay", "scored"]
SourceKind = Literal["audit", "predictions", "outputs"]
#: an option's value as ``config`` records it: JSON scalars, a list for a tuple option
OptionValue = str | int | float | bool | list[str] | list[int] | list[float] | None


@dataclass
class Bootstrap:
    """How every interval and test of a protocol was computed. ``cluster``: the
    resampling unit (BBQ ``template`` | ``item``, generative ``prompt`` | ``row``);
    ``permutations``: of the permutation tests of the max-type metrics."""
    resamples: int
    seed: int
    level: float = 0.95
    method: str = "percentile bootstrap, items resampled"
    cluster: str = "item"
    permutations: int = 0


@dataclass
class Source:
    """Where the answers came from: the audit asked the model (``audit``), or a score
    command read someone's predictions (``predictions``) or generations (``outputs``)."""
    kind: SourceKind
    file: str | None = None
    sha256: str | None = None


@dataclass
class ConsistencyInfo:
    n_items: int
    repeats: int
    seed: int | None = None
    per_cell: int | None = None
    example_ids: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class BBQInfo:
    data_dir: str | None
    sha256: dict[str, str]
    official: bool
    filter: str
    n_items: int
    counts: list[dict]
    n_answers: int
    invalid_answers: int
    seed: int
    bootstrap: Bootstrap
    rotations: int = 1                    # option orders per item in the main run (1 or 3)
    rotations_mode: str = "none"          # none | sample | all
    repeats: int = 1
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    prompt_description: str | None = None
    prompt_template: str | None = None
    option_order: str | None = None
    limit: int | None = None
    consistency: ConsistencyInfo | None = None
    consistency_items: str = "sample"     # the seeded sample, or all items
    truncated_answers: int = 0            # finish_reason "length" with no answer
    categories: list[str] = field(default_factory=list)        # the BBQ categories loaded
    target_loc: dict[str, str] = field(default_factory=dict)   # category -> metadata | derived
    conventions: str = "project"          # project | bbq-authors (bbq score --conventions)
    answers: dict | None = None           # scored runs: how the answers were read and mapped
    data_notes: list[str] = field(default_factory=list)        # what the loader had to decide
    git_blob: dict[str, str] = field(default_factory=dict)     # file -> its git blob id
    release: dict[str, dict] = field(default_factory=dict)     # file -> official release or not


@dataclass
class GenerativeInfo:
    suite: str
    suite_hash: str | None
    n_generations: int
    n_error: int
    rubric: str
    rubric_semantics: str
    bootstrap: Bootstrap
    rubric_file: str | None = None          # the rubric's patterns file, as display_path shows it
    rubric_sha256: str | None = None
    compare_rubric: str | None = None
    system_prompt: str | None = None
    n_grid_full: int | None = None
    n_refused_by_provider: int = 0
    reductions: list[str] = field(default_factory=list)
    refusal_handling: str = ("kept and scored: refusals and failed generations stay in the "
                             "tables, counted per slice, never dropped")
    max_new_tokens: int | None = None
    decoding: list[dict] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    families: list[dict] = field(default_factory=list)   # {id, name, paraphrases: [text]}
    occupations: list[str] = field(default_factory=list)
    attributes: dict[str, list[str]] = field(default_factory=dict)
    slices: list[dict] = field(default_factory=list)
    insertion_rule: str | None = None
    declared: dict = field(default_factory=dict)          # what the suite file declares
    #: --scorers: each scorer's name, kind, model, version, rubric, prompt, unjudged rate
    scorers: list[dict] = field(default_factory=list)


@dataclass
class CounterfactualInfo:
    protocol: str
    n_requests: int
    max_new_tokens: int | None
    system_prompt: str | None
    verdict_counts: dict[str, int]
    reductions: list[str] = field(default_factory=list)


@dataclass
class AskingInfo:
    """How an audit asked its model: the repeat mode (requested, used, fallback, whether
    repeats share one server-side forward pass), token and reasoning settings, the cost
    budget, truncated answers per protocol, the shard, (live) tokens and cost spent, the
    stores ``store merge`` combined into the store the run read, per protocol what the
    asking did (sent, from the store, failed), and for an API model the prompt format
    (``prompt``: the format asked for, the one used for the model, the answer prefix and
    the stop sequences of a multiple-choice prompt), and with ``--batch`` the provider
    batch jobs (:class:`~fairness_tests.models.info.BatchInfo`)."""
    repeat_mode: dict
    max_tokens: int
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    max_cost_usd: float | None = None
    truncated: dict[str, int] = field(default_factory=dict)
    shard: str | None = None
    usage: Usage | None = None
    merged_from: list[dict] = field(default_factory=list)   # stores merged into the store
    #: per protocol: requests, sent, from_store, failed (+ first_error), invalid, ...
    #: (:class:`fairness_tests.models.requests.answers.AskCounts` as a dict)
    counts: dict[str, dict] = field(default_factory=dict)
    prompt: dict | None = None     # API models: {requested, used, answer_prefix, stop}
    batch: BatchInfo | None = None        # --batch: provider batch jobs (models.batch.batch)


@dataclass
class RunMetadata:
    model: str | None                     # None: a scored run whose model was not named
    backend: str | None
    mode: RunMode
    source: Source
    fairness_tests_version: str
    evaluation_date: str | None = None
    config: dict[str, OptionValue] = field(default_factory=dict)
    thresholds: list[str] = field(default_factory=list)
    regen_command: str | None = None
    model_version: str | None = None
    backend_info: BackendInfo | None = None
    requests: dict[str, int] = field(default_factory=dict)
    store: str | None = None
    notes: list[str] = field(default_factory=list)
    asking: AskingInfo | None = None
    bbq: BBQInfo | None = None
    generative: GenerativeInfo | None = None
    counterfactual: CounterfactualInfo | None = None
    schema_version: int = RUN_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Any, path: Any = None) -> "RunMetadata":
        """Strict: errors name the file and the dotted key."""
        if not isinstance(d, dict):
            raise DataError("run metadata must be a JSON object", path=path)
        version = d.get("schema_version")
        if version != RUN_SCHEMA_VERSION:
            raise DataError(f"run directory of metadata schema version {version!r}; this "
                            f"fairness_tests reads version {RUN_SCHEMA_VERSION}: re-create the "
                            "run with this version (fairness-tests audit, bbq score or "
                            "generative score --out)", path=path, key="schema_version")
        return _build(cls, _renamed(d), path, "")


def _renamed(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with the keys older writers of version 2 spelled otherwise: the litellm
    backend's ``backend_info.litellm_version`` is ``backend_info.version``."""
    info = d.get("backend_info")
    if isinstance(info, dict) and "litellm_version" in info and "version" not in info:
        info = {("version" if k == "litellm_version" else k): v for k, v in info.items()}
        return {**d, "backend_info": info}
    return d


def _build(cls: type, d: Any, path: Any, prefix: str) -> Any:
    if not isinstance(d, dict):
        raise DataError(f"must be an object, got {type(d).__name__}", path=path,
                        key=prefix.rstrip(".") or None)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - set(fields))
    if unknown:
        raise DataError(f"unknown key(s) {unknown}", path=path,
                        key=f"{prefix}{unknown[0]}")
    kw = {}
    for name, f in fields.items():
        if name not in d:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise DataError("missing", path=path, key=f"{prefix}{name}")
            continue
        kw[name] = _value(hints[name], d[name], path, f"{prefix}{name}")
    return cls(**kw)


def _value(hint: Any, v: Any, path: Any, key: str) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, v, path, key + ".")
    return v
