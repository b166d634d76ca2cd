"""The generative audit at work: open-ended prompts over slices x occupations x prompt families x
paraphrases x decoding regimes x seeds (a suite YAML, or a published grid), scored by a
lexical rubric (and a second one for scorer sensitivity), tabulated by the one generative
table builder (:func:`fairness_tests.benchmarks.generative.tables.generative_tables`)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fairness_tests.benchmarks.generative import card, compare, gate
from fairness_tests.benchmarks.generative.describe import generative_info
from fairness_tests.benchmarks.generative.grid import grid_hash
from fairness_tests.benchmarks.generative.metrics import with_cells
from fairness_tests.benchmarks.generative.published import (
    PUBLISHED_SYSTEM_PROMPT,
    load_published_grid,
)
from fairness_tests.benchmarks.generative.requests import grid_requests, records
from fairness_tests.benchmarks.generative.scorers import score_generations
from fairness_tests.benchmarks.generative.suite import load_suite
from fairness_tests.core.errors import ConfigError
from fairness_tests.models.requests.request import Request
from fairness_tests.pipeline.benchmark import Asked, ExploreView, Family, GatePart, Results
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.views import CardProtocol, Compared, ProtocolView, Section, View
from fairness_tests.scoring.lexical import category_spans
from fairness_tests.scoring.rubric import load_rubric

#: the rubric categories the explorer marks in a generation, and an answer's outcome
#: (the first that holds)
MARKED = ("refusal", "deflection", "stereotype", "demeaning")
OUTCOMES = (("failed", "is_error", True), ("refusal", "refusal", True),
            ("demeaning", "demeaning", True), ("stereotype", "stereotype", True))
KEY = ("prompt_family", "paraphrase_id", "occupation", "slice_gender", "slice_religion",
       "temperature", "top_p", "seed")


def reduce_seeds(grid: pd.DataFrame, seeds: tuple[int, ...] | None,
                 reductions: list[str]) -> pd.DataFrame:
    """Only the rows of ``seeds`` (all when None); a seed the protocol does not have is an
    error, never dropped."""
    if not seeds:
        return grid
    known = sorted({int(s) for s in grid["seed"]})
    missing = [s for s in seeds if s not in known]
    if missing:
        raise ConfigError(f"--gen-seeds: seed(s) {', '.join(map(str, missing))} not in the "
                          f"protocol; its seeds: {', '.join(map(str, known))}")
    reductions.append(f"seeds reduced to {list(seeds)}")
    return grid[grid["seed"].isin(seeds)].reset_index(drop=True)


class GenerativeFamily(Family):
    """The grid of a run (after its reductions) and its rubrics."""

    card_rank = 10

    @classmethod
    def compare_sections(cls, entries: Sequence[Compared]) -> list[Section]:
        return compare.sections(entries)

    @classmethod
    def protocol_view(cls, record: Mapping[str, Any]) -> ProtocolView:
        return card.protocol_view(record)

    @classmethod
    def card_comparability(cls) -> tuple[tuple[str, str], ...]:
        return card.COMPARABILITY

    @classmethod
    def card_protocol(cls, facts: Any, protocol: CardProtocol) -> None:
        card.card_protocol(facts, protocol)

    @classmethod
    def card_results(cls, tables: Mapping[str, list[dict]]) -> list[View]:
        return card.VIEWS

    @classmethod
    def card_summaries(cls, tables: Mapping[str, pd.DataFrame]) -> dict[str, Any]:
        return card.summaries(tables)

    def __init__(self, config: AuditConfig):
        super().__init__(config)
        self.suite: Any = None
        if config.published_grid:
            grid = load_published_grid(config.published_grid)
            self.system = PUBLISHED_SYSTEM_PROMPT
            self.name = f"published:{Path(config.published_grid).name}"
            self.suite_hash = grid_hash(grid, self.system)
        else:
            self.suite = load_suite(config.suite)
            grid, self.system = self.suite.grid(), self.suite.system_prompt
            self.name, self.suite_hash = self.suite.name, self.suite.hash()
        self.n_full = len(grid)
        self.reductions: list[str] = []
        grid = reduce_seeds(grid, config.gen_seeds, self.reductions)
        if config.gen_max_new_tokens:
            grid = grid.assign(max_new_tokens=grid["max_new_tokens"].clip(
                upper=config.gen_max_new_tokens))
            self.reductions.append(f"max_new_tokens capped at {config.gen_max_new_tokens}")
        if config.gen_limit:
            grid = grid.iloc[:config.gen_limit]
            self.reductions.append(f"first {config.gen_limit} grid rows only")
        self.grid = grid.reset_index(drop=True)
        if not config.scorers:          # checked before anything is asked
            load_rubric(config.rubric)
            if config.compare_rubric:
                load_rubric(config.compare_rubric)

    @classmethod
    def gate_parts(cls) -> list[GatePart]:
        return gate.gate_parts()

    @classmethod
    def protocol_facts(cls, info: Any, records: pd.DataFrame | None) -> dict[str, Any]:
        return gate.protocol_facts(info, records)

    @classmethod
    def response_key(cls) -> tuple[tuple[str, ...], str]:
        return gate.KEY, "output_text"

    def results(self, asked: dict[str, Asked]) -> Results:
        c = self.config
        a = asked["generative"]
        recs = records(a.requests, a.responses)
        sg = score_generations(recs, c, self.store, progress=c.progress, live=c.live,
                               stage=self.stages)
        scored, tables = sg.primary.scored, sg.tables
        info = generative_info(
            recs, sg.rubric, sg.other, n_boot=c.n_boot, seed=c.seed, suite=self.suite,
            cluster=c.gen_cluster, name=self.name, suite_hash=self.suite_hash,
            system_prompt=self.system, n_grid_full=self.n_full, reductions=self.reductions,
            gen_max_new_tokens=c.gen_max_new_tokens)
        if c.scorers:
            info.scorers = sg.scorer_infos()
        return Results(tables=tables, records={"generative": scored},
                       metadata={"generative": info})


    def requests(self) -> list[Request]:
        """The grid's requests, in grid order."""
        c = self.config
        return grid_requests(self.grid, self.system, backend=c.backend_name(),
                             model=c.model, api_base=c.api_base)

    @classmethod
    def explore(cls, records: pd.DataFrame, metadata) -> ExploreView:
        """The records with the tables' cell columns (``slice``, ``family``,
        ``decoding``, and the bootstrap's ``prompt``: :func:`~fairness_tests.metrics.
        generative.with_cells`) and ``hits``: where the run's rubric matched the
        generation (``start:end:category`` separated by ";")."""
        frame = with_cells(records)
        info = getattr(metadata, "generative", None)
        name = info.rubric if info and info.rubric else "published"
        notes: tuple[str, ...] = ()
        try:
            rubric = load_rubric(name)
        except ConfigError as exc:
            rubric, notes = None, (f"no rubric hits marked: {exc}",)
        if rubric is not None:
            frame["hits"] = [";".join(f"{a}:{b}:{c}" for a, b, c in
                                      category_spans(str(t), rubric, MARKED)) if t == t else ""
                             for t in frame["output_text"]]
            notes = (f"hits: the {rubric.name} rubric's {', '.join(MARKED)} matches",)
        return ExploreView(frame=frame, key=KEY, answer="output_text",
                           text=("prompt_text", "output_text"), outcomes=OUTCOMES,
                           otherwise="answered", cluster="prompt",
                           highlight={"output_text": "hits"}, notes=notes)
