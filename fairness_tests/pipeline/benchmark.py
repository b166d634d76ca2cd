"""The interface every benchmark implements, and what it declares about itself.

A :class:`Benchmark` is a registered class: a name, what it declares for the rest of
the tool (whether the default audit runs it, its pytest marker, the tables that show it
ran, its drift tables, the card's lines about it), its :class:`FamilySpec`, and its
requests. The consumers (configuration, card, compare, gate, plugin, suite) iterate
the registry (:func:`benchmarks`, :func:`families`) and read these
attributes instead of naming a benchmark.

A benchmark's class and this module are light (no pandas): the configuration and the
pytest plugin read the declarations while loading. What computes lives in the family's
own module, named by :attr:`FamilySpec.impl` and imported when a run uses it: a
:class:`Family` holds what the benchmarks of one family share (data, items, the grid)
for one configuration; each benchmark of the family builds its requests from it; once
every benchmark of the family has been asked, :meth:`Family.results` turns the requests
and responses into records, the family's metric tables (its one table builder) and the
run metadata that describes it for the card.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fairness_tests.core.registry import REGISTRY, load
from fairness_tests.pipeline.stages import SILENT, Stages
from fairness_tests.pipeline.views import (
    CardProtocol,
    Compared,
    ProtocolView,
    Section,
    View,
    side_by_side,
    table_views,
)

if TYPE_CHECKING:
    import pandas as pd

    from fairness_tests.models.requests.request import Request, Response
    from fairness_tests.pipeline.config import AuditConfig


@dataclass(frozen=True)
class FamilySpec:
    """What the benchmarks of one family share, declared (light): BBQ and consistency
    are two benchmarks of one family with one records table ``bbq``.

    ``name``: the family's name where the tool reports per family (compare, the gate);
    ``impl``: ``"module:Class"`` of its :class:`Family`; ``records``: the name of its
    per-item records (``records/<records>.csv.gz``); ``metadata_key``: its ``run.json``
    key; ``gated``: whether the gate compares its records item by item; ``compared``:
    whether ``compare`` has a section for it; ``clusters``: the choices of its
    ``--cluster NAME=CHOICE`` option (the gate's resampling unit; the first is the
    default); ``units``: ``((choice, what it resamples, in words), ...)`` for the gate's
    method statement (default: "<name> <choice>s")."""
    name: str
    impl: str
    records: str
    metadata_key: str
    gated: bool = False
    compared: bool = False
    clusters: tuple[str, ...] = ()
    units: tuple[tuple[str, str], ...] = ()

    def unit_text(self, choice: str) -> str:
        """What resampling ``choice`` resamples, in words."""
        return dict(self.units).get(choice, f"{self.name} {choice}s")


@dataclass(frozen=True)
class Shown:
    """One line of the card's evaluation protocol: ``what`` is listed under
    ``protocols_run`` when the run has any of ``tables``, else under ``not_evaluated``
    with ``why``."""
    what: str
    tables: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class GatePart:
    """One table of the model-upgrade gate (and of ``compare``'s pairwise tests) that a
    family adds, read from its records: ``frame(records)`` is one run's per-item frame
    (an empty frame: the part is not gated, and ``skipped`` says why); ``key``: the item
    columns that align the two runs; ``by``: the cell columns; ``metrics()``: the gated
    metrics (:class:`fairness_tests.metrics.gate.GateMetric`); ``cluster_columns``:
    ``{choice: column}`` for each choice of the family's ``clusters`` (None: items are
    resampled); ``carry``: the item columns taken along (the cluster column among them);
    ``columns``: the frame's columns kept (None: all)."""
    frame: Callable[[pd.DataFrame], pd.DataFrame]
    key: tuple[str, ...]
    by: tuple[str, ...]
    metrics: Callable[[], list[Any]]
    cluster_columns: Mapping[str, str | None]
    carry: tuple[str, ...] = ()
    columns: tuple[str, ...] | None = None
    skipped: str = ""


