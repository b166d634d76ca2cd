"""The HTTP clients of the litellm backend, one per event loop, closed when it returns.

``text-completion-openai/`` requests go through an ``AsyncOpenAI`` client this backend
owns, one per event loop, server and key (:meth:`TextClients.get`), closed when
:meth:`~.litellm_backend.LiteLLMBackend.answer` returns (:meth:`TextClients.close`):
litellm 1.110 builds a new, never-closed aiohttp session for each such request otherwise
(the ``Unclosed client session`` warnings); litellm's cached clients of the loop are
closed too.
"""
from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from fairness_tests.core.io import sha256_text


class TextClients:
    """``AsyncOpenAI`` clients keyed by (event loop, server, sha256 of the key)."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self._clients: dict[tuple[int, str | None, str], Any] = {}
        self._lock = threading.Lock()

    def get(self, model: str, base: str | None, kw: dict[str, Any]) -> Any:
        """This loop's client for ``text-completion-openai/`` at ``base`` (closed by
        :meth:`close`); None for other providers (litellm's own)."""
        if not model.startswith("text-completion-openai/"):
            return None
        key = kw.get("api_key") or os.environ.get("OPENAI_API_KEY") or "not-needed"
        slot = (id(asyncio.get_running_loop()), base, sha256_text(key))
        with self._lock:
            client = self._clients.get(slot)
            if client is None:
                from openai import AsyncOpenAI  # noqa: PLC0415  optional: the [serving] extra
                client = AsyncOpenAI(api_key=key, base_url=base, timeout=self.timeout_s,
                                     max_retries=0)
                self._clients[slot] = client
        return client

    async def close(self, litellm: Any) -> None:
        """Close the HTTP clients of this event loop: ours (text completions) and the
        ones litellm cached for it (its cache key ends with the loop's token)."""
        loop = id(asyncio.get_running_loop())
        with self._lock:
            clients = [self._clients.pop(k) for k in list(self._clients) if k[0] == loop]
        for client in clients:
            await _quietly(client.close)
        try:
            from litellm.caching.evicted_client_closer import (  # noqa: PLC0415  optional
                running_loop_token,
            )
            token = running_loop_token()
            cache = litellm.in_memory_llm_clients_cache
            mine = [k for k in list(getattr(cache, "cache_dict", {}))
                    if token is not None and str(k).endswith(f"-{token}")]
        except Exception:
            return
        for key in mine:
            client = cache.cache_dict.pop(key, None)
            getattr(cache, "ttl_dict", {}).pop(key, None)
            close = getattr(client, "close", None) or getattr(client, "aclose", None)
            if close is not None:
                await _quietly(close)


async def _quietly(close: Any) -> None:
    """Call ``close`` (awaiting what it returns); a failure to close is ignored."""
    try:
        result = close()
        if asyncio.iscoroutine(result):
            await result
    except Exception:
        pass
