"""What a run records about CrowS-Pairs (run.json's ``crows_pairs`` key): the data and its
release status, the requests, the counts, the interval methods, and the authors' warning
every report carries. Light (no pandas): the benchmark's declaration registers it."""
from __future__ import annotations

from dataclasses import dataclass, field

from fairness_tests.run.metadata import Bootstrap


@dataclass
class CrowsPairsInfo:
    """``release``: "official release" or "not the official release" (the csv's sha256
    against the recorded one); ``counts``: valid pairs per bias type; ``requests``: how a
    sentence is scored; ``n_prompts``: the distinct prompts asked (None: a run written
    before it was recorded); ``warnings``: the authors' data-reliability warning (and any
    limitation of the run), for the card; ``reference``: the definitions it equals."""
    data_dir: str | None
    source: str
    sha256: dict[str, str]
    official: bool
    release: str
    n_pairs: int
    counts: dict[str, int]
    n_requests: int
    invalid_pairs: int
    requests: str
    adaptation: str
    reference: str
    bootstrap: Bootstrap
    limit: int | None = None
    warnings: list[str] = field(default_factory=list)
    #: distinct prompts asked (sentences: a sentence two pairs share is asked once)
    n_prompts: int | None = None
