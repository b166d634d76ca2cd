"""The user YAML of a card: the fields a run cannot know (intended use, harm model,
mitigations, governance, ...), listed in ``data/card_schema/user_fields.yaml``.

Only those fields are allowed: anything else is a typo or an attempt to overwrite a
measured value. Dates become ISO strings. Errors name the file, line and key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .schema import line_index, read_yaml, user_fields
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
    lines = lines or {}
    if not isinstance(user, dict):
        raise ConfigError("the user YAML must be a mapping", path=source)
    allowed = [f["path"] for f in user_fields()["fields"]]
    for key, value in user.items():
        key = str(key)
        if key in allowed:
            continue
        children = [p[len(key) + 1:] for p in allowed if p.startswith(key + ".")]
        if not children:
            raise ConfigError(
                f"unknown key (allowed top-level keys: "
                f"{', '.join(sorted({p.split('.')[0] for p in allowed}))})",
                path=source, line=lines.get(key), key=key)
        if not isinstance(value, dict):
            raise ConfigError(f"must be a mapping with keys {', '.join(children)}",
                              path=source, line=lines.get(key), key=key)
        for sub in value:
            if str(sub) not in children:
                raise ConfigError(
                    f"not a user field (allowed under {key!r}: {', '.join(children)}); "
                    "values the run measures cannot be set by hand",
                    path=source, line=lines.get(f"{key}.{sub}"), key=f"{key}.{sub}")
