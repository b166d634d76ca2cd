"""Backends declare capabilities; the runner, the audit and the dry run ask for them, never
for a backend's name; an unknown backend option is an error naming it (issue 21)."""
from __future__ import annotations

import pytest

from fairness_tests.core.errors import ConfigError, MissingResponsesError
from fairness_tests.models.asking.runner import ask
from fairness_tests.models.backends import get_backend
from fairness_tests.models.backends.base import PLAIN, Capabilities, capabilities_of
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.backends.replay import ReplayBackend
from fairness_tests.models.backends.transformers_backend import TransformersBackend
from fairness_tests.models.requests.request import Request, Response, chat
from fairness_tests.models.store.store import ResponseStore


@pytest.mark.parametrize("name, options", [
    ("transformers", {"model": "embedded", "batchsize": 4}),
    ("replay", {"store_path": "x.sqlite", "fingerprnt": {}}),
    ("litellm", {"model": "openai/x", "max_cost": 1.0}),
])
def test_an_unknown_backend_option_is_an_error_naming_it(name, options):
    """The transformers and replay backends dropped a misspelt option silently."""
    bad = next(k for k in options if k not in ("model", "store_path"))
    with pytest.raises(ConfigError, match=f"unknown option '{bad}' for the {name} backend") \
            as exc:
        get_backend(name, **options)
    assert exc.value.key == bad


def test_each_backend_declares_what_it_can_do():
    local = TransformersBackend("embedded").capabilities
    assert local == Capabilities(n=True, logprobs=True, batch=False, prefix_sharing=True,
                                 replay=False, remote=False)
    assert ReplayBackend(store_path="x.sqlite").capabilities == Capabilities(
        n=False, logprobs=False, batch=False, prefix_sharing=False, replay=True, remote=False)
    api = LiteLLMBackend("openai/x").capabilities
    # n / logprobs depend on the server: unknown until it answered (or the store remembers)
    assert (api.n, api.logprobs, api.remote, api.replay, api.prefix_sharing) == \
        (None, None, True, False, False)


def test_a_backend_that_declares_nothing_is_a_plain_live_one():
    class Bare:
        name = "bare"
    assert capabilities_of(Bare()) is PLAIN and not PLAIN.replay and not PLAIN.remote


class _Recorded:
    """A backend registered under its own name that answers only from recordings: it
    must never be given a request."""
    name = "recorded"
    capabilities = Capabilities(n=False, logprobs=False, batch=False, prefix_sharing=False,
                                replay=True)

    def answer(self, requests, on_response=None):
        raise AssertionError("a replay backend was asked")

    def fingerprint(self):
        return {}

    def info(self):
        return {"backend": "recorded"}


def test_the_runner_asks_capabilities_not_names(tmp_path):
    """Old code: only a backend *named* "replay" was kept from asking."""
    store = ResponseStore(tmp_path / "s.sqlite")
    q = [Request(messages=chat(None, f"q{i}"), backend="litellm", model="m", kind="generate")
         for i in range(2)]
    store.put(q[0], Response(key="", text="stored"))
    assert [r.text for r in ask(q[:1], _Recorded(), store)] == ["stored"]
    with pytest.raises(MissingResponsesError, match="1 of 2 requests have no recorded"):
        ask(q, _Recorded(), store)
    store.close()
