"""What a run records about Winogender (run.json's ``winogender`` key): light, no pandas."""
from __future__ import annotations

from dataclasses import dataclass, field

from fairness_tests.run.metadata import Bootstrap


@dataclass
class WinogenderInfo:
    """The data (where, sha256 and release status per file, the authors' repository and
    commit), the question (``prompt``: lm-eval's task, ``prompt_template``), what was
    asked (``n_items`` sentences, ``counts`` per gender and gotcha, ``limit``: a smoke
    run's templates per answer), the answers (``n_answers`` valid, ``invalid_answers``),
    how intervals were computed, and the authors' ``warnings`` for the report;
    ``prompt_id``: the prompt's id (the records' ``prompt_id``); ``n_prompts``: the
    distinct prompts asked, context and continuation (None: not recorded)."""
    data_dir: str | None
    repository: str
    commit: str
    sha256: dict[str, str]
    release: dict[str, str]
    official: bool
    prompt: str
    prompt_template: str
    request_kind: str
    n_items: int
    n_templates: int
    counts: dict[str, int]
    n_answers: int
    invalid_answers: int
    bootstrap: Bootstrap
    limit: int | None = None
    warnings: list[str] = field(default_factory=list)
    prompt_id: str = ""
    n_prompts: int | None = None
