"""What a run records about WinoBias (run.json's ``winobias`` key) and a card discloses."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WinoBiasInfo:
    """``source``: the authors' repository @ commit; ``data_dir``: the directory read;
    ``release``: ``{file: "official" | "not the official release"}`` (sha256);
    ``prompt``: how a sentence is asked; ``prompt_id``; ``request_kind``; ``splits``;
    ``n_sentences`` asked, ``n_pairs`` (templates with both twins asked),
    ``n_unpaired`` (sentences that are their own cluster); ``n_invalid``; ``cluster``:
    the tables' bootstrap unit; ``n_boot``, ``seed``; ``limit``: sentences per split x
    type x stereotype (lines 1..N; None: all); ``warnings``: what the report must carry;
    ``sha256``: ``{file: sha256}`` of every file read; ``prompt_template``: the context
    asked (``{sentence}``, ``{Pronoun}``); ``n_prompts``: the distinct prompts asked,
    context and continuation (a sentence two files share is asked once; None: not
    recorded)."""
    source: str
    data_dir: str
    release: dict[str, str]
    official: bool
    prompt: str
    prompt_id: str
    request_kind: str
    splits: list[str]
    n_sentences: int
    n_pairs: int
    n_unpaired: int
    n_invalid: int
    cluster: str
    n_boot: int
    seed: int
    limit: int | None = None
    warnings: list[str] = field(default_factory=list)
    sha256: dict[str, str] = field(default_factory=dict)
    prompt_template: str = ""
    n_prompts: int | None = None
