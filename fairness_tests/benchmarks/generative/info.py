"""What a run records about the generative audit (run.json's ``generative`` key): the
suite and its hash, the rubric(s) and scorers, the decoding, seeds, prompt families,
slices and reductions. Light (no pandas): the benchmark's declaration registers it;
:mod:`~fairness_tests.benchmarks.generative.describe` computes it."""
from __future__ import annotations

from dataclasses import dataclass, field

from fairness_tests.run.metadata import Bootstrap


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
