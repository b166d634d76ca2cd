"""The replay backend: serves only what the store holds, never asks a model.

Requests keep the backend/model they were recorded with (those fields are part
of the key); replay only changes *who answers*: the store. A miss raises
:class:`~fairness_tests.core.errors.MissingResponsesError` naming how many keys are
missing, the first few (with their meta) and the command that records them.

``fingerprint``: the fingerprint of the backend whose recordings are replayed
(what it would add to the requests now); a stored row recorded with another one
raises :class:`~fairness_tests.core.errors.FingerprintMismatchError`. Without it
(``{}``) rows are served unchecked.
"""
from __future__ import annotations

from typing import Any, Callable

from fairness_tests.models.backends.base import Capabilities, unknown_option
from fairness_tests.models.info import BackendInfo
from fairness_tests.models.requests.request import Request, Response
from fairness_tests.models.store.replaying import replay
from fairness_tests.models.store.store import ResponseStore, open_store

_OPTIONS = ("store", "store_path", "parse_choice", "fingerprint")


class ReplayBackend:
    """Answers from the store only (see the module docstring). An unknown option is a
    :class:`ConfigError` naming it."""
    name = "replay"
    #: asks no model: every answer comes from the recordings
    capabilities = Capabilities(n=False, logprobs=False, batch=False, prefix_sharing=False,
                                replay=True)

    def __init__(self, store: ResponseStore | None = None, store_path: str | None = None,
                 parse_choice: Callable[[Request, str], int | None] | None = None,
                 fingerprint: dict[str, str] | None = None, **unknown: Any):
        unknown_option(self.name, unknown, _OPTIONS)
        self._store = store
        self._store_path = store_path
        self.parse_choice = parse_choice
        self._fingerprint = dict(fingerprint or {})

    @property
    def store(self) -> ResponseStore:
        if self._store is None:
            self._store = open_store(self._store_path)
        return self._store

    def answer(self, requests: list[Request],
               on_response: Callable[[Request, Response], None] | None = None) -> list[Response]:
        out = replay(requests, self.store, parse_choice=self.parse_choice,
                     fingerprint=self._fingerprint)
        # nothing new was produced, so nothing is reported through on_response
        return out

    def secrets(self) -> list[str]:
        return []

    def fingerprint(self) -> dict[str, str]:
        """The replayed backend's fingerprint (``{}``: not checked)."""
        return dict(self._fingerprint)

    def info(self) -> BackendInfo:
        return BackendInfo(backend=self.name, store=str(self.store.path))
