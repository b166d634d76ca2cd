"""What a failed litellm call means: retried, final, refused, or a feature the server
does not support.

Retried (:class:`Retryable`): 429, 5xx, timeouts, connection errors (litellm reports a
refused connection as a 500: :func:`no_answer` recognises it), malformed replies. Not
retried (:class:`Permanent`): other 4xx. A content-policy error is a refusal
(:class:`Refused`). An error (any status but 408/429) that names a parameter the request
sent as not supported (``logprobs``, ``n``, ``response_format``;
:mod:`~fairness_tests.models.store.capabilities`) is :class:`Unsupported`, and one naming a
``top_logprobs`` limit :class:`LimitExceeded` (asked again at once within the limit).
A ``Retry-After`` (or ``retry-after-ms``) header gives the wait (:func:`retry_after`).
"""
from __future__ import annotations

import re
import time
from email.utils import parsedate_to_datetime
from typing import Any, NoReturn

from fairness_tests.models.store.capabilities import limit_in, named_feature, says_unsupported
from fairness_tests.models.store.scrub import scrub_text

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}


class Permanent(Exception):
    """A failure not worth retrying."""


class Unsupported(Exception):
    """The reply does not honour a feature the request used (``feature``: a repeat mode,
    or ``structured_output``)."""

    def __init__(self, message: str, feature: str | None = None):
        super().__init__(message)
        self.feature = feature


class LimitExceeded(Exception):
    """The server named a lower ``top_logprobs`` limit than was asked."""

    def __init__(self, message: str, limit: int):
        super().__init__(message)
        self.limit = limit


class Retryable(Exception):
    """A failure worth asking again (after ``retry_after`` seconds when the server said)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class Refused(Permanent):
    """The provider refused to answer (a content-policy error): ``status="refused"``."""


def classify(litellm: Any, exc: Exception, sent: set[str], secrets: list[str]) -> NoReturn:
    """Raise what a failed call means (its text scrubbed of ``secrets``):
    :class:`Refused` (a content-policy refusal), :class:`LimitExceeded` /
    :class:`Unsupported` (a feature in ``sent`` named as not supported), :class:`Retryable`
    (408, 429, 5xx, timeouts, connection errors, a malformed reply) or :class:`Permanent`
    (any other 4xx)."""
    status = getattr(exc, "status_code", None)
    if no_answer(exc):            # litellm reports a refused connection as a 500
        head, status = "no answer from the server: ", None
    else:
        head = f"HTTP {status}: " if isinstance(status, int) else ""
    msg = scrub_text(f"{head}{type(exc).__name__}: {exc}", secrets)
    if isinstance(exc, getattr(litellm, "ContentPolicyViolationError", ())):
        raise Refused(msg)
    wait = retry_after(exc)
    timeout_types = tuple(t for t in (getattr(litellm, "Timeout", None),
                                      getattr(litellm, "APIConnectionError", None)) if t)
    transient = (isinstance(exc, timeout_types) or head.startswith("no answer")
                 or status in (408, 429))
    feature = None if transient else named_feature(msg, set(sent))
    if feature is not None and says_unsupported(msg):
        if feature == "top_logprobs":
            raise LimitExceeded(f"the server answered {msg}", limit_in(msg) or 0)
        raise Unsupported(f"the server answered {msg}", feature)
    if transient or status in RETRY_STATUS:
        raise Retryable(msg, wait)
    if isinstance(exc, (ValueError, KeyError, TypeError)) and status is None:
        raise Retryable(msg)                   # a malformed reply
    if isinstance(status, int) and 400 <= status < 500:
        raise Permanent(msg)
    raise Retryable(msg, wait)


_NO_ANSWER_TEXT = re.compile(r"OpenAIException - (?:Connection error|Request timed out)|"
                             r"Cannot connect to host|Connection refused|Server disconnected")


def no_answer(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is a connection that failed
    or timed out: no HTTP answer at all, whatever status litellm gives it (litellm 1.110
    reports openai's ``APIConnectionError`` as an ``InternalServerError`` with status
    500, its cause sometimes lost: its text "Connection error." is then the sign)."""
    if _NO_ANSWER_TEXT.search(str(exc)):
        return True
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 10:
        name = type(cur).__name__
        if name in ("APIConnectionError", "APITimeoutError", "ConnectError", "ConnectTimeout",
                    "ReadTimeout", "RemoteProtocolError", "ClientConnectorError",
                    "ServerDisconnectedError") or isinstance(cur, ConnectionError):
            return True
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return False


def retry_after(exc: Exception) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header on a failed call."""
    headers = None
    for attr in ("litellm_response_headers", "headers"):
        headers = getattr(exc, attr, None)
        if headers:
            break
    if not headers:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        get = headers.get
        ms = get("retry-after-ms") or get("Retry-After-Ms")
        if ms:
            return float(ms) / 1000.0
        val = get("retry-after") or get("Retry-After")
        if val is None:
            return None
        try:
            return float(val)
        except ValueError:
            return max(0.0, parsedate_to_datetime(val).timestamp() - time.time())
    except Exception:
        return None
