"""Backend fingerprints: what a backend adds to a request before the model sees it.

A request's key covers what the protocol asks (:mod:`.request`). How a backend
turns that into the model's input, and which weights answer, are the backend's
:meth:`~fairness_tests.models.backends.base.Backend.fingerprint`: a flat
``dict[str, str]`` (backend name, prompt format and turn format, answer prefix,
chat template sha256, weights sha256, provider-seed scheme; each backend's
docstring lists its entries).

The store keeps the fingerprint beside every row (``fingerprints`` table,
referenced by :func:`fingerprint_id`); the runner compares the stored fingerprint
of every served row with the asking backend's (in replay: the backend whose
recordings are replayed) and raises :class:`FingerprintMismatchError` naming the
entries that differ and how to re-record. Beside the key rather than in it: a
change is reported by name instead of turning into anonymous misses, and one
store keeps one answer per request.
"""
from __future__ import annotations

from typing import Any, Mapping

from fairness_tests.core.errors import FingerprintMismatchError
from fairness_tests.core.io import sha256_text
from fairness_tests.models.requests.request import canonical_json

#: entries a backend's fingerprint gained after rows were recorded without them: such a
#: row is unknown on that entry (recorded before it was kept), so it is compared on the
#: other entries only, as a row without any fingerprint is served unchecked
ADDED_LATER: dict[str, tuple[str, ...]] = {"transformers": ("dtype",)}


def same_answerer(recorded: Mapping[str, str], asked: Mapping[str, str]) -> bool:
    """Whether a row recorded with ``recorded`` is what ``asked`` would answer: equal,
    or equal once the entries of :data:`ADDED_LATER` that ``recorded`` lacks are left
    out of ``asked``."""
    later = [k for k in ADDED_LATER.get(str(asked.get("backend")), ()) if k not in recorded]
    return dict(recorded) == {k: v for k, v in asked.items() if k not in later}


def fingerprint_id(fp: Mapping[str, str]) -> str:
    """16 hex digits of sha256 of the canonical JSON of ``fp``."""
    return sha256_text(canonical_json(dict(fp)))[:16]




def mismatch_error(recorded: Mapping[str, Any], asked: Mapping[str, Any], n: int,
                   total: int, backend: str, model: str, store: Any) -> FingerprintMismatchError:
    """The error for ``n`` of ``total`` stored responses recorded with ``recorded``
    and asked for with ``asked``."""
    lines = [f"{n} of {total} stored responses for {backend}:{model} in {store} were "
             f"recorded with another backend fingerprint than the one asking now:"]
    for name in sorted(set(recorded) | set(asked)):
        a, b = recorded.get(name, "(none)"), asked.get(name, "(none)")
        if a != b:
            lines.append(f"  recorded with {name} {a!r}, asked with {b!r}")
    lines.append(f"They answer another prompt or model than this code would ask. Re-record "
                 f"them: `fairness-tests audit --live --model {model or '<model>'} --store "
                 f"NEW.sqlite --recordings` (a fresh store, nothing imported), or delete them "
                 f"first with `fairness-tests store prune --model {model or '<model>'} "
                 f"--store {store}`.")
    exc = FingerprintMismatchError("\n".join(lines))
    exc.recorded, exc.asked = dict(recorded), dict(asked)
    exc.missing_count = n
    return exc
