"""Secrets never reach a stored row, a recording, a fingerprint or a log line.

:func:`scrub` removes ``api_key`` / ``authorization`` / ``headers`` (and the like)
entries from any JSON-like value and masks, in every string, ``sk-...`` tokens,
``Bearer ...`` credentials, URL credentials (``user:pass@host``), the secrets a backend
names and the values of ``*_API_KEY`` / ``*_TOKEN`` / ``*_SECRET`` / ``*PASSWORD``
environment variables. :class:`StoredTextScrubber` does the same for the text and JSON
the store writes, with a fast path for text that holds nothing secret-looking.
"""
from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any, overload

from fairness_tests.core.io import canonical_dumps

_SECRET_KEY_RE = re.compile(r"^(api[_-]?key|x[_-]api[_-]key|authorization|proxy[_-]authorization|"
                            r"headers|extra[_-]headers|access[_-]token|secret|password|cookie)$",
                            re.IGNORECASE)
_SECRET_PATTERNS = [
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), "sk-***"),
    (re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._~+/=\-]+"), "Bearer ***"),
    (re.compile(r"(?i)\b(api[_-]?key|x-api-key|authorization|access_token|token)"
                r"(\"?\s*[:=]\s*\"?)([^\s\"',&}]+)"), r"\1\2***"),
    (re.compile(r"(?i)(https?://)[^/\s:@]+:[^/\s@]+@"), r"\1***@"),   # user:pass@host
]
_SECRET_ENV_RE = re.compile(r"(API_KEY|_TOKEN|_SECRET|PASSWORD)$", re.IGNORECASE)


def _env_secrets() -> list[str]:
    return [v for k, v in os.environ.items() if _SECRET_ENV_RE.search(k) and len(v) >= 8]


def _secret_values(secrets: Iterable[str]) -> list[str]:
    """The given secrets plus the values of secret-looking environment variables
    (read once per scrub call, not once per string)."""
    return [v for v in (*secrets, *_env_secrets()) if v and len(v) >= 4]


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with known secret values and secret-looking tokens masked."""
    return _scrub_text(text, _secret_values(secrets))


def _scrub_text(text: str, values: list[str]) -> str:
    if not text:
        return text
    for v in values:
        text = text.replace(v, "***")
    for pattern, repl in _SECRET_PATTERNS:
        text = pattern.sub(repl, text)
    return text


def scrub(obj: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like value without secret entries and with strings scrubbed."""
    return _scrub(obj, _secret_values(secrets))


def _scrub(obj: Any, values: list[str]) -> Any:
    if isinstance(obj, dict):
        return {k: _scrub(v, values) for k, v in obj.items()
                if not (isinstance(k, str) and _SECRET_KEY_RE.match(k))}
    if isinstance(obj, (list, tuple)):
        return [_scrub(v, values) for v in obj]
    if isinstance(obj, str):
        return _scrub_text(obj, values)
    return obj


# anything :func:`scrub` could change contains one of these (lower-cased), or a JSON escape
_NEEDLES = ("sk-", "bearer", "api_key", "api-key", "apikey", "authoriz", "access_token",
            "access-token", "headers", "secret", "password", "cookie", "\\u")
_URL_CREDENTIALS = re.compile(r"://[^/\s]*@")


def _token_word(low: str) -> bool:
    """``token`` at the start of a word (``\btoken``, as the secret patterns match it;
    ``max_tokens`` does not count)."""
    i = low.find("token")
    while i != -1:
        if i == 0 or not (low[i - 1].isalnum() or low[i - 1] == "_"):
            return True
        i = low.find("token", i + 5)
    return False


def _maybe_secret(text: str) -> bool:
    low = text.lower()
    return (any(map(low.__contains__, _NEEDLES)) or _token_word(low)
            or ("@" in low and _URL_CREDENTIALS.search(low) is not None))


class StoredTextScrubber:
    """:func:`scrub_text` and :func:`scrub` for stored text and stored JSON, with a fast
    path: text that contains no secret-looking substring and no known secret value is
    returned as it is (for bulk copies such as ``store merge``)."""

    def __init__(self, secrets: Iterable[str] = ()):
        self.values = _secret_values(secrets)
        self._known = (re.compile("|".join(re.escape(v) for v in self.values))
                       if self.values else None)

    def _maybe(self, text: str) -> bool:
        return _maybe_secret(text) or bool(self._known and self._known.search(text))

    def text(self, text: str | None) -> str | None:
        if not text or not self._maybe(text):
            return text
        return _scrub_text(text, self.values)

    @overload
    def json_text(self, text: str) -> str: ...
    @overload
    def json_text(self, text: None) -> None: ...

    def json_text(self, text: str | None) -> str | None:
        if not text or not self._maybe(text):
            return text
        return canonical_dumps(_scrub(json.loads(text), self.values))


def shown_url(url: str) -> str:
    """``url`` without user name, password, query or fragment (a mirror's token)."""
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{u.port}" if u.port else host
    return urllib.parse.urlunsplit((u.scheme, netloc, u.path, "", ""))
