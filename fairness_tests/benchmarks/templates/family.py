"""A team's benchmark at work: the file read and filled, its requests, and its records,
tables and run metadata (:mod:`.metrics` for a decision outcome, :mod:`.generate` for a
generation), plus what the model-upgrade gate compares item by item."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from fairness_tests.benchmarks.templates import Templates, TemplatesInfo, card
from fairness_tests.benchmarks.templates.generate import generate_tables
from fairness_tests.benchmarks.templates.metrics import (
    SLICE,
    decision_tables,
    gate_frame,
    gate_metrics,
    with_reference,
)
from fairness_tests.benchmarks.templates.prompt import (
    CONTINUATIONS,
    answers,
    build_requests,
    generations,
    seeds,
    template_prompt,
)
from fairness_tests.benchmarks.templates.spec import (
    DISCRIM_ANSWER_PREFIX,
    DISCRIM_QUESTION_SUFFIX,
    EXAMPLE,
    Spec,
    items,
    load_spec,
)
from fairness_tests.core.paths import display_path
from fairness_tests.models.requests.request import Request
from fairness_tests.pipeline.benchmark import Asked, Family, GatePart, Results
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.scorers import scoring_context
from fairness_tests.pipeline.views import CardProtocol
from fairness_tests.scoring.registry import score_with, scorer_infos

RECORDS = "templates"
STATISTICS = ("per-group means; intervals: percentile bootstrap over templates (the "
              "template is the cluster; --cluster templates=item: items); p-values: group "
              "labels permuted within templates")


class TemplatesFamily(Family):
    """The benchmark file of a run (``--benchmark``, else the packaged lending example)
    and its items; ``--limit N`` keeps the first N templates (every combination of the
    attributes of each: the design stays crossed)."""

    def __init__(self, config: AuditConfig):
        super().__init__(config)
        self.spec: Spec = load_spec(config.benchmark_file or EXAMPLE)
        self.reductions: list[str] = []
        filled = items(self.spec)
        if config.limit:
            filled = filled[filled["template_index"] < config.limit].reset_index(drop=True)
            self.reductions.append(f"first {config.limit} templates only")
        self.items = filled

    def requests(self) -> list[Request]:
        c = self.config
        return build_requests(self.spec, self.items, backend=c.backend_name(), model=c.model,
                              api_base=c.api_base)

    def results(self, asked: dict[str, Asked]) -> Results:
        c, s = self.config, self.spec
        a = next(iter(asked.values()))
        attrs = tuple(s.attributes)
        unit = c.cluster_of(Templates.family.name)        # --cluster templates=item|template
        if s.kind == "generate":
            recs = generations(self.items, a.requests, a.responses)
            names = c.scorer_list(c.rubric, None)
            by = score_with(names, recs, scoring_context(c, names, self.store, c.progress,
                                                         c.live))
            scored = next(iter(by.values())).scored
            groups, summary = generate_tables(scored, attrs, c.n_boot, c.seed, unit)
            tables = {"templates_generate_groups": groups,
                      "templates_generate_summary": summary}
            records = scored
            scorers = scorer_infos(by) if c.scorers else []
        else:
            records = with_reference(answers(s, self.items, a.requests, a.responses),
                                     s.attributes, s.reference)
            groups, summary = decision_tables(records, s.attributes, s.reference, c.n_boot,
                                              c.seed, unit=unit)
            tables = {"templates_groups": groups, "templates_summary": summary}
            scorers = []
        return Results(tables=tables, records={RECORDS: records},
                       metadata={RECORDS: self.info(a.requests, records, scorers)})

    def info(self, requests: list[Request], records: pd.DataFrame,
             scorers: list[dict[str, Any]] | None = None) -> TemplatesInfo:
        s = self.spec
        return TemplatesInfo(
            name=s.name, description=s.description, file=display_path(s.path),
            sha256=s.sha256, outcome=s.kind, prompt=_prompt_note(s),
            attributes={a: list(v) for a, v in s.attributes.items()},
            reference=dict(s.reference), n_templates=int(self.items["template"].nunique()),
            n_items=len(self.items), n_requests=len(requests), statistics=STATISTICS,
            status_counts={k: int(v) for k, v in sorted(Counter(records["status"]).items())},
            reductions=list(self.reductions), rules_in_file=len(s.rules),
            scorers=list(scorers or []),
            templates=[{"id": tid, "prompt": template_prompt(s, text)}
                       for tid, text in s.templates],
            system_prompt=s.outcome.get("system_prompt") if s.kind == "generate" else None,
            decoding=_decoding(requests) if s.kind != "yes_no" else {},
            seeds=list(seeds(s)) if s.kind == "generate" else [],
            n_prompts=len({q.prompt_key() for q in requests}))

    @classmethod
    def card_protocol(cls, facts: Any, protocol: CardProtocol) -> None:
        """The benchmark file's templates, decoding, invalid items, scoring and record
        (:mod:`.card`)."""
        card.card_protocol(facts, protocol)

    @classmethod
    def rule_documents(cls, config: AuditConfig) -> list[tuple[Path, dict[str, Any]]]:
        """The benchmark file's own ``rules:`` as a thresholds document (``(file,
        {"version": 1, "rules": [...]})``; none when it has none), already checked with
        the thresholds schema when the file was read; merged after the thresholds in force
        (:func:`fairness_tests.pipeline.benchmark.extra_rules`)."""
        spec = load_spec(config.benchmark_file or EXAMPLE)
        return [(Path(spec.path), {"version": 1, "rules": spec.rules})] if spec.rules else []

    @classmethod
    def protocol_facts(cls, info: Any, records: pd.DataFrame | None) -> dict[str, Any]:
        """The benchmark file (its sha256), its outcome and prompt, and the item set:
        two runs of different files are never compared."""
        facts: dict[str, Any] = {}
        if info is not None:
            facts.update({"file (sha256)": info.sha256, "outcome": info.outcome,
                          "prompt": info.prompt})
        if records is not None and len(records):
            facts["items"] = frozenset(records["item"].astype(str))
        return facts

    @classmethod
    def response_key(cls) -> tuple[tuple[str, ...], str] | None:
        """An answer is its item's logit of yes (a decision outcome) or generated text."""
        return ("item",), "logit_yes"

    @classmethod
    def gate_parts(cls) -> list[GatePart]:
        """A decision outcome's records, item by item: per attribute (and ``slice``) the
        disparity and the worst gap of the mean logit of yes, paired by item (template x
        slot values), templates resampled."""
        return [GatePart(frame=_gate_frame, key=("item", "attribute"), by=("attribute",),
                         metrics=gate_metrics, cluster_columns={"template": "template",
                                                                "item": None},
                         carry=("template", "group", "is_reference"))]