@dataclass(frozen=True)
class ExploreView:
    """How the run explorer (``fairness-tests view``) shows a family's records: the hook
    :meth:`Family.explore`'s answer. ``frame``: the records as shown (the records as the
    run stores them, plus any column the explorer needs: the metric tables' cell columns
    where the records name them otherwise, the prompt text); ``key``: the columns that
    identify one answer across two runs (empty: the first column when its values are
    unique, else every column that is neither an outcome, the answer nor a text);
    ``answer``: the column of the model's answer; ``text``: long text columns shown in
    full; ``outcomes``: ``(label, column, nonzero)`` in order, the first whose column is
    nonzero (``nonzero`` True) or zero (False) names an answer's outcome, else
    ``otherwise`` (empty: every 0/1 column set, joined by "+"); ``correct``: the 0/1
    column whose change is named "correct -> wrong"; ``cluster``: the column of the
    template (the unit whose contribution to a paired difference is listed);
    ``highlight``: ``{text column: the column of its marked spans}``, spans written
    ``start:end:label`` separated by ";" (e.g. a rubric's hits in a generation);
    ``first``: ``{column: value}`` of the rows an item's metrics count once (e.g. its
    first answer, not its repeats: the rows a template's contribution to a paired
    difference is computed on; empty: every row); ``notes``: what the explorer says
    about this view (e.g. where the prompt text came from)."""
    frame: pd.DataFrame
    key: tuple[str, ...] = ()
    answer: str | None = None
    text: tuple[str, ...] = ()
    outcomes: tuple[tuple[str, str, bool], ...] = ()
    otherwise: str = ""
    correct: str | None = None
    cluster: str | None = None
    highlight: Mapping[str, str] = field(default_factory=dict)
    first: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


