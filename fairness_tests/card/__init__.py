"""Fairness Card: filled from a run, validated, rendered to Markdown and HTML, diffed.

- :func:`write_cards` (``files.py``): RunResult + user YAML -> card.yaml, card.md, card.html
- :func:`fill_card` (``fill.py``, one module per section in ``sections/``): RunResult + user
  dict -> card dict; :func:`load_user_yaml` (``user_yaml.py``)
- :func:`validate_card`, :func:`validate_file` (``schema.py``)
- :func:`render_markdown` (``render_md.py``), :func:`render_html` (``render_html.py``)
- :func:`diff_cards` (``diff.py``)

Imports are lazy so ``import fairness_tests.card`` stays cheap.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "write_cards": "files", "render_card_files": "files", "WrittenCard": "files",
    "fill_card": "fill", "load_user_yaml": "user_yaml",
    "validate_card": "schema", "validate_file": "schema", "load_card": "schema",
    "render_markdown": "render_md", "render_html": "render_html",
    "diff_cards": "diff", "render_diff_markdown": "diff", "render_diff_terminal": "diff",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(name)
