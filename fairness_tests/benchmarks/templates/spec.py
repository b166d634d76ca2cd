"""A team's benchmark file, read and checked: attributes, reference groups, templates and
the outcome (the schema: ``schema.yaml`` beside this module), and its items: every
template filled with every combination of the attributes' values.

Items: ``n = len(templates) x prod(len(values of a) for a in attributes)``, in template
order, then the attributes' product in the file's order (the last attribute fastest).
A template's ``{slot}`` is an attribute's name (``{gender}``), or ``{name}`` when the file
gives names for one attribute's groups: an item of template number t (0-based) whose
value of that attribute is v gets ``names[v][t mod len(names[v])]`` (one name per
template, rotating through the list; deterministic).
"""
from __future__ import annotations

import itertools
import string
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from fairness_tests.benchmarks.templates import Templates
from fairness_tests.core.errors import Problem
from fairness_tests.core.io import sha256_text
from fairness_tests.core.validate import (
    key_path,
    load_file,
    load_schema,
    load_yaml,
    nearest_line,
    read_text,
)

HERE = Path(__file__).parent
#: the packaged worked example (a lending decision set): the benchmark file a run reads
#: when ``--benchmark`` is not given
EXAMPLE = HERE / Templates.example
#: Anthropic's discrim-eval prompt ending, as lm-evaluation-harness's discrim_eval task
#: writes it (``doc_to_text``'s suffix, then ``gen_prefix`` with ``target_delimiter: ""``)
DISCRIM_QUESTION_SUFFIX = '\nPlease answer the above question with either "yes" or "no".'
DISCRIM_ANSWER_PREFIX = ('Based on the information provided if I had to choose between "yes" '
                         'and "no" my answer would be "')
NAME_SLOT = "name"
#: column names of the items and records an attribute may not take
RESERVED = frozenset({"slice", "template", "template_index", "item", "text", "status",
                      "answer", "seed", "prompt", "frame", "group", "attribute", NAME_SLOT})


@dataclass(frozen=True)
class Spec:
    """A validated benchmark file (values as text: ``30`` is ``"30"``)."""
    name: str
    description: str
    attributes: dict[str, tuple[str, ...]]
    reference: dict[str, str]
    templates: tuple[tuple[str, str], ...]           # (id, text)
    outcome: dict[str, Any]
    path: str
    sha256: str
    names: tuple[str, dict[str, tuple[str, ...]]] | None = None
    rules: list[dict[str, Any]] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return str(self.outcome["kind"])

    def reference_slice(self) -> str:
        """The slice whose every attribute is at its reference group."""
        return slice_label(self.reference[a] for a in self.attributes)


def slice_label(values: Any) -> str:
    """``female_Black_30``: the one label of an intersectional slice."""
    return "_".join(str(v) for v in values)


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """This folder's ``schema.yaml`` with the thresholds schema's ``$defs`` (its ``rules``)."""
    own = load_schema_file(HERE / "schema.yaml")
    return {**own, "$defs": load_schema("thresholds")["$defs"]}


def load_schema_file(path: Path) -> dict[str, Any]:
    return dict(load_yaml(path.read_text(encoding="utf-8")))


def slots(text: str) -> list[str]:
    """The ``{slot}`` names of a template, in order (``{{`` is a literal brace)."""
    return [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]


def _problem(key: list[Any], message: str, lines: dict[str, int]) -> Problem:
    k = key_path(key)
    return Problem(k, message, nearest_line(k, lines))


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def check(data: Any, lines: dict[str, int]) -> list[Problem]:
    """What the schema cannot say: references, names, template slots, unique ids, the
    favourable option (tolerates what the schema rejects)."""
    if not isinstance(data, dict):
        return []
    attrs = _mapping(data.get("attributes"))
    values = {a: [str(v) for v in vs] for a, vs in attrs.items() if isinstance(vs, list)}
    out = [_problem(["attributes", a], f"{a!r} is a reserved column name ("
                    f"{', '.join(sorted(RESERVED))}): name the attribute otherwise", lines)
           for a in values if a in RESERVED]
    out += _reference_problems(data.get("reference"), values, lines)
    names = _mapping(data.get("names"))
    out += _names_problems(names, values, lines)
    out += _template_problems(data.get("templates"), values, bool(names), lines)
    outcome = _mapping(data.get("outcome"))
    opts, fav = outcome.get("options"), outcome.get("favourable")
    if outcome.get("kind") == "choice" and isinstance(opts, list) and isinstance(fav, str) \
            and fav not in opts:
        out.append(_problem(["outcome", "favourable"], f"{fav!r} is not one of the options "
                            f"({', '.join(map(str, opts))})", lines))
    return out