class Benchmark(ABC):
    """A registered benchmark: its name, its declarations, its family and its requests.

    ``default``: the default audit (no ``--benchmarks``) runs it; ``marker``: the text
    of its pytest marker (``None``: no marker); ``tables``: the metric tables that show
    it ran (compare, a run's contents); ``drift_tables``: the tables the suite's drift
    test snapshots (one per model and table, and :meth:`drift_qualifier`); ``shown``:
    its lines on the card (itself first, then the analyses it brings, e.g. the generative
    audit's scorer sensitivity); ``rules``: the file name,
    beside its module, of its default decision rules (a thresholds file, read after the
    one in force: :func:`fairness_tests.rules.rule_files.benchmark_rule_files`; a run
    without its tables gets no verdict from them); ``properties``: its pytest property
    tests, ``{test name: rule selector}`` (the keywords of ``@pytest.mark.fairness_rules``:
    tables, metrics, ids), collected by the suite's ``test_benchmark_property``;
    ``recordings``: ``{model id: file beside its module}``, its recorded answers of a
    model, replayed with the manifest's (:func:`fairness_tests.pipeline.recordings.
    default_recordings`); ``source``: ``"module:NAME"`` of its
    :class:`~fairness_tests.core.sources.DataSource` (what ``data fetch`` downloads);
    ``listed``: named on every card, as not evaluated when not asked (None: when
    ``default``; :meth:`disclosed`); ``reads_benchmark_file``: its items come from the
    team's file ``--benchmark FILE`` (which then selects it); ``example``: a file beside
    its module that ``init`` copies into a project's ``benchmarks/``; ``commands``: the
    module of its own subcommands (``fairness-tests NAME ...``, e.g. scoring predictions
    made elsewhere): a ``register(subparsers)`` function, called while the command line
    is built (:func:`fairness_tests.cli.main.build_parser`), and optionally a
    ``fetch(config)`` function, ``data fetch``'s for this benchmark in place of the
    generic fetch of ``source`` (a fetch with options of its own: BBQ's categories);
    None: it has none; ``scored``: its generations are scored by the run's scorers
    (rubric, judge, classifier), so the dry run counts the judge's requests for them;
    ``options``: the audit options only it reads (giving one to a run that does not ask
    it is an error); ``option_group``: ``"module:Class"`` of its own audit options, a
    frozen keyword-only :class:`~fairness_tests.core.options.Checked` dataclass in a light
    module, which the audit's configuration inherits (command line, pytest, project
    table: generated as for every option; its fields count among its ``options``;
    benchmarks that read the same options declare the same group); ``configs``:
    ``"module:Class"`` of its own commands' configuration classes (a
    ``[tool.fairness_tests]`` key is checked against theirs too); ``fetch_options``:
    ``"module:Class"`` of its own ``data fetch`` options, a group as ``option_group``
    that the fetch's configuration inherits (it fetches with its ``commands`` module's
    ``fetch(config)``; the options are an error for another benchmark's fetch);
    ``protocol_cells``: ``"module:NAME"`` of its
    :class:`~fairness_tests.rules.protocol.ProtocolCells`, the table of its metrics per
    protocol cell whose verdicts the rule engine compares (protocol sensitivity); None:
    none; ``card_schema``: the file name, beside its module, of the JSON schema (YAML) of
    what its family records on the card under ``evaluation_protocol.<metadata_key>``
    (:meth:`Family.card_protocol`), merged into the card schema where it is loaded
    (:func:`fairness_tests.card.schema.load_schema`); None: its family records nothing
    there (one benchmark of a family declares it)."""
    name: ClassVar[str]
    family: ClassVar[FamilySpec]
    default: ClassVar[bool] = False
    marker: ClassVar[str | None] = None
    tables: ClassVar[tuple[str, ...]] = ()
    drift_tables: ClassVar[tuple[str, ...]] = ()
    shown: ClassVar[tuple[Shown, ...]] = ()
    rules: ClassVar[str | None] = None
    properties: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    recordings: ClassVar[Mapping[str, str]] = {}
    source: ClassVar[str | None] = None
    listed: ClassVar[bool | None] = None
    reads_benchmark_file: ClassVar[bool] = False
    example: ClassVar[str | None] = None
    commands: ClassVar[str | None] = None
    scored: ClassVar[bool] = False
    options: ClassVar[tuple[str, ...]] = ()
    option_group: ClassVar[str | None] = None
    configs: ClassVar[tuple[str, ...]] = ()
    fetch_options: ClassVar[str | None] = None
    protocol_cells: ClassVar[str | None] = None
    card_schema: ClassVar[str | None] = None

    @classmethod
    def disclosed(cls) -> bool:
        """Listed on every card, as not evaluated when a run did not ask it (default:
        the benchmarks of the default audit); another benchmark not asked is not named."""
        return cls.default if cls.listed is None else cls.listed

    @classmethod
    def drift_qualifier(cls, metadata: Any) -> str:
        """What names a run's drift snapshots of this benchmark's tables besides the model
        and the table (``""``: nothing; the default), from the run's metadata (a
        :class:`~fairness_tests.run.metadata.RunMetadata`). A benchmark that reads a
        benchmark file (``reads_benchmark_file``) gives the file's benchmark name, so two
        files' runs of one model keep snapshots of their own
        (:func:`fairness_tests.plugin.parametrize.table_params`)."""
        return ""

    @abstractmethod
    def requests(self, family: Any) -> list[Request]:
        """The requests this benchmark asks, built from its family's shared data."""


@dataclass
class Asked:
    """One benchmark's requests and their responses, in the same order."""
    requests: list[Request]
    responses: list[Response]


@dataclass
class Results:
    """What a family adds to a run: metric tables, per-item records and the run
    metadata fields that describe it (``{"bbq": BBQInfo}``, ...)."""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    records: dict[str, pd.DataFrame] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


