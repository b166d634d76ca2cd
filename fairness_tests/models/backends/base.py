"""The backend interface.

A backend turns requests into responses. It never raises for a per-request
failure: a request that finally fails becomes a ``Response(status="error")``
(or ``"refused"`` when the provider refused). It knows nothing about the store:
``models.asking.runner.ask`` consults the store first and gives a backend only misses.

Reporting. ``answer(requests, on_response)`` calls ``on_response(request, response)``
as each response completes. ``runner.ask`` passes a :class:`Reporter`, which also
hears a batched backend's phases: :meth:`Reporter.phase` before a setup step (loading
a model), :meth:`Reporter.begin` when the computation starts (with the work it
needs), :meth:`Reporter.batch_done` after each batch (the responses reported since the
previous one are then committed in one transaction). A backend that reports one
response at a time (concurrent API calls) calls none of these and each response is
committed on its own. A plain callable still works as ``on_response``.

``capabilities`` (a :class:`Capabilities`) says what a backend can do; every behaviour
that depends on it asks it, never the backend's name (:func:`capabilities_of`).

Optional hooks (the runner uses them when a backend has them):

- ``request_fields(request) -> dict``: fields the backend's options put into a
  request's key (the litellm backend's ``prompt_format`` / ``answer_prefix``); the
  runner applies them (:func:`fairness_tests.models.asking.runner.stamp_requests`) before it
  computes keys;
- ``load_capabilities(records)`` / ``learned_capabilities() -> records``: what the
  store remembers about servers (:mod:`fairness_tests.models.store.capabilities`), handed
  in before asking, and what the backend learned, stored after.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.info import BackendInfo
from fairness_tests.models.requests.request import Request, Response


class Reporter:
    """What ``runner.ask`` passes a backend as ``on_response`` (see the module docstring).
    The methods here do nothing: a subclass listens to what it needs."""

    def __call__(self, request: Request, response: Response) -> None:
        """One response completed."""

    def phase(self, text: str) -> None:
        """A setup step starts (``"loading model ..."``)."""

    def begin(self, total_work: int, unit: str, note: str = "") -> None:
        """The computation starts; it needs ``total_work`` units (e.g. tokens). From now
        on responses arrive in batches closed by :meth:`batch_done`."""

    def batch_done(self, work: int) -> None:
        """A batch finished: ``work`` units computed since the previous call."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the runner, the asker, the audit and the dry run ask these,
    never a backend's name.

    - ``n`` / ``logprobs``: the repeats of a prompt are answered by one call (``n``
      choices) / drawn from next-token log-probabilities (a local model: its one
      forward pass); ``None`` when it depends on the server and is detected on first
      use (an API backend);
    - ``batch``: requests can go to the provider as one asynchronous batch job (a
      provider batch API, billed at its batch price);
    - ``prefix_sharing``: prompt prefixes shared between requests are computed once
      (the backend has ``plan_tokens(requests)`` and ``prompt_tokens_of(request)``,
      what the dry run reports);
    - ``replay``: answers only from recordings, asks no model;
    - ``remote``: asks a server: its requests are billed in tokens (and money where
      priced), rate limits apply and the repeat mode (``calls`` / ``n`` /
      ``logprobs``) shapes them; False for a model computed here;
    - ``structured_output``: the backend can send a ``response_format`` JSON schema
      (``Request.response_format``) that the model's answer will follow; ``None``
      when it depends on the server (learned from its first refusal of it,
      :mod:`fairness_tests.models.store.capabilities`), False where only free text comes back."""
    n: bool | None
    logprobs: bool | None
    batch: bool
    prefix_sharing: bool
    replay: bool
    remote: bool = False
    structured_output: bool | None = False


#: a backend that declares nothing: a live one answering each request on its own
PLAIN = Capabilities(n=False, logprobs=False, batch=False, prefix_sharing=False, replay=False)


def capabilities_of(backend: object) -> Capabilities:
    """``backend.capabilities``; :data:`PLAIN` for a backend that declares none."""
    caps = getattr(backend, "capabilities", None)
    return caps if isinstance(caps, Capabilities) else PLAIN


def unknown_option(backend: str, unknown: dict[str, Any], options: tuple[str, ...]) -> None:
    """A :class:`ConfigError` naming the first of ``unknown`` (a backend's constructor
    keywords it does not take), if any."""
    if unknown:
        name = sorted(unknown)[0]
        raise ConfigError(f"unknown option {name!r} for the {backend} backend; it takes "
                          f"{', '.join(options)}", key=name)


@runtime_checkable
class Backend(Protocol):
    name: str

    @property
    def capabilities(self) -> Capabilities:
        """What the backend can do (:class:`Capabilities`)."""
        ...

    def answer(self, requests: list[Request],
               on_response: Callable[[Request, Response], None] | None = None) -> list[Response]:
        """Responses in the order of ``requests``. ``on_response`` is called as each
        one completes (the runner stores it at once, so a crash loses nothing done)."""
        ...

    def info(self) -> BackendInfo:
        """What the card records: backend name and version, model id, revision."""
        ...

    def fingerprint(self) -> dict[str, str]:
        """What this backend adds to a request before the model sees it, and which
        weights answer: always ``backend``; then, as the backend knows them,
        ``prompt_format`` (the turn format), ``answer_prefix``, ``chat_template_sha256``,
        ``weights_sha256``, ``dtype``, ``provider_seed`` (how seed and repeat become the
        provider's seed). Stored beside every response and checked when a stored
        response is served (:mod:`fairness_tests.models.store.fingerprint`). Cheap: computed
        without loading a model. Transport (``api_base``, timeouts, limits) is not part of it."""
        ...


_REGISTRY: dict[str, str] = {
    "replay": "fairness_tests.models.backends.replay:ReplayBackend",
    "litellm": "fairness_tests.models.backends.litellm_backend:LiteLLMBackend",
    "transformers": "fairness_tests.models.backends.transformers_backend:TransformersBackend",
}


def register_backend(name: str, target: str) -> None:
    """Register ``"module:Class"`` under ``name``."""
    _REGISTRY[name] = target


def get_backend(name: str, **options: Any) -> Backend:
    if name not in _REGISTRY:
        raise ConfigError(f"unknown backend {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)(**options)
