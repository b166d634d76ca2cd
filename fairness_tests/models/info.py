"""The typed records a run keeps about how it asked (``run.json``: ``backend_info``,
``asking.usage``, ``asking.batch``): what a backend reports of itself
(:class:`BackendInfo`), what a remote one spent (:class:`Usage`) and how a ``--batch``
run's provider jobs went (:class:`BatchInfo`). A leaf: plain dataclasses, no import of
the rest of ``models``, so ``run/`` reads them without loading backends or the batch
machinery."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BackendInfo:
    """What a run records about the backend that answered (``Backend.info()``): its name
    and its library's ``version`` (litellm's, transformers'); the ``model`` and server
    (``api_base``) asked (a sorted list when several were); how prompts were sent
    (``prompt_format``, ``answer_prefix``; ``prompt_formats``: the format each model was
    sent with); the litellm backend's ``top_logprobs`` and ``min_letter_mass``; a local
    model's ``device``, ``dtype``, ``path``, ``revision`` (its GGUF's sha256) and
    ``source`` (embedded, gguf, checkpoint); the replay backend's ``store``."""
    backend: str
    version: str | None = None
    model: str | list[str] | None = None
    api_base: str | list[str] | None = None
    prompt_format: str | None = None
    answer_prefix: str | None = None
    prompt_formats: dict[str, str] = field(default_factory=dict)
    top_logprobs: int | None = None
    min_letter_mass: float | None = None
    device: str | None = None
    dtype: str | None = None
    path: str | None = None
    revision: str | None = None
    source: str | None = None
    store: str | None = None


@dataclass
class Usage:
    """What a remote backend spent over its life: ``attempts`` (HTTP calls, retries
    included), ``retries``, ``calls`` (replies received: one per unit asked), the tokens
    billed (``prompt_tokens``, ``completion_tokens``, of which ``reasoning_tokens``),
    ``cost_usd`` (None when any reply's cost was unknown: never a 0 standing for unknown),
    ``cost_known_usd`` (the sum over the replies whose cost is known),
    ``cost_unknown_calls``, ``truncated`` answers, and in the logprobs repeat mode the
    prompts read (``letter_prompts``), those below the letter-mass floor
    (``low_mass_prompts``) and the most candidates a reply gave at one position
    (``top_logprobs_returned``)."""
    attempts: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = 0.0
    cost_known_usd: float = 0.0
    cost_unknown_calls: int = 0
    calls: int = 0
    truncated: int = 0
    letter_prompts: int = 0
    low_mass_prompts: int = 0
    top_logprobs_returned: int = 0


@dataclass
class BatchInfo:
    """How a ``--batch`` run asked (``run.json`` ``asking.batch``, the card): the endpoint,
    the completion window, the discount and where the batch price comes from, every job
    that answered this run's requests (``batch_id``, ``label``, ``attempt``, ``status``,
    ``lines``, ``submitted_at``, ``completed_at``: ISO 8601 UTC), the lines sent, and the
    lines that fell back: ``resubmitted`` (in a second job), ``direct`` (asked directly),
    ``missing`` (could not be had: error rows)."""
    endpoint: str
    completion_window: str
    discount: str
    price_source: str | None
    jobs: list[dict] = field(default_factory=list)
    lines: int = 0
    resubmitted: int = 0
    direct: int = 0
    missing: int = 0