class Family(ABC):
    """What the benchmarks of one family share, loaded once per run; and, as class
    methods, what the family's results look like in ``compare`` and on the card
    (:mod:`fairness_tests.pipeline.views`), generic unless the family overrides them.

    ``card_rank``: where the family's views stand among the card's results (ascending;
    the run's protocol-dependence and seed-spread statements stand at 30)."""

    card_rank: ClassVar[int] = 100

    def __init__(self, config: AuditConfig):
        self.config = config
        #: the run's response store (set by the audit; a judge scorer asks through it)
        self.store: Any = None
        #: where the family's stage lines go while it computes (set by the audit)
        self.stages: Stages = SILENT

    @abstractmethod
    def results(self, asked: dict[str, Asked]) -> Results:
        """Records, tables and metadata from every asked benchmark of the family."""

    @classmethod
    def gate_parts(cls) -> list[GatePart]:
        """What the gate compares item by item in this family's records (none: the
        family is not gated; ``FamilySpec.gated`` says whether it is)."""
        return []

    @classmethod
    def rule_documents(cls, config: AuditConfig) -> list[tuple[Path, dict[str, Any]]]:
        """Decision rules a run of this family brings beside its ``rules`` file (e.g. a
        team's benchmark file's own ``rules:``): ``(file, thresholds document)``, merged
        after the thresholds in force (:func:`extra_rules`). Default: none."""
        return []

    @classmethod
    def protocol_facts(cls, info: Any, records: pd.DataFrame | None) -> dict[str, Any]:
        """The facts two runs of this family must share to be compared (the gate,
        ``compare``), from its run metadata ``info`` and its records: ``{fact: value}``
        (a frozenset of item keys compares as counts). Default: the item set, by the
        first gate part's key."""
        parts = cls.gate_parts()
        if records is None or not len(records) or not parts:
            return {}
        key = [k for k in parts[0].key if k in records.columns]
        return {"items": frozenset(map(tuple, records[key].astype(str).drop_duplicates()
                                       .to_numpy().tolist()))}

    @classmethod
    def response_key(cls) -> tuple[tuple[str, ...], str] | None:
        """(the record columns that identify one answer, the answer's column): what
        shows two runs gave identical responses (a gate of a run against itself).
        Default: the first gate part's key and ``answer``."""
        parts = cls.gate_parts()
        return (parts[0].key, "answer") if parts else None

    @classmethod
    def family_spec(cls) -> FamilySpec:
        """The registered :class:`FamilySpec` whose ``impl`` is this class."""
        for f in families():
            if load(f.impl) is cls:
                return f
        raise LookupError(f"no registered benchmark family has impl {cls.__module__}:"
                          f"{cls.__qualname__}")

    @classmethod
    def compare_sections(cls, entries: Sequence[Compared]) -> list[Section]:
        """The family's sections of ``compare`` for the models ``entries`` (each reads its
        run's tables with ``entry.table(family name, table)``), in report order; no
        section for a table no model's run has. Generic: one side-by-side table per table
        of :func:`family_tables` (:func:`fairness_tests.pipeline.views.side_by_side`)."""
        spec = cls.family_spec()
        return [s for t in family_tables(spec) if (s := side_by_side(spec.name, t, entries))]

    @classmethod
    def card_results(cls, tables: Mapping[str, list[dict]]) -> list[View]:
        """The family's views of the card's results, in card order; ``tables``: the
        card's result tables (``{name: rows as recorded in the card}``). A view is shown
        when the card has its rows. Generic: a heading and the table, for each table of
        :func:`family_tables` (:func:`fairness_tests.pipeline.views.table_views`)."""
        return table_views(family_tables(cls.family_spec()))

    @classmethod
    def card_summaries(cls, tables: Mapping[str, pd.DataFrame]) -> dict[str, Any]:
        """What the family adds to the card's results besides its tables, selected from
        the run's ``tables`` when the card is filled (``{results key: value}``; its views
        show them with ``View(source="results")``). Generic: nothing."""
        return {}

    @classmethod
    def data_notes(cls, info: Any) -> list[str]:
        """What a pytest session's summary says of the data of a run whose info of this
        family is ``info`` (not None), one line each (e.g. BBQ: each file official
        release or not). Default: nothing."""
        return []

    @classmethod
    def card_protocol(cls, facts: Any, protocol: CardProtocol) -> None:
        """Add the family's statements of how it asked and scored to ``protocol``, for the
        run whose card facts are ``facts`` (:class:`fairness_tests.card.sections.facts.
        RunFacts`: its metadata ``facts.meta``, tables, ``facts.asked``, and
        ``facts.lack(path, section, hint)`` for a required fact the run lacks); called
        for every family, in ``card_rank`` order. What it records under
        ``protocol.record[<metadata_key>]`` needs the schema one of its benchmarks
        declares (``Benchmark.card_schema``). Default: nothing."""
        return None

    @classmethod
    def card_comparability(cls) -> tuple[tuple[str, str], ...]:
        """``(card path, label)`` of the facts its card records that two cards must share
        to measure the same thing (``card diff`` lists each that differs, after the
        shared ones: where the answers came from, scorer patterns, decoding). Default:
        none."""
        return ()

    @classmethod
    def protocol_view(cls, record: Mapping[str, Any]) -> ProtocolView:
        """How the card shows the family's ``record`` (what :meth:`card_protocol` wrote
        under ``evaluation_protocol``). Generic: a subsection of its name with every
        field of the record."""
        name = cls.family_spec().name
        return ProtocolView(title=f"{name}: data and settings", anchor=f"{name}_protocol",
                            pairs=tuple(sorted(record.items())))

    @classmethod
    def explore(cls, records: pd.DataFrame, metadata: Any) -> ExploreView:
        """How the run explorer shows this family's ``records`` of a run whose
        ``metadata`` (:class:`~fairness_tests.run.metadata.RunMetadata`) is given. The
        default: the records as stored, every declaration inferred from them."""
        return ExploreView(frame=records)


