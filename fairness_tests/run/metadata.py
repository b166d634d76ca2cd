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
    <key> {the info type a benchmark registered under key} (written only when set:
    e.g. ``bbq``, ``generative``, ``crows_pairs``; a run.json written before
    December 2026 carries ``bbq``, ``generative`` and ``counterfactual`` as ``null``
    when absent, read back as absent)

The benchmarks' infos are open: a benchmark registers its info type with
:func:`register_info` from its own module, and :class:`RunMetadata` keeps the infos in one
mapping; :func:`info_types` imports the installed benchmarks' modules before reading.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from fairness_tests.core.errors import DataError
from fairness_tests.core.registry import load_all
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
    resampling unit (one of its family's ``FamilySpec.clusters``);
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


#: the info types of run.json's open keys: ``{key: dataclass}`` (:func:`register_info`)
_INFOS: dict[str, type] = {}
#: whether the installed benchmarks' modules were imported to fill :data:`_INFOS`
_LOADED: list[bool] = []
T = TypeVar("T")


def register_info(key: str, cls: type) -> None:
    """Register ``cls`` (a dataclass) as the type of the top-level ``run.json`` key ``key``:
    a benchmark's module calls it when imported. Registering a key twice with one class
    is harmless; with another class, or a key that is a field of :class:`RunMetadata`,
    is a ``ValueError``."""
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"run info {key!r}: {cls!r} is not a dataclass")
    if key in _FIELD_KEYS or _INFOS.get(key, cls) is not cls:
        raise ValueError(f"run info {key!r} is already {_INFOS.get(key, 'a field')!r}")
    _INFOS[key] = cls


def info_types() -> dict[str, type]:
    """Every registered info type. The first call imports every registered benchmark's
    module (:func:`fairness_tests.core.registry.load_all`), so a process that reads a
    run.json without having imported a benchmark still reads its info typed. Those modules
    are light (the registry's rule); each registers its infos when imported."""
    if not _LOADED:
        _LOADED.append(True)
        load_all()
    return _INFOS


@dataclass(init=False)
class RunMetadata:
    """A run's metadata. The benchmarks' infos are open: ``infos`` maps a registered key
    (:func:`register_info`) to its typed info, written to run.json as a top-level key and
    read back through its type, only when set (:meth:`info` reads one, typed).

    Why a registry filled through the entry points, not unregistered keys kept as plain
    dicts: a top-level key that no installed benchmark registers stays an error naming
    the file and the key (a typo, or a run of a benchmark not installed here), and every
    info a reader gets is typed."""
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
    #: no key of its own in run.json: each info is a top-level key
    infos: dict[str, Any] = field(default_factory=dict, metadata={"in_json": False})
    schema_version: int = RUN_SCHEMA_VERSION

    def __init__(self, model: str | None, backend: str | None, mode: RunMode, source: Source,
                 fairness_tests_version: str, evaluation_date: str | None = None,
                 config: dict[str, OptionValue] | None = None,
                 thresholds: list[str] | None = None, regen_command: str | None = None,
                 model_version: str | None = None, backend_info: BackendInfo | None = None,
                 requests: dict[str, int] | None = None, store: str | None = None,
                 notes: list[str] | None = None, asking: AskingInfo | None = None,
                 infos: dict[str, Any] | None = None,
                 schema_version: int = RUN_SCHEMA_VERSION) -> None:
        self.model, self.backend, self.mode, self.source = model, backend, mode, source
        self.fairness_tests_version = fairness_tests_version
        self.evaluation_date, self.regen_command = evaluation_date, regen_command
        self.config = {} if config is None else config
        self.thresholds = [] if thresholds is None else thresholds
        self.model_version, self.backend_info = model_version, backend_info
        self.requests = {} if requests is None else requests
        self.store, self.asking = store, asking
        self.notes = [] if notes is None else notes
        self.schema_version = schema_version
        self.infos = dict(infos or {})

    def info(self, key: str, cls: type[T]) -> T | None:
        """The info of ``key`` (None: the run has none), which must be a ``cls``."""
        value = self.infos.get(key)
        if value is not None and not isinstance(value, cls):
            raise TypeError(f"run info {key!r} is a {type(value).__name__}, not {cls.__name__}")
        return value

    def set_info(self, key: str, value: Any) -> None:
        """Set the info of the registered key ``key``; an unregistered key is a
        ``ValueError`` (it would not be read back)."""
        if key not in info_types():
            raise ValueError(f"run info {key!r} is not registered (register_info)")
        self.infos[key] = value

    def to_dict(self) -> dict[str, Any]:
        """run.json's object: the fields, then each info under its own key."""
        d = dataclasses.asdict(self)
        d.update(d.pop("infos"))
        return d

    @classmethod
    def from_dict(cls, d: Any, path: Any = None) -> "RunMetadata":
        """Strict: errors name the file and the dotted key. A top-level key that is
        neither a field nor a registered info is refused."""
        if not isinstance(d, dict):
            raise DataError("run metadata must be a JSON object", path=path)
        version = d.get("schema_version")
        if version != RUN_SCHEMA_VERSION:
            raise DataError(f"run directory of metadata schema version {version!r}; this "
                            f"fairness_tests reads version {RUN_SCHEMA_VERSION}: re-create the "
                            "run with this version (fairness-tests audit, bbq score or "
                            "generative score --out)", path=path, key="schema_version")
        d = _renamed(d)
        types_ = info_types() if set(d) - _FIELD_KEYS else {}
        meta: RunMetadata = _build(cls, {k: v for k, v in d.items() if k not in types_},
                                   path, "")
        meta.infos.update({k: None if v is None else _build(types_[k], v, path, f"{k}.")
                           for k, v in d.items() if k in types_})
        return meta


#: run.json's top-level keys that are fields (``infos`` is no key of its own)
_FIELD_KEYS = frozenset(f.name for f in dataclasses.fields(RunMetadata)
                        if f.metadata.get("in_json", True))


def _renamed(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with the keys older writers of version 2 spelled otherwise: the litellm
    backend's ``backend_info.litellm_version`` is ``backend_info.version``; the option
    ``config.protocols`` is ``config.benchmarks``."""
    info = d.get("backend_info")
    if isinstance(info, dict) and "litellm_version" in info and "version" not in info:
        info = {("version" if k == "litellm_version" else k): v for k, v in info.items()}
        d = {**d, "backend_info": info}
    config = d.get("config")
    if isinstance(config, dict) and "protocols" in config and "benchmarks" not in config:
        config = {("benchmarks" if k == "protocols" else k): v for k, v in config.items()}
        d = {**d, "config": config}
    return d


def _build(cls: type, d: Any, path: Any, prefix: str) -> Any:
    if not isinstance(d, dict):
        raise DataError(f"must be an object, got {type(d).__name__}", path=path,
                        key=prefix.rstrip(".") or None)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.metadata.get("in_json", True)}
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
