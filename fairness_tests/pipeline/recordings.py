"""Recording manifests: which files hold a model's recorded responses, and the audit
settings they were recorded with.

A manifest (``recordings/manifest.yaml``: the package's for the embedded model, a
project's ``fixtures/recordings/manifest.yaml`` for its own models) lists, per model,
the JSONL(.gz) exports of the response store that replay imports (``files``, beside
the manifest; only these are imported, and only for that model) and ``settings``:
the :class:`~fairness_tests.pipeline.audit.AuditConfig` fields the recording was made with, so
replay asks exactly what was recorded. The first manifest with an entry for a model
wins (the project's before the package's). Validated by :mod:`fairness_tests.core.validate`
(schema ``data/schemas/manifest.yaml``).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairness_tests.core.project import find_project
from fairness_tests.core.validate import Problem, load_file, nearest_line


@dataclass(frozen=True)
class Recording:
    """One manifest entry."""
    model: str
    files: tuple[Path, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    manifest: Path | None = None


def _check(data: Any, lines: dict[str, int], base: Path) -> list[Problem]:
    from dataclasses import fields as dc_fields

    from fairness_tests.pipeline.audit import AuditConfig  # noqa: PLC0415  (step 2 removes the cycle)
    known = [f.name for f in dc_fields(AuditConfig)]
    out = []
    entries = data.get("recordings") if isinstance(data, dict) else None
    for i, e in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(e, dict):
            continue
        for j, name in enumerate(e.get("files") or []):
            if isinstance(name, str) and not (base / name).is_file():
                k = f"recordings[{i}].files[{j}]"
                out.append(Problem(k, f"no file {name!r} beside the manifest",
                                   nearest_line(k, lines)))
        settings = e.get("settings")
        for s in settings if isinstance(settings, dict) else ():
            if s not in known:
                k = f"recordings[{i}].settings.{s}"
                close = difflib.get_close_matches(str(s), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                out.append(Problem(k, f"unknown audit setting {s!r}{hint}",
                                   nearest_line(k, lines)))
    return out


def load_manifest(path: str | Path) -> list[Recording]:
    """Every entry of a manifest, validated (all problems of the file at once)."""
    path = Path(path)
    data, _ = load_file(path, "manifest",
                        checks=[lambda d, lines: _check(d, lines, path.parent)],
                        what="recordings manifest")
    out = []
    for e in data["recordings"]:
        settings = {k: tuple(v) if isinstance(v, list) else v
                    for k, v in (e.get("settings") or {}).items()}
        out.append(Recording(e["model"], tuple(path.parent / f for f in e["files"]),
                             settings, path))
    return out


def recording_for(model: str, manifests: list[Path] | None = None) -> Recording | None:
    """The entry for ``model`` in the first manifest that has one (default: the
    project's manifest, then the package's; see :mod:`fairness_tests.core.project`)."""
    if manifests is None:
        manifests = find_project().manifests()
    for m in manifests:
        if not m.is_file():
            continue
        for rec in load_manifest(m):
            if rec.model == model:
                return rec
    return None