def by_family(names: Sequence[str]) -> Iterable[tuple[type[Family], list[Benchmark]]]:
    """The registered benchmarks of ``names``, grouped by family (in the order each
    family first appears), each family's class imported here."""
    groups: dict[FamilySpec, list[Benchmark]] = {}
    for name in names:
        cls = benchmark(name)
        groups.setdefault(cls.family, []).append(cls())
    return [(load(spec.impl), members) for spec, members in groups.items()]


def benchmark(name: str) -> type[Benchmark]:
    """The registered benchmark class of ``name`` (imported on first use)."""
    cls: type[Benchmark] = load(REGISTRY[name])
    return cls


def benchmarks() -> tuple[type[Benchmark], ...]:
    """Every registered benchmark class, in registry order."""
    return tuple(benchmark(name) for name in REGISTRY)


def families() -> tuple[FamilySpec, ...]:
    """Every registered benchmark family, in the order its first benchmark is registered."""
    return tuple(dict.fromkeys(b.family for b in benchmarks()))


def ranked_families() -> list[tuple[FamilySpec, type[Family]]]:
    """Every registered family with its class, in ``card_rank`` order (then registry
    order): the order of the card's statements, views and records."""
    loaded = [(spec, load(spec.impl)) for spec in families()]
    return [pair for _, pair in sorted(enumerate(loaded),
                                       key=lambda x: (x[1][1].card_rank, x[0]))]


def family_tables(family: FamilySpec) -> tuple[str, ...]:
    """The tables that show a family ran: its benchmarks' ``tables``, in registry order."""
    return tuple(dict.fromkeys(t for b in benchmarks() if b.family == family for t in b.tables))


def extra_rules(config: AuditConfig) -> list[tuple[Path, dict[str, Any]]]:
    """The rule documents the families of ``config``'s benchmarks bring
    (``Family.rule_documents``), for :func:`fairness_tests.rules.thresholds.load_rules`."""
    return [doc for family, _ in by_family(config.benchmarks)
            for doc in family.rule_documents(config)]


def data_notes(metadata: Any) -> list[str]:
    """What a run's summary says of its data: each family's
    (:meth:`Family.data_notes`, e.g. each BBQ file official release or not), in
    registry order; none for a run without metadata."""
    infos = getattr(metadata, "infos", None) or {}
    return [line for spec in families() if infos.get(spec.metadata_key) is not None
            for line in load(spec.impl).data_notes(infos[spec.metadata_key])]
