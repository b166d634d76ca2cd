"""The user YAML of a card: the fields a run cannot know (intended use, harm model,
mitigations, governance, ...), listed in ``data/card_schema/user_fields.yaml``.

Only those fields are allowed: anything else is a typo or an attempt to overwrite a
measured value. Dates become ISO strings. Errors name the file, line and key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from fairness_tests.card.schema import read_yaml, user_yaml_schema
from fairness_tests.card.values import clean
from fairness_tests.core.errors import ConfigError, FairnessTestsError
from fairness_tests.core.validate import check_data, line_index


def load_user_yaml(path: str | Path) -> dict:
    """Read and check a user YAML (see the module docstring)."""
    data, text = read_yaml(path)
    if data is None:
        return {}
    check_user_keys(data, source=str(path), lines=line_index(text))
    return clean(data)


def check_user_keys(user: Any, source: str | None = None,
                    lines: dict[str, int] | None = None) -> None:
    """Only the fields of ``user_fields.yaml``; every problem at once
    (:mod:`fairness_tests.core.validate`)."""
    check_data(user, user_yaml_schema(), source=source, lines=lines)


def user_yaml_problem(path: str | Path | None) -> str | None:
    """What is wrong with the user YAML at ``path`` (every problem, on one line), or
    None when it loads: a command checks its ``--user-yaml`` with this before any work,
    so a typo is not found only after a whole audit has run."""
    if not path:
        return None
    try:
        load_user_yaml(path)
    except FairnessTestsError as exc:
        return "; ".join(x.strip() for x in str(exc).splitlines())
    return None


def check_user_yaml(path: str | Path | None) -> None:
    """A :class:`ConfigError` naming ``--user-yaml`` and every problem of the file
    (:func:`user_yaml_problem`); the audit and ``card`` call it before any work."""
    problem = user_yaml_problem(path)
    if problem:
        raise ConfigError(f"--user-yaml: {problem}")