def _decoding(requests: list[Request]) -> dict[str, float | int]:
    """The requests' decoding (one for every request of a file), as the card states it."""
    if not requests:
        return {}
    d = requests[0].decoding
    return {"temperature": d.temperature, "top_p": d.top_p, "max_new_tokens": d.max_tokens}


def _prompt_note(s: Spec) -> str:
    if s.kind == "yes_no":
        o = s.outcome
        same = (o.get("question_suffix", DISCRIM_QUESTION_SUFFIX) == DISCRIM_QUESTION_SUFFIX
                and o.get("answer_prefix", DISCRIM_ANSWER_PREFIX) == DISCRIM_ANSWER_PREFIX)
        return ("template + question suffix + answer prefix, "
                + ("discrim-eval's (as lm-evaluation-harness's discrim_eval task)" if same
                   else "the file's own")
                + f"; log-likelihoods of {', '.join(CONTINUATIONS)}")
    if s.kind == "choice":
        return f"template + options (a)..; favourable option: {s.outcome['favourable']}"
    return f"template as the user message; seeds {list(seeds(s))}"


def _gate_frame(records: pd.DataFrame) -> pd.DataFrame:
    """The gate's per-item frame of a decision run (empty for a generate run: its
    generations are compared by their tables, not item by item here). The attributes are
    the record columns between ``template_index`` and ``slice``."""
    if "logit_yes" not in records:
        return pd.DataFrame()
    cols = list(records.columns)
    return gate_frame(records, tuple(cols[cols.index("template_index") + 1:cols.index(SLICE)]))
