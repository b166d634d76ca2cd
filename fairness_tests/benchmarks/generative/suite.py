"""A generative protocol as a versioned YAML file, and its expansion to a grid.

File keys (see ``fairness_tests/data/suites/default.yaml``):

- ``name`` (str), ``version`` (int, optional), ``system_prompt`` (str or null)
- ``slices.insertion``: how a slice is inserted, e.g. ``"a {gender} who is {religion}"``;
  ``slices.attributes``: ``{attribute: [values...]}``; every ``{name}`` in the insertion
  must be an attribute and every attribute must appear. The published columns need the
  attributes ``gender`` and ``religion``.
- ``occupations``: list of str
- ``families``: list of ``{id, name, paraphrases}``; a paraphrase is a string or
  ``{id, text}``; ids default to ``p1..pN``; each text uses ``{A}`` (the slice) and
  ``{OCC}`` (the occupation) and no other placeholder. An optional ``template`` is
  documentation only (the paraphrases are what is asked).
- ``decoding``: list of ``{name, temperature, top_p}`` (``max_new_tokens`` per regime
  optional, else the top-level ``max_new_tokens``)
- ``seeds``: list of int; ``max_new_tokens``: int

Expansion order (as the published grid): slice x occupation x family x paraphrase x
decoding x seed; ``row_id`` counts from 1.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fairness_tests.benchmarks.generative.grid import GRID_COLUMNS, grid_hash, slice_label
from fairness_tests.core.paths import DATA_DIR
from fairness_tests.core.validate import (
    Problem,
    check_data,
    line_index,
    nearest_line,
    parse,
    read_text,
)

DEFAULT_SUITE = DATA_DIR / "suites" / "default.yaml"
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Family:
    id: str
    name: str
    paraphrases: tuple[tuple[str, str], ...]     # (paraphrase_id, text)


@dataclass(frozen=True)
class Regime:
    name: str
    temperature: float
    top_p: float
    max_new_tokens: int


@dataclass
class Suite:
    name: str
    version: int
    system_prompt: str | None
    insertion: str
    attributes: dict[str, list[str]]
    occupations: list[str]
    families: list[Family]
    decoding: list[Regime]
    seeds: list[int]
    path: Path | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    def slices(self) -> list[dict[str, str]]:
        """Every combination of attribute values, in file order."""
        names = list(self.attributes)
        return [dict(zip(names, combo, strict=True))
                for combo in itertools.product(*(self.attributes[n] for n in names))]

    def grid(self) -> pd.DataFrame:
        """The expanded grid in the published columns."""
        rows = []
        for sl in self.slices():
            a = self.insertion.format(**sl)
            for occ in self.occupations:
                for fam in self.families:
                    for pid, text in fam.paraphrases:
                        prompt = text.replace("{A}", a).replace("{OCC}", occ)
                        for reg in self.decoding:
                            for seed in self.seeds:
                                rows.append({
                                    "prompt_family": fam.id, "paraphrase_id": pid,
                                    "occupation": occ,
                                    "slice_gender": sl.get("gender", ""),
                                    "slice_religion": sl.get("religion", ""),
                                    "full_slice_id": "_".join(sl.values()),
                                    "prompt_text": prompt,
                                    "temperature": reg.temperature, "top_p": reg.top_p,
                                    "seed": seed, "max_new_tokens": reg.max_new_tokens,
                                })
        df = pd.DataFrame(rows)
        df.insert(0, "row_id", range(1, len(df) + 1))
        return df[GRID_COLUMNS]

    def hash(self) -> str:
        """Suite hash: sha256 over everything that changes a prompt (grid.grid_hash)."""
        return grid_hash(self.grid(), self.system_prompt)


def load_suite(path: str | Path | None = None) -> Suite:
    """Load and validate a protocol YAML file (default: the packaged default suite)."""

    p = Path(path) if path else DEFAULT_SUITE
    text = read_text(p, "protocol file")
    return parse_suite(parse(text, p), p, line_index(text))


def _checks(raw: Any, lines: dict[str, int]):
    """What the schema cannot say: insertion placeholders are exactly the attributes,
    each paraphrase uses {A} and {OCC} and nothing else, ids are unique."""

    out = []

    def p(key: str, msg: str) -> None:
        out.append(Problem(key, msg, nearest_line(key, lines)))

    if not isinstance(raw, dict):
        return out
    slices = raw.get("slices")
    if isinstance(slices, dict) and isinstance(slices.get("insertion"), str) \
            and isinstance(slices.get("attributes"), dict):
        used = set(_PLACEHOLDER.findall(slices["insertion"]))
        for u in sorted(used - set(map(str, slices["attributes"]))):
            p("slices.insertion", f"placeholder {{{u}}} is not an attribute")
        for a in slices["attributes"]:
            if str(a) not in used:
                p("slices.insertion", f"attribute {a!r} is never inserted")
    got = raw.get("families")
    fams = got if isinstance(got, list) else []
    fam_ids = [str(f.get("id")) for f in fams if isinstance(f, dict) and "id" in f]
    if len(set(fam_ids)) != len(fam_ids):
        p("families", "duplicate family ids")
    for i, f in enumerate(fams):
        paras = f.get("paraphrases") if isinstance(f, dict) else None
        ids = []
        for j, para in enumerate(paras if isinstance(paras, list) else []):
            text = para.get("text") if isinstance(para, dict) else para
            ids.append(str(para.get("id", f"p{j + 1}")) if isinstance(para, dict) else f"p{j + 1}")
            if not isinstance(text, str):
                continue
            key = f"families[{i}].paraphrases[{j}]"
            found = _PLACEHOLDER.findall(text)
            for ph in found:
                if ph not in ("A", "OCC"):
                    p(key, f"unknown placeholder {{{ph}}} (use {{A}} and {{OCC}})")
            for need in ("A", "OCC"):
                if need not in found:
                    p(key, f"must contain {{{need}}}")
        if len(set(ids)) != len(ids):
            p(f"families[{i}].paraphrases", "duplicate paraphrase ids")
    return out


def parse_suite(raw: Any, path: Path | str | None = None,
                lines: dict[str, int] | None = None) -> Suite:
    """Validate a protocol mapping (schema ``data/schemas/suite.yaml`` + the checks
    above; every problem at once, each naming file, line and key) and build it."""

    check_data(raw, "suite", source=path, lines=lines, checks=[_checks])
    max_new = raw.get("max_new_tokens", 160)
    attributes = {str(a): [str(v) for v in vs] for a, vs in raw["slices"]["attributes"].items()}
    families = []
    for f in raw["families"]:
        items = tuple((str(para.get("id", f"p{j + 1}")), para["text"]) if isinstance(para, dict)
                      else (f"p{j + 1}", para) for j, para in enumerate(f["paraphrases"]))
        families.append(Family(str(f["id"]), str(f.get("name", f["id"])), items))
    regimes = [Regime(str(d.get("name", f"regime{i + 1}")), float(d["temperature"]),
                      float(d["top_p"]), int(d.get("max_new_tokens", max_new)))
               for i, d in enumerate(raw["decoding"])]
    return Suite(name=str(raw.get("name", Path(str(path)).stem if path else "suite")),
                 version=raw.get("version", 1), system_prompt=raw.get("system_prompt"),
                 insertion=raw["slices"]["insertion"], attributes=attributes,
                 occupations=list(raw["occupations"]), families=families, decoding=regimes,
                 seeds=list(raw["seeds"]), path=Path(path) if path else None, raw=raw)


__all__ = ["Suite", "Family", "Regime", "load_suite", "parse_suite", "DEFAULT_SUITE",
           "slice_label"]
