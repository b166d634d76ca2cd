"""The user YAML of a card: the fields a run cannot know (intended use, harm model,
mitigations, governance, ...), listed in ``data/card_schema/user_fields.yaml``.

Only those fields are allowed: anything else is a typo or an attempt to overwrite a
measured value. Dates become ISO strings. Errors name the file, line and key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..validate import line_index
from .schema import read_yaml
from .values import clean


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
    (:mod:`fairness_tests.validate`)."""
    from ..validate import check_data
    from .schema import user_yaml_schema
    check_data(user, user_yaml_schema(), source=source, lines=lines)
