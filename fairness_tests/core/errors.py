"""Errors that name the file, line or key at fault."""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One thing wrong in an input: where (key path, line), what, and (where several
    schemas judge one input, as for a Fairness Card) which schema found it."""
    key: str                 # key path, e.g. rules[2].bound; "(top level)" for the root
    message: str
    line: int | None = None
    schema: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}, " if self.line else ""
        found = f" [{self.schema}]" if self.schema else ""
        return f"{where}key {self.key!r}: {self.message}{found}"



class FairnessTestsError(Exception):
    """Base class for every error this package raises on bad input."""

    def in_pytest(self) -> str:
        """The message in the pytest plugin's words (an error that names a command-line
        option names pytest's instead where it has its own wording)."""
        return str(self)


class DataError(FairnessTestsError):
    """Bad, missing or mismatched input data. The message names file and line/key.

    ``problems``: every problem found in the file (:class:`fairness_tests.core.validate.Problem`),
    when a validator reported several at once; ``line``/``key`` are the first one's."""

    problems: tuple = ()

    def __init__(self, message: str, path: object = None, line: int | None = None,
                 key: str | None = None):
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if key is not None:
            where.append(f"key {key!r}")
        self.path, self.line, self.key = path, line, key
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(f"{prefix}{message}")


class ConfigError(DataError):
    """A bad threshold, protocol, rubric or card file."""


class MissingResponsesError(FairnessTestsError):
    """Replay mode asked for responses that were never recorded."""
    missing_count: int
    missing_keys: list[str]
    missing_requests: list[Any]             # the Requests not found (models layer)


class FingerprintMismatchError(MissingResponsesError):
    """Stored responses were answered by a backend with another fingerprint (prompt
    format, chat template, weights) than the one asking now: they are stale."""
    recorded: dict[str, str]
    asked: dict[str, str]


def suggest(word: Any, options: Iterable[Any]) -> str:
    """`` (did you mean 'x'?)`` for the option closest to ``word``, or ``""``."""
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
