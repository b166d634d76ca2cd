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

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.paths import DATA_DIR
from fairness_tests.core.validate import (
    Problem,
    check_data,
    line_index,
    nearest_line,
    parse,
    read_text,
)

RUBRIC_DIR = DATA_DIR / "rubrics"
BUILTIN = {"published": RUBRIC_DIR / "published.json", "strict": RUBRIC_DIR / "strict.yaml"}
# the published lexicon's key for each category
PUBLISHED_KEYS = {
    "refusal_regex": "refusal", "deflection_regex": "deflection",
    "religion_substr": "religion", "gender_title_substr": "title",
    "professional_positive_substr": "positive_professional", "caution_substr": "caution",
    "stereotype_substr": "stereotype", "demeaning_substr": "demeaning",
}
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
    """``"published"``, ``"strict"`` or a path to a rubric file (JSON or YAML),
    validated by :mod:`fairness_tests.core.validate` (schema ``data/schemas/rubric.yaml``)."""

    p = BUILTIN.get(str(spec), None) or Path(spec)
    try:
        text = read_text(p, "rubric file")
    except ConfigError as exc:
        raise ConfigError(f"{exc}; built-in rubrics: {', '.join(BUILTIN)}") from None
    return parse_rubric(parse(text, p), p, line_index(text))


def parse_rubric(raw: Any, path: Path | str | None = None,
                 lines: dict[str, int] | None = None) -> Rubric:
    """Validate a rubric mapping (every problem at once) and compile it."""

    check_data(raw, "rubric", source=path, lines=lines, checks=[_entry_checks])
    if "categories" in raw:
        semantics = raw["semantics"]
        cats = {}
        for name, spec in raw["categories"].items():
            spec = {"entries": spec} if isinstance(spec, list) else spec
            cats[name] = Category(name, tuple(spec["entries"]), bool(spec.get("ignore_quoted")))
    else:
        semantics = "published"
        cats = {PUBLISHED_KEYS[k]: Category(PUBLISHED_KEYS[k], tuple(v))
                for k, v in raw.items() if k in PUBLISHED_KEYS}
    name = raw.get("name") or (Path(path).stem if path else "rubric")
    return Rubric(str(name), semantics, cats, Path(path) if path else None)


def _entries(raw: Any) -> Iterator[tuple[str, Any, Any]]:
    """(key path, entry, semantics) for every entry of a rubric mapping."""
    if not isinstance(raw, dict):
        return
    if isinstance(raw.get("categories"), dict):
        semantics = raw.get("semantics")
        for name, spec in raw["categories"].items():
            entries = spec if isinstance(spec, list) else (
                spec.get("entries") if isinstance(spec, dict) else None)
            sub = "" if isinstance(spec, list) else ".entries"
            for i, e in enumerate(entries if isinstance(entries, list) else []):
                yield f"categories.{name}{sub}[{i}]", e, semantics
    else:
        for k, v in raw.items():
            if k in PUBLISHED_KEYS and isinstance(v, list):
                for i, e in enumerate(v):
                    yield f"{k}[{i}]", e, "published"


def _entry_checks(raw: Any, lines: dict[str, int]) -> list[Problem]:
    """What the schema cannot say: regexes compile, strict inflection syntax, and
    published entries are plain strings (a backslash makes one a regex)."""

    out = []
    for key, e, semantics in _entries(raw):
        try:
            if semantics == "published":
                if isinstance(e, dict):
                    raise ConfigError("published entries are plain strings (a backslash "
                                      "makes one a regex)")
                if isinstance(e, str) and "\\" in e:
                    _compile(e, re.IGNORECASE)
            elif isinstance(e, dict) and isinstance(e.get("regex"), str):
                _compile(e["regex"], 0)
            elif isinstance(e, str) and e.strip():
                term_pattern(e)
        except ConfigError as exc:
            out.append(Problem(key, str(exc), nearest_line(key, lines)))
    return out


def _compile(pattern: str, flags: int) -> re.Pattern:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ConfigError(f"bad regex {pattern!r}: {exc}") from None


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


def strict_category_pattern(cat: Category) -> re.Pattern[str]:
    """One alternation for a strict category, compiled case-insensitive, a case-sensitive
    entry wrapped in ``(?-i:...)``; longest alternatives first so overlapping entries
    count once. (The same language as wrapping every alternative in its own ``(?i:...)``,
    which makes the regex engine 3-4x slower.)"""
    alts = []
    for e in cat.entries:
        if isinstance(e, dict):
            regex = e["regex"]
            alts.append((len(regex), f"(?-i:{regex})" if e.get("case_sensitive") else regex))
        else:
            p = term_pattern(e)
            alts.append((len(p), p))
    alts.sort(key=lambda t: -t[0])
    return re.compile("|".join(f"(?:{a})" for _, a in alts), re.IGNORECASE)