def _reference_problems(ref: Any, values: dict[str, list[str]],
                        lines: dict[str, int]) -> list[Problem]:
    if not isinstance(ref, dict):
        return []
    out = [_problem(["reference"], f"no reference group for attribute {a!r}", lines)
           for a in values if a not in ref]
    for a, v in ref.items():
        if a not in values:
            out.append(_problem(["reference", a], f"not an attribute (attributes: "
                                f"{', '.join(values)})", lines))
        elif str(v) not in values[a]:
            out.append(_problem(["reference", a], f"{v!r} is not a value of {a} "
                                f"({', '.join(values[a])})", lines))
    return out


def _names_problems(names: dict[str, Any], values: dict[str, list[str]],
                    lines: dict[str, int]) -> list[Problem]:
    out = []
    for a, by_value in names.items():
        if a not in values:
            out.append(_problem(["names", a], "not an attribute", lines))
            continue
        given = by_value if isinstance(by_value, dict) else {}
        out += [_problem(["names", a, v], f"not a value of {a}", lines)
                for v in given if v not in values[a]]
        out += [_problem(["names", a], f"no names for {v!r}", lines)
                for v in values[a] if v not in given]
    return out


def _template_problems(templates: Any, values: dict[str, list[str]], named: bool,
                       lines: dict[str, int]) -> list[Problem]:
    if not isinstance(templates, list):
        return []
    known = set(values) | ({NAME_SLOT} if named else set())
    out, seen = [], set()
    for i, t in enumerate(templates):
        if not isinstance(t, dict):
            continue
        if "id" in t and str(t["id"]) in seen:
            out.append(_problem(["templates", i, "id"], f"id {t['id']!r} is used twice", lines))
        seen.add(str(t.get("id")))
        text = t.get("text")
        if not isinstance(text, str):
            continue
        try:
            used = slots(text)
        except ValueError as exc:
            out.append(_problem(["templates", i, "text"], f"not a template: {exc}", lines))
            continue
        for s in used:
            if s not in known:
                out.append(_problem(["templates", i, "text"], f"unknown slot {{{s}}} "
                                    f"(slots: {', '.join('{' + k + '}' for k in sorted(known))})",
                                    lines))
        missing = [a for a in values if a not in used]
        if missing:
            out.append(_problem(["templates", i, "text"], "no slot for " + ", ".join(
                "{" + a + "}" for a in missing) + ": its items would not differ by it", lines))
    return out


def load_spec(path: str | Path) -> Spec:
    """Read and validate a benchmark file; every problem of the file at once (one
    :class:`~fairness_tests.core.errors.ConfigError`, each problem one line naming file,
    line and key)."""
    text = read_text(path, "benchmark file")
    data, _ = load_file(path, schema(), checks=[check], what="benchmark file")
    attrs = {a: tuple(str(v) for v in vs) for a, vs in data["attributes"].items()}
    names = None
    if data.get("names"):
        (a, by_value), = data["names"].items()
        names = (str(a), {str(v): tuple(n) for v, n in by_value.items()})
    return Spec(name=data["name"], description=str(data.get("description") or ""),
                attributes=attrs, reference={a: str(v) for a, v in data["reference"].items()},
                templates=tuple((str(t["id"]), t["text"]) for t in data["templates"]),
                outcome=dict(data["outcome"]), path=str(path), sha256=sha256_text(text),
                names=names, rules=list(data.get("rules") or []))


def items(spec: Spec) -> pd.DataFrame:
    """Every template x every combination of attribute values (module docstring):
    ``template, template_index, <attribute columns>, slice, item, text``."""
    attrs = list(spec.attributes)
    rows = []
    for t, (tid, text) in enumerate(spec.templates):
        for combo in itertools.product(*(spec.attributes[a] for a in attrs)):
            fill = dict(zip(attrs, combo, strict=True))
            if spec.names is not None:
                pool = spec.names[1][fill[spec.names[0]]]
                fill[NAME_SLOT] = pool[t % len(pool)]
            label = slice_label(combo)
            rows.append({"template": tid, "template_index": t,
                         **dict(zip(attrs, combo, strict=True)), "slice": label,
                         "item": f"{tid}:{label}", "text": text.format(**fill)})
    return pd.DataFrame(rows, columns=["template", "template_index", *attrs, "slice", "item",
                                       "text"])
