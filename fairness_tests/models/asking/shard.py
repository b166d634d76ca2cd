"""Deterministic sharding of requests by key: ``--shard i/N``.

Request ``q`` belongs to shard ``i`` of ``N`` (1-based) when
``int(q.key()[:16], 16) mod N == i - 1``: the first 64 bits of its sha256 key, so
every machine computes the same split without talking to the others, the shards
are disjoint and together hold every request, and each gets about 1/N of them
whatever the order or protocol. Each machine records its shard into its own
store; ``fairness-tests store merge`` combines the stores.
"""
from __future__ import annotations

import re

from fairness_tests.core.errors import ConfigError


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/3"`` -> ``(2, 3)``; a :class:`ConfigError` unless ``1 <= i <= N``."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text or ""))
    if not m or not (1 <= int(m.group(1)) <= int(m.group(2))):
        raise ConfigError(f"bad shard {text!r}: give i/N with 1 <= i <= N, e.g. 2/3",
                          key="--shard")
    return int(m.group(1)), int(m.group(2))


def in_shard(key: str, index: int, count: int) -> bool:
    """Whether the request with this key belongs to shard ``index`` of ``count``."""
    return int(key[:16], 16) % count == index - 1
