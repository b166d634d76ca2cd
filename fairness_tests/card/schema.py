"""The Fairness Card schema and its validation.

The schema is data (``fairness_tests/data/card_schema/``): ``core.yaml`` and
``llm.yaml`` are the published schemas copied verbatim; ``fairness_tests.yaml``
adds our sections (evaluation protocol, results, verdicts, mitigations,
governance, missing_fields) without making any of them required, so a card that
follows only the published schemas (e.g. the published Qwen card) validates too.

A card is valid when it satisfies core, llm (when ``modality == "text"``) and our
extension. A required key that is absent but *declared* under ``missing_fields``
(a field neither the run nor the user supplied) does not make the card invalid:
it makes it *incomplete*. Every problem names its key path
(``decoding.regimes[0].temperature``) and, for a file, its line.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from fairness_tests.core.errors import ConfigError, Problem
from fairness_tests.core.paths import DATA_DIR
from fairness_tests.core.validate import (
    MISSING_REQUIRED,
    line_index,
    load_yaml,
    parse,
    read_text,
    schema_problems,
)
from fairness_tests.pipeline.benchmark import benchmarks

SCHEMA_DIR = DATA_DIR / "card_schema"
CARD_VERSION = "0.1.0"


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """One schema file of ``data/card_schema`` as a dict (``core``, ``llm``, ``fairness_tests``);
    in ours, what ``evaluation_protocol.protocols_run`` may list is the registry's
    (:func:`protocols_run_enum`), and each benchmark family's record under
    ``evaluation_protocol`` is the schema its benchmark declares (:func:`record_schemas`):
    a key no registered benchmark declares is refused (``additionalProperties: false``)."""
    path = SCHEMA_DIR / f"{name}.yaml"
    schema = load_yaml(path.read_text(encoding="utf-8"))
    if name == "fairness_tests":
        ep = schema["properties"]["evaluation_protocol"]["properties"]
        ep["protocols_run"]["items"]["enum"] = protocols_run_enum()
        for key, (fragment, where) in record_schemas().items():
            if key in ep:
                raise ConfigError(f"evaluation_protocol.{key} is a key of the card schema "
                                  "itself: a benchmark family's run.json key may not be it",
                                  path=where, key="card_schema")
            ep[key] = fragment
    return schema


@lru_cache(maxsize=None)
def record_schemas() -> dict[str, tuple[dict, Path]]:
    """``{run.json key: (the JSON schema of what the card records under
    evaluation_protocol.<key>, its file)}``: each registered benchmark's ``card_schema``
    (a YAML file beside its module) under its family's ``metadata_key``, in registry
    order. Two benchmarks that declare different schemas for one key are an error naming
    both files."""
    out: dict[str, tuple[dict, Path]] = {}
    for b in benchmarks():
        if not b.card_schema:
            continue
        where = Path(str(resources.files(b.__module__).joinpath(b.card_schema)))
        fragment = parse(read_text(where), where)
        if not isinstance(fragment, dict):
            raise ConfigError("a benchmark's card schema must be a mapping (a JSON schema)",
                              path=where)
        key = b.family.metadata_key
        if key in out and out[key][0] != fragment:
            raise ConfigError(f"evaluation_protocol.{key} has two schemas: {out[key][1]} and "
                              "this file (one benchmark of a family declares card_schema)",
                              path=where, key="card_schema")
        out.setdefault(key, (fragment, where))
    return out


def protocols_run_enum() -> list[str]:
    """Every name a card may list as run: each registered benchmark's card lines
    (``Benchmark.shown``), in registry order."""
    return [s.what for b in benchmarks() for s in b.shown]


@lru_cache(maxsize=None)
def user_fields() -> dict:
    """``data/card_schema/user_fields.yaml``: sections and the fields a run cannot know."""
    return load_yaml((SCHEMA_DIR / "user_fields.yaml").read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def metric_definitions() -> dict:
    return load_yaml((SCHEMA_DIR / "metric_definitions.yaml").read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def user_yaml_schema() -> dict:
    """The JSON Schema of a user YAML, built from ``user_fields.yaml``: only the listed
    field paths (values the run measures cannot be set by hand). The values' types
    are checked by the card schema once the card is filled."""
    tree: dict = {}
    for f in user_fields()["fields"]:
        node = tree
        for part in f["path"].split("."):
            node = node.setdefault(part, {})

    def schema(node: dict, where: str | None) -> dict:
        props = {k: (schema(v, k if where is None else f"{where}.{k}") if v else {})
                 for k, v in node.items()}
        out = {"type": "object", "properties": props, "additionalProperties": False}
        if where is None:
            out["x-unknown"] = f"allowed top-level keys: {', '.join(sorted(props))}"
        else:
            out["x-unknown"] = (f"not a user field (allowed under {where!r}: "
                                f"{', '.join(props)}); values the run measures cannot be "
                                "set by hand")
            out["x-message"] = f"must be a mapping with keys {', '.join(props)}"
        return out

    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema(tree, None),
            "x-message": "the user YAML must be a mapping"}


@dataclass
class ValidationReport:
    errors: list[Problem] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)   # declared in missing_fields
    source: str | None = None

    @property
    def valid(self) -> bool:
        return not self.errors

    @property
    def complete(self) -> bool:
        return not self.errors and not self.missing

    def summary(self) -> str:
        name = self.source or "card"
        if self.errors:
            lines = [f"{name}: INVALID ({len(self.errors)} problem(s))"]
            lines += [f"  {p}" for p in self.errors]
        elif self.missing:
            lines = [f"{name}: valid but INCOMPLETE ({len(self.missing)} missing field(s))"]
            lines += [f"  missing: {m}" for m in self.missing]
        else:
            lines = [f"{name}: valid and complete"]
        return "\n".join(lines)


def validate_card(card: Any, source: str | None = None,
                  lines: dict[str, int] | None = None) -> ValidationReport:
    """Validate a card dict with the one validator
    (:func:`fairness_tests.core.validate.schema_problems`), each problem tagged with the
    schema that found it. ``lines`` maps key paths to line numbers (from
    :func:`line_index`) so problems in a file name their line."""
    report = ValidationReport(source=source)
    if not isinstance(card, dict):
        report.errors.append(Problem("(top level)", "a card must be a mapping", None, "core"))
        return report
    declared = [m.get("field", "") for m in card.get("missing_fields") or []
                if isinstance(m, dict)]
    names = ["core"]
    if card.get("modality") == "text":
        names.append("llm")
    names.append("fairness_tests")
    seen: set[tuple[str, str]] = set()
    for name in names:
        for p in schema_problems(card, load_schema(name), lines, tag=name):
            if p.message == MISSING_REQUIRED and _is_declared(p.key, declared):
                continue
            if (p.key, p.message) in seen:
                continue
            seen.add((p.key, p.message))
            report.errors.append(replace(p, message=_short(p.message)))
    report.errors.sort(key=lambda p: (p.line or 0, p.key, p.message))
    # incomplete = every field the card declares missing (a declared field that turns
    # out to be present is still listed: the declaration is what the card says)
    report.missing = sorted(set(declared))
    return report


def _is_declared(path: str, declared: list[str]) -> bool:
    return any(d == path or d.startswith(path + ".") or d.startswith(path + "[")
               for d in declared)


def _short(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def read_yaml(path: str | Path) -> tuple[Any, str]:
    """Parse a YAML file; a syntax error is a ConfigError naming file and line."""
    text = read_text(path)
    return parse(text, path), text


def load_card(path: str | Path) -> dict:
    """Read a card file (YAML or JSON). Not validated: see :func:`validate_file`."""
    card, _ = read_yaml(path)
    if not isinstance(card, dict):
        raise ConfigError("a Fairness Card must be a mapping at top level", path=path)
    return card


def validate_file(path: str | Path) -> ValidationReport:
    card, text = read_yaml(path)
    return validate_card(card, source=str(path), lines=line_index(text))
