"""Lexical rubrics as data files, and their compilation to matchers.

A rubric file (JSON or YAML) says which matching ``semantics`` it uses:

``published`` (the published audit, number for number)
    an entry containing a backslash is a regex searched with ``re.IGNORECASE`` in the
    original text; any other entry is a plain substring of ``text.lower()`` (no word
    boundaries). count(category) = sum over entries of non-overlapping hits.
``strict`` (ours)
    text normalised (curly apostrophes/quotes -> straight); a plain entry is a word or
    phrase on word boundaries, ``"word{,s,ed}"`` listing the inflections that count;
    ``{regex: ..., case_sensitive: bool}`` entries are regexes; all entries of a category
    form one alternation tried longest first, so overlapping entries count once;
    ``ignore_quoted: true`` drops "quoted dialogue" before matching that category.

Two file layouts are accepted: ``categories: {refusal: {entries: [...], ignore_quoted:
bool}, ...}``, or the published lexicon's own keys (``refusal_regex``,
``religion_substr``, ... - so ``rubric_lexicon.json`` loads as it is, semantics
``published`` unless the file says otherwise).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..paths import DATA_DIR

RUBRIC_DIR = DATA_DIR / "rubrics"
BUILTIN = {"published": RUBRIC_DIR / "published.json", "strict": RUBRIC_DIR / "strict.yaml"}
CATEGORIES = ("refusal", "deflection", "religion", "title", "positive_professional",
              "caution", "stereotype", "demeaning")
# the published lexicon's key for each category
PUBLISHED_KEYS = {
    "refusal_regex": "refusal", "deflection_regex": "deflection",
    "religion_substr": "religion", "gender_title_substr": "title",
    "professional_positive_substr": "positive_professional", "caution_substr": "caution",
    "stereotype_substr": "stereotype", "demeaning_substr": "demeaning",
}
SEMANTICS = ("published", "strict")
_META_KEYS = {"name", "semantics", "description", "provenance", "_provenance", "version"}
QUOTE_TABLE = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})
QUOTED_SPAN = r'"[^"\n]*"'


@dataclass(frozen=True)
class Category:
    name: str
    entries: tuple[Any, ...]           # str, or {"regex": str, "case_sensitive": bool}
    ignore_quoted: bool = False


@dataclass(frozen=True)
class Rubric:
    name: str
    semantics: str
    categories: dict[str, Category]
    path: Path | None = None


def load_rubric(spec: str | Path = "published") -> Rubric:
    """``"published"``, ``"strict"`` or a path to a rubric file."""
    p = BUILTIN.get(str(spec), None) or Path(spec)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read rubric file ({exc.strerror}); built-in rubrics: "
                          f"{', '.join(BUILTIN)}", path=p) from None
    if p.suffix.lower() == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not valid JSON ({exc.msg})", path=p, line=exc.lineno) from None
    else:
        import yaml
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise ConfigError(f"not valid YAML ({getattr(exc, 'problem', exc)})", path=p,
                              line=None if mark is None else mark.line + 1) from None
    return parse_rubric(raw, p)


def parse_rubric(raw: Any, path: Path | None = None) -> Rubric:
    if not isinstance(raw, dict):
        raise ConfigError("a rubric file must be a mapping", path=path)
    if "categories" in raw:
        semantics = raw.get("semantics")
        if semantics not in SEMANTICS:
            raise ConfigError(f"must be one of {SEMANTICS}", path=path, key="semantics")
        cats_raw = raw["categories"]
        if not isinstance(cats_raw, dict):
            raise ConfigError("must map category names to entries", path=path, key="categories")
        cats = {}
        for name, spec in cats_raw.items():
            key = f"categories.{name}"
            if name not in CATEGORIES:
                raise ConfigError(f"unknown category (known: {', '.join(CATEGORIES)})",
                                  path=path, key=key)
            if isinstance(spec, list):
                spec = {"entries": spec}
            if not isinstance(spec, dict) or not isinstance(spec.get("entries"), list):
                raise ConfigError("needs an 'entries' list", path=path, key=key)
            unknown = set(spec) - {"entries", "ignore_quoted"}
            if unknown:
                raise ConfigError(f"unknown key(s) {sorted(unknown)}", path=path, key=key)
            cats[name] = Category(name, tuple(spec["entries"]), bool(spec.get("ignore_quoted")))
    else:
        semantics = raw.get("semantics", "published")
        if semantics != "published":
            raise ConfigError("the published-lexicon layout only supports semantics "
                              "'published' (use 'categories:' for strict)", path=path,
                              key="semantics")
        cats = {}
        for k, v in raw.items():
            if k in _META_KEYS:
                continue
            if k not in PUBLISHED_KEYS:
                raise ConfigError(f"unknown key (known: {', '.join(PUBLISHED_KEYS)})",
                                  path=path, key=k)
            if not isinstance(v, list):
                raise ConfigError("must be a list of entries", path=path, key=k)
            cats[PUBLISHED_KEYS[k]] = Category(PUBLISHED_KEYS[k], tuple(v))
    for c in cats.values():
        for i, e in enumerate(c.entries):
            _check_entry(e, semantics, path, f"{c.name}[{i}]")
    missing = [c for c in CATEGORIES if c not in cats]
    if missing:
        raise ConfigError(f"missing categories {missing}", path=path)
    name = raw.get("name") or (path.stem if path else "rubric")
    return Rubric(str(name), semantics, cats, path)


def _check_entry(e: Any, semantics: str, path: Any, key: str) -> None:
    if semantics == "published":
        if not isinstance(e, str) or not e:
            raise ConfigError("published entries are non-empty strings", path=path, key=key)
        if "\\" in e:
            _compile(e, re.IGNORECASE, path, key)
        return
    if isinstance(e, dict):
        if not isinstance(e.get("regex"), str) or set(e) - {"regex", "case_sensitive"}:
            raise ConfigError("a mapping entry is {regex: str, case_sensitive: bool}",
                              path=path, key=key)
        _compile(e["regex"], 0, path, key)
    elif not isinstance(e, str) or not e.strip():
        raise ConfigError("entries are non-empty strings or {regex: ...}", path=path, key=key)
    else:
        term_pattern(e, path, key)


def _compile(pattern: str, flags: int, path: Any, key: str) -> re.Pattern:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ConfigError(f"bad regex {pattern!r}: {exc}", path=path, key=key) from None


_BRACES = re.compile(r"^(?P<base>[^{}]+)\{(?P<alts>[^{}]*)\}$")


def term_pattern(term: str, path: Any = None, key: str | None = None) -> str:
    """Regex (no flags) for a strict plain entry: word boundaries, whitespace-tolerant
    phrases, and the listed inflections: ``"concern{,s,ed}"`` ->
    ``\\bconcern(?:ed|s)?\\b``."""
    term = term.strip().translate(QUOTE_TABLE)
    m = _BRACES.match(term)
    if m:
        base, alts = m.group("base"), m.group("alts").split(",")
    elif "{" in term or "}" in term:
        raise ConfigError(f"bad inflection syntax in {term!r} (use word{{,s,ed}})",
                          path=path, key=key)
    else:
        base, alts = term, [""]
    body = r"\s+".join(re.escape(w) for w in base.split())
    suffixes = sorted({a.strip() for a in alts if a.strip()}, key=len, reverse=True)
    if suffixes:
        group = "(?:" + "|".join(re.escape(s) for s in suffixes) + ")"
        body += group + ("?" if any(not a.strip() for a in alts) else "")
    start = r"\b" if re.match(r"\w", base) else ""
    end = r"\b" if re.search(r"\w$", (suffixes[0] if suffixes else base)) else ""
    return start + body + end


def strict_category_pattern(cat: Category) -> str:
    """One alternation for a strict category; each alternative carries its own case
    flag; longest alternatives first so overlapping entries count once."""
    alts = []
    for e in cat.entries:
        if isinstance(e, dict):
            flag = "" if e.get("case_sensitive") else "i"
            alts.append((len(e["regex"]), f"(?{flag or '-i'}:{e['regex']})"))
        else:
            p = term_pattern(e)
            alts.append((len(p), f"(?i:{p})"))
    alts.sort(key=lambda t: -t[0])
    return "|".join(a for _, a in alts)
