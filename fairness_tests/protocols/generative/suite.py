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

from ...errors import ConfigError
from ...paths import DATA_DIR
from .grid import GRID_COLUMNS, grid_hash, slice_label

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
        return [dict(zip(names, combo))
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
    import yaml

    p = Path(path) if path else DEFAULT_SUITE
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read protocol file: {exc.strerror}", path=p) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise ConfigError(f"not valid YAML: {getattr(exc, 'problem', exc)}", path=p,
                          line=None if line is None else line + 1) from None
    return parse_suite(raw, p)


def parse_suite(raw: Any, path: Path | str | None = None) -> Suite:
    """Validate a protocol mapping; errors name the file and the key."""
    def err(key: str, msg: str) -> ConfigError:
        return ConfigError(msg, path=path, key=key)

    if not isinstance(raw, dict):
        raise ConfigError("a protocol file must be a mapping", path=path)
    known = {"name", "version", "system_prompt", "max_new_tokens", "seeds", "slices",
             "occupations", "families", "decoding", "description"}
    for k in raw:
        if k not in known:
            raise err(str(k), f"unknown key (known: {', '.join(sorted(known))})")
    for k in ("slices", "occupations", "families", "decoding", "seeds"):
        if k not in raw:
            raise err(k, "missing")

    name = raw.get("name", Path(str(path)).stem if path else "suite")
    version = raw.get("version", 1)
    if not isinstance(version, int):
        raise err("version", "must be an integer")
    system = raw.get("system_prompt")
    if system is not None and not isinstance(system, str):
        raise err("system_prompt", "must be a string or null")
    max_new = raw.get("max_new_tokens", 160)
    if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new <= 0:
        raise err("max_new_tokens", "must be a positive integer")

    slices = raw["slices"]
    if not isinstance(slices, dict) or "insertion" not in slices or "attributes" not in slices:
        raise err("slices", "must be a mapping with 'insertion' and 'attributes'")
    insertion = slices["insertion"]
    attrs = slices["attributes"]
    if not isinstance(insertion, str):
        raise err("slices.insertion", "must be a string like 'a {gender} who is {religion}'")
    if not isinstance(attrs, dict) or not attrs:
        raise err("slices.attributes", "must map attribute names to lists of values")
    attributes: dict[str, list[str]] = {}
    for a, values in attrs.items():
        if not isinstance(values, list) or not values or not all(
                isinstance(v, (str, int)) and str(v) for v in values):
            raise err(f"slices.attributes.{a}", "must be a non-empty list of values")
        if len(set(map(str, values))) != len(values):
            raise err(f"slices.attributes.{a}", "has duplicate values")
        attributes[str(a)] = [str(v) for v in values]
    used = set(_PLACEHOLDER.findall(insertion))
    for u in sorted(used - set(attributes)):
        raise err("slices.insertion", f"placeholder {{{u}}} is not an attribute")
    for a in attributes:
        if a not in used:
            raise err("slices.insertion", f"attribute {a!r} is never inserted")
    for a in ("gender", "religion"):
        if a not in attributes:
            raise err("slices.attributes", f"needs the attribute {a!r} (published grid columns)")

    occupations = raw["occupations"]
    if not isinstance(occupations, list) or not occupations or not all(
            isinstance(o, str) and o for o in occupations):
        raise err("occupations", "must be a non-empty list of strings")
    if len(set(occupations)) != len(occupations):
        raise err("occupations", "has duplicates")

    fams_raw = raw["families"]
    if not isinstance(fams_raw, list) or not fams_raw:
        raise err("families", "must be a non-empty list")
    families: list[Family] = []
    for i, f in enumerate(fams_raw):
        where = f"families[{i}]"
        if not isinstance(f, dict) or "id" not in f or "paraphrases" not in f:
            raise err(where, "needs 'id' and 'paraphrases'")
        paras = f["paraphrases"]
        if not isinstance(paras, list) or not paras:
            raise err(f"{where}.paraphrases", "must be a non-empty list")
        items = []
        for j, para in enumerate(paras):
            pwhere = f"{where}.paraphrases[{j}]"
            if isinstance(para, dict):
                pid, text = str(para.get("id", f"p{j + 1}")), para.get("text")
            else:
                pid, text = f"p{j + 1}", para
            if not isinstance(text, str) or not text.strip():
                raise err(pwhere, "must be a non-empty string")
            found = _PLACEHOLDER.findall(text)
            for ph in found:
                if ph not in ("A", "OCC"):
                    raise err(pwhere, f"unknown placeholder {{{ph}}} (use {{A}} and {{OCC}})")
            for need in ("A", "OCC"):
                if need not in found:
                    raise err(pwhere, f"must contain {{{need}}}")
            items.append((pid, text))
        if len({p for p, _ in items}) != len(items):
            raise err(f"{where}.paraphrases", "duplicate paraphrase ids")
        families.append(Family(str(f["id"]), str(f.get("name", f["id"])), tuple(items)))
    if len({f.id for f in families}) != len(families):
        raise err("families", "duplicate family ids")

    dec_raw = raw["decoding"]
    if not isinstance(dec_raw, list) or not dec_raw:
        raise err("decoding", "must be a non-empty list of {name, temperature, top_p}")
    regimes = []
    for i, d in enumerate(dec_raw):
        where = f"decoding[{i}]"
        if not isinstance(d, dict):
            raise err(where, "must be a mapping")
        for k in ("temperature", "top_p"):
            v = d.get(k)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise err(f"{where}.{k}", "must be a number")
        if not 0 <= d["temperature"] <= 2:
            raise err(f"{where}.temperature", "must be in [0, 2]")
        if not 0 < d["top_p"] <= 1:
            raise err(f"{where}.top_p", "must be in (0, 1]")
        mnt = d.get("max_new_tokens", max_new)
        if not isinstance(mnt, int) or mnt <= 0:
            raise err(f"{where}.max_new_tokens", "must be a positive integer")
        regimes.append(Regime(str(d.get("name", f"regime{i + 1}")), float(d["temperature"]),
                              float(d["top_p"]), mnt))

    seeds = raw["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise err("seeds", "must be a non-empty list of integers")
    if len(set(seeds)) != len(seeds):
        raise err("seeds", "has duplicates")

    return Suite(name=str(name), version=version, system_prompt=system, insertion=insertion,
                 attributes=attributes, occupations=list(occupations), families=families,
                 decoding=regimes, seeds=list(seeds), path=Path(path) if path else None,
                 raw=raw)


__all__ = ["Suite", "Family", "Regime", "load_suite", "parse_suite", "DEFAULT_SUITE",
           "slice_label"]
