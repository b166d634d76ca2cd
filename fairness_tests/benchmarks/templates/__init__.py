"""A team's own benchmark in one YAML file, declared (``fairness-tests audit --benchmark
FILE``; without it, the packaged lending example): templates whose ``{slots}`` are filled
from attribute lists, and one outcome: a yes/no decision (the probability of "yes", as in
Anthropic's discrim-eval), a choice among listed options (letter probabilities, as BBQ)
or a generation (scored by the generative audit's scorers). What computes is in
:mod:`fairness_tests.benchmarks.templates.family`, imported when a run uses it; the file's
format is ``schema.yaml`` here and docs/benchmarks.md.

Tables (a decision outcome): ``templates_groups`` (attribute x group: mean P(yes), mean
logit of yes, each group's gap to the reference group) and ``templates_summary``
(attribute: disparity, worst group's gap); a generation: ``templates_generate_groups``
and ``templates_generate_summary`` (the generative audit's slice metrics per group,
worst slice, disparity, refusal gap). ``attribute`` is one of the file's attributes or
``slice`` (their intersection)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from fairness_tests.benchmarks.generative.schema import GENERATIVE_METRICS, GENERATIVE_TABLE_METRICS
from fairness_tests.metrics.schema import Table, register_table
from fairness_tests.pipeline.benchmark import Benchmark, FamilySpec, Shown
from fairness_tests.run.metadata import register_info

if TYPE_CHECKING:
    from fairness_tests.benchmarks.templates.family import TemplatesFamily
    from fairness_tests.models.requests.request import Request

_VALUES = ("p_yes", "logit_yes")
_COLUMNS = ("attribute", "group")
register_table("templates_groups", Table(_COLUMNS, frozenset(
    {*_VALUES, *(f"{v}_gap" for v in _VALUES)})))
register_table("templates_summary", Table(_COLUMNS, frozenset(
    {*(f"{v}_disparity" for v in _VALUES), *(f"worst_{v}_gap" for v in _VALUES)})))
register_table("templates_generate_groups", Table(_COLUMNS, GENERATIVE_TABLE_METRICS))
register_table("templates_generate_summary", Table(_COLUMNS, frozenset(
    {*(f"worst_slice_{m}" for m in GENERATIVE_METRICS),
     *(f"disparity_{m}" for m in GENERATIVE_METRICS), "refusal_gap"})))


@dataclass
class TemplatesInfo:
    """What a card discloses about a team's benchmark: the file (name, path, sha256), its
    outcome and how the prompt is built, the design (attributes, reference groups,
    templates, items, requests), the statistics, the answers' statuses and the run's
    reductions; ``templates``: ``[{id, prompt}]``, each template as the model is asked
    it (its ``{slots}`` unfilled: for yes/no the context the continuations are scored
    after, for a choice the user message with its options; a generation's user message,
    ``system_prompt`` beside it); ``decoding``: the requests' temperature, top_p and
    max_new_tokens (a choice or a generation; empty for yes/no, which samples nothing);
    ``seeds``: a generation's; ``n_prompts``: the distinct prompts asked, seeds not
    counted (None: not recorded); ``scorers``: a generate outcome's scorers."""
    name: str
    description: str
    file: str
    sha256: str
    outcome: str
    prompt: str
    attributes: dict[str, list[str]]
    reference: dict[str, str]
    n_templates: int
    n_items: int
    n_requests: int
    statistics: str
    status_counts: dict[str, int]
    reductions: list[str] = field(default_factory=list)
    rules_in_file: int = 0
    #: a generate outcome's scorers when ``--scorers`` names them, as the generative
    #: audit records its own (name, kind, model, ...; a judge's failed requests, first
    #: error and notes: :func:`fairness_tests.report.verdicts.judge_incomplete`)
    scorers: list[dict] = field(default_factory=list)
    templates: list[dict[str, str]] = field(default_factory=list)
    system_prompt: str | None = None
    decoding: dict[str, float | int] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    n_prompts: int | None = None


#: what a run records about it, under run.json's "templates" key
register_info("templates", TemplatesInfo)


class Templates(Benchmark):
    name: ClassVar[str] = "templates"
    family = FamilySpec(name="templates", records="templates", metadata_key="templates",
                        impl="fairness_tests.benchmarks.templates.family:TemplatesFamily",
                        gated=True, compared=True, clusters=("template", "item"),
                        units=(("template", "the benchmark file's templates"),
                               ("item", "filled templates (items)")))
    scored = True
    marker = "a team's own template benchmark (--benchmark FILE)"
    tables = ("templates_groups", "templates_summary", "templates_generate_groups",
              "templates_generate_summary")
    drift_tables = ("templates_groups", "templates_summary", "templates_generate_groups")
    shown = (Shown("templates", tables, "no benchmark file of the team's own was run "
                   "(--benchmark FILE)"),)
    rules = "rules.yaml"
    properties = {
        "templates_group_gap": {"tables": "templates_groups",
                                    "metrics": ["logit_yes_gap"]},
        "templates_disparity": {"tables": "templates_summary",
                                    "metrics": ["logit_yes_disparity", "worst_logit_yes_gap"]},
        "templates_refusal_gap": {"tables": "templates_generate_summary",
                                      "metrics": ["refusal_gap"]},
    }
    recordings = {"embedded:gemma-3-270m": "recordings/embedded-gemma-3-270m.jsonl.gz"}
    #: its worked example (beside this module), which ``fairness-tests init`` copies into a
    #: project's ``benchmarks/``
    example: ClassVar[str] = "examples/lending.yaml"
    #: reads ``--benchmark FILE`` (a run with it and without ``--benchmarks`` asks this one)
    reads_benchmark_file: ClassVar[bool] = True
    card_schema: ClassVar[str | None] = "card_schema.yaml"

    @classmethod
    def drift_qualifier(cls, metadata: Any) -> str:
        """The benchmark file's ``name:`` (its run's info), ``""`` for a run without it:
        each team's file keeps drift snapshots of its own."""
        info = metadata.infos.get(cls.family.metadata_key)
        return str(info.name) if info is not None else ""

    def requests(self, family: TemplatesFamily) -> list[Request]:
        return family.requests()
