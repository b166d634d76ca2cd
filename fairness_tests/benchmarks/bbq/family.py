"""The BBQ family at work: the items of a run, its consistency sample, and the one
predictions table and BBQ table builder (:func:`fairness_tests.benchmarks.bbq.tables.bbq_tables`)
that its two benchmarks (:mod:`fairness_tests.benchmarks.bbq`) share."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from fairness_tests.benchmarks.bbq import card, compare, gate
from fairness_tests.benchmarks.bbq.data import bbq_dir, derived_target_note, load_filtered
from fairness_tests.benchmarks.bbq.describe import bbq_info, data_release_lines
from fairness_tests.benchmarks.bbq.prompt import build_requests, predictions_table, prompt_text
from fairness_tests.benchmarks.bbq.sample import consistency_sample, sample_record
from fairness_tests.benchmarks.bbq.tables import bbq_records, bbq_tables
from fairness_tests.core.errors import FairnessTestsError
from fairness_tests.core.paths import display_path
from fairness_tests.models.requests.request import Decoding, Request
from fairness_tests.pipeline.benchmark import Asked, ExploreView, Family, GatePart, Results
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.views import CardProtocol, Compared, ProtocolView, Section, View

ANSWER_KEY = ["dataset", "example_id", "repeat", "rotation"]
#: an answer's outcome in the explorer, the first that holds
OUTCOMES = (("invalid", "invalid", True), ("unknown", "non_unknown", False),
            ("stereotyped", "biased", True))


def limit_cells(items: pd.DataFrame, limit: int | None,
                first: pd.DataFrame | None = None) -> pd.DataFrame:
    """At most ``limit`` items per dataset x context x polarity (all when None): the
    items of ``first`` (e.g. the consistency sample) before the others, each part by
    dataset and example_id; the result by dataset and example_id."""
    if not limit:
        return items
    order = items.sort_values(["dataset", "example_id"])
    if first is not None and len(first):
        ids = pd.MultiIndex.from_frame(first[["dataset", "example_id"]])
        chosen = pd.MultiIndex.from_frame(order[["dataset", "example_id"]]).isin(ids)
        order = pd.concat([order[chosen], order[~chosen]])
    return (order.groupby(["dataset", "context", "polarity"], sort=True).head(limit)
            .sort_values(["dataset", "example_id"]).reset_index(drop=True))


class BBQFamily(Family):
    """The BBQ items of a run, its consistency sample, and how a BBQ request is made.

    ``--limit N`` (a smoke run) keeps N items per dataset x context x polarity; when the
    run asks the consistency sample (the consistency protocol, or rotations of the
    sample) they are taken from the full seeded sample first, so that a smoke run asks
    a part of what a full run asks (and replays from the same recordings), never
    another sample."""

    card_rank = 40

    @classmethod
    def compare_sections(cls, entries: Sequence[Compared]) -> list[Section]:
        return compare.sections(entries)

    @classmethod
    def data_notes(cls, info: Any) -> list[str]:
        """Each BBQ file official release or not
        (:func:`~fairness_tests.benchmarks.bbq.describe.data_release_lines`), and a target_loc
        derived by the authors' rule (:func:`~fairness_tests.benchmarks.bbq.data.
        derived_target_note`)."""
        note = derived_target_note(info.target_loc)
        return data_release_lines(info) + ([f"note: BBQ target_loc {note}"] if note else [])

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
        self.data, items = load_filtered(bbq_dir(config.bbq_dir), config.categories,
                                         config.bbq_filter)
        wants_sample = "consistency" in config.benchmarks or config.rotations == "sample"
        sample = consistency_sample(items, per_cell=config.per_cell, seed=config.seed) \
            if wants_sample else items.iloc[:0]
        self.items = limit_cells(items, config.limit, sample)
        self.per_cell = min(config.per_cell, config.limit or config.per_cell)
        if config.limit and wants_sample:
            keep = pd.MultiIndex.from_frame(self.items[["dataset", "example_id"]])
            sample = sample[pd.MultiIndex.from_frame(
                sample[["dataset", "example_id"]]).isin(keep)].reset_index(drop=True)
        self.sample = sample

    @classmethod
    def gate_parts(cls) -> list[GatePart]:
        return gate.gate_parts()

    @classmethod
    def protocol_facts(cls, info: Any, records: pd.DataFrame | None) -> dict[str, Any]:
        return gate.protocol_facts(info, records)

    @classmethod
    def response_key(cls) -> tuple[tuple[str, ...], str]:
        return (*gate.KEY, "repeat", "rotation"), "answer"

    def ask(self, items: pd.DataFrame, rotations: tuple[int, ...], repeats: int) -> list[Request]:
        c = self.config
        return build_requests(items, rotations=rotations, repeats=repeats,
                              backend=c.backend_name(), model=c.model, api_base=c.api_base,
                              seed=c.seed, decoding=Decoding(temperature=c.temperature,
                                                             max_tokens=c.max_tokens))

    def results(self, asked: dict[str, Asked]) -> Results:
        c = self.config
        requests = [r for a in asked.values() for r in a.requests]
        responses = [r for a in asked.values() for r in a.responses]
        preds = predictions_table(requests, responses).drop_duplicates(ANSWER_KEY) \
            .reset_index(drop=True)
        tables = bbq_tables(self.items, preds, n_boot=c.n_boot, seed=c.seed,
                            cluster=c.bbq_cluster, stage=self.stages)
        sampled = "consistency" in asked and c.consistency_items == "sample"
        info = bbq_info(
            self.data, self.items, preds, filter=c.bbq_filter, seed=c.seed, n_boot=c.n_boot,
            cluster=c.bbq_cluster, data_dir=display_path(self.data.directory),
            temperature=c.temperature, max_tokens=c.max_tokens, limit=c.limit,
            sample=sample_record(self.sample, c.seed, self.per_cell) if sampled else None)
        info.consistency_items = c.consistency_items
        return Results(tables=tables, records={"bbq": bbq_records(self.items, preds)},
                       metadata={"bbq": info})


    @classmethod
    def explore(cls, records: pd.DataFrame, metadata) -> ExploreView:
        """The records with the prompt as the model saw it (``prompt``: the user message
        of :func:`~fairness_tests.benchmarks.bbq.prompt.prompt_text` under the row's
        rotation) and the chosen option's text (``answer_text``), both rebuilt from the
        BBQ data the run read (its ``data_dir``, else where the BBQ commands look),
        matched on dataset and example_id; without that data, the records alone."""
        view = ExploreView(frame=records, key=tuple(ANSWER_KEY), outcomes=OUTCOMES,
                           otherwise="anti-stereotyped", correct="correct",
                           cluster="question_index", answer="answer",
                           first={"repeat": 0, "rotation": 0})
        info = getattr(metadata, "bbq", None)
        try:
            texts = _item_texts(info)
        except FairnessTestsError as exc:
            return replace(view, notes=(f"no prompt text: {exc}",))
        frame = records.merge(texts, on=["dataset", "example_id"], how="left")
        options = frame[["ans0", "ans1", "ans2"]].astype(object)
        rot = frame["rotation"].fillna(0).astype(int).clip(0, 2)
        frame["prompt"] = [
            prompt_text(c, q, o, r) if isinstance(c, str) else None
            for c, q, o, r in zip(frame["context_text"], frame["question"],
                                  options.itertuples(index=False), rot, strict=True)]
        ans = pd.to_numeric(frame["answer"], errors="coerce")
        frame["answer_text"] = [o[int(a)] if a == a and 0 <= a < 3 else None
                                for o, a in zip(options.itertuples(index=False), ans,
                                                strict=True)]
        frame = frame.drop(columns=["context_text", "question", "ans0", "ans1", "ans2"])
        where = display_path(texts.attrs["directory"])
        return replace(view, frame=frame, text=("prompt",), answer="answer_text", notes=(
            f"prompt and answer_text rebuilt from the BBQ data in {where} (the user message; "
            "the chat template and system prompt, if any, are not shown)",))


def _item_texts(info) -> pd.DataFrame:
    """dataset, example_id, context_text, question, ans0..ans2 of the run's items, from
    the run's ``data_dir`` when it is there, else where the BBQ commands look."""
    args = (tuple(info.categories), info.filter) if info else ()
    dirs = [bbq_dir(info.data_dir)] if info and info.data_dir else []
    dirs.append(bbq_dir(None))
    last: FairnessTestsError | None = None
    for directory in dirs:
        try:
            _, items = load_filtered(directory, *args)
        except FairnessTestsError as exc:
            last = exc
            continue
        out = items[["dataset", "example_id", "context_text", "question", "ans0", "ans1",
                     "ans2"]].drop_duplicates(["dataset", "example_id"])
        out.attrs["directory"] = directory
        return out
    assert last is not None
    raise last
