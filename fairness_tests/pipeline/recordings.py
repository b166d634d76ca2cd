"""Recording manifests: which files hold a model's recorded responses, and the audit
settings they were recorded with.

A manifest (``recordings/manifest.yaml``: the package's for the embedded model, a
project's ``fixtures/recordings/manifest.yaml`` for its own models) lists, per model,
the JSONL(.gz) exports of the response store that replay imports (``files``, beside
the manifest; only these are imported, and only for that model) and ``settings``:
the audit options (:class:`~fairness_tests.pipeline.config.AuditConfig` fields) the
recording was made with, so replay asks exactly what was recorded: they are the lowest
layer of the model's configuration, below every option a user gives. The first manifest
with an entry for a model wins (the project's before the package's). Validated by
:mod:`fairness_tests.core.validate` (schema ``data/schemas/manifest.yaml``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from fairness_tests.core.errors import Problem
from fairness_tests.core.options import Layer, OptionErrors, Spelling, build
from fairness_tests.core.paths import data_path
from fairness_tests.core.project import find_project
from fairness_tests.core.registry import load_all
from fairness_tests.core.validate import load_file, nearest_line
from fairness_tests.pipeline.config import AuditConfig

#: the package's manifest (the embedded model's recordings)
MANIFEST = data_path("recordings", "manifest.yaml")


@dataclass(frozen=True)
class Recording:
    """One manifest entry."""
    model: str
    files: tuple[Path, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    manifest: Path | None = None


def settings_key(i: int) -> str:
    return f"recordings[{i}].settings"


def _under(key: str) -> Spelling:
    """An option's name as a key under ``key``: ``key.name``."""
    return lambda n: f"{key}.{n}"


def _check(data: Any, lines: dict[str, int], base: Path) -> list[Problem]:
    """Files that exist beside the manifest; settings that are valid audit options
    (checked by the configuration spec, every problem at once)."""
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
        if not isinstance(settings, dict):
            continue
        try:
            build(AuditConfig, [Layer(settings, _under(settings_key(i)))])
        except OptionErrors as exc:
            for name, message in exc.problems_by_field:
                k = exc.spell(name)
                out.append(Problem(k, message, nearest_line(k, lines)))
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


def recording_settings(model: str, manifest: str | Path | None = None) -> dict[str, Any]:
    """The audit settings a model's recordings were made with (its entry in the
    project's or the package's manifest), so replay asks exactly what was recorded.
    Explicit options override them. Empty when the model has no entry."""
    rec = recording_for(model, [Path(manifest)] if manifest else None)
    return dict(rec.settings) if rec else {}


def benchmark_recordings(model: str, names: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The recordings the registered benchmarks ``names`` ship for ``model`` in their own
    folders (``Benchmark.recordings``: ``{model: file beside its module}``), in registry
    order."""
    out = []
    for cls in load_all():
        if cls.name not in names:
            continue
        name = getattr(cls, "recordings", {}).get(model)
        if name:
            out.append(str(resources.files(cls.__module__).joinpath(name)))
    return tuple(dict.fromkeys(out))


def default_recordings(model: str, names: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The files the manifest lists for ``model`` (none when it has no entry), then the
    own recordings of it of the benchmarks ``names`` a run asks
    (:func:`benchmark_recordings`)."""
    rec = recording_for(model)
    listed = tuple(str(f) for f in rec.files) if rec else ()
    return listed + benchmark_recordings(model, names)
