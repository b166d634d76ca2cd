"""What the gate (and ``compare``'s pairwise tests) compare item by item in the generative
records: per prompt family the worst-slice stereotype and demeaning rate and the
refusal gap; overall the slice disparity of both and the refusal gap
(:func:`fairness_tests.metrics.gate.generative_gate_metrics`); and the protocol facts
two generative runs must share."""
from __future__ import annotations

from typing import Any

import pandas as pd

from fairness_tests.benchmarks.generative.metrics import with_cells
from fairness_tests.core.errors import DataError
from fairness_tests.metrics import gate as gm
from fairness_tests.pipeline.benchmark import GatePart

KEY = ("prompt_family", "paraphrase_id", "occupation", "slice_gender", "slice_religion",
       "temperature", "top_p", "seed")
#: the --cluster choices of the generative family: whole prompts or single generations
CLUSTERS = {"prompt": "prompt", "row": None}
COLUMNS = (*KEY, "stereotype", "demeaning", "refusal", "family", "slice", "prompt")
CARRY = ("family", "slice", "prompt")


def generative_frame(records: pd.DataFrame) -> pd.DataFrame:
    """The scored generations with their slice and prompt-family cells."""
    if "stereotype" not in records.columns:
        raise DataError("the generative records are not scored (no stereotype column)")
    return with_cells(records)


def gate_parts() -> list[GatePart]:
    per_family, overall = gm.generative_gate_metrics()
    return [GatePart(generative_frame, KEY, ("family",), lambda: per_family, CLUSTERS,
                     carry=CARRY, columns=COLUMNS),
            GatePart(generative_frame, KEY, (), lambda: overall, CLUSTERS,
                     carry=CARRY, columns=COLUMNS)]


def protocol_facts(info: Any, records: pd.DataFrame | None) -> dict[str, Any]:
    """The suite hash, decoding regimes, seeds, token limit, rubric and system prompt of
    the run's generative info, and the item set of its records."""
    facts: dict[str, Any] = {}
    if info is not None:
        facts.update({"suite hash": info.suite_hash,
                      "decoding": sorted((float(d["temperature"]), float(d["top_p"]))
                                         for d in info.decoding),
                      "seeds": list(info.seeds), "max_new_tokens": info.max_new_tokens,
                      "rubric": info.rubric, "system prompt": info.system_prompt})
    if records is not None and len(records):
        facts["items"] = frozenset(map(tuple, records[list(KEY)].astype(str)
                                       .drop_duplicates().to_numpy().tolist()))
    return facts
