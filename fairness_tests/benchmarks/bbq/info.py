"""What a run records about BBQ and the consistency benchmark (run.json's ``bbq`` key):
the data and its release status, the filter, the counts, the decoding, the prompt, the
rotations and the consistency sample. Light (no pandas): the benchmark's declaration
registers it; :mod:`~fairness_tests.benchmarks.bbq.describe` computes it."""
from __future__ import annotations

from dataclasses import dataclass, field

from fairness_tests.run.metadata import Bootstrap


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
