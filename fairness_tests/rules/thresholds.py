"""Decision rules as data: load and validate threshold files.

A thresholds directory holds ``default.yaml`` and ``models/*.yaml`` overrides::

    version: 1
    rules:
      - id: sdis_bound
        table: bbq                 # a metric table of the run (see known_metrics.TABLES)
        metric: s_dis
        scope: {context: disambig} # which cells: column -> value | [values] | null
        op: "<="                   # the cell passes when <compared> <op> <bound>
        bound: 0.10
        compare: ci_low            # "value" | "ci_low" | "ci_high"   (default "value")
        rationale: "..."           # why this bound (shown in failures and on the card)
        # optional:
        across: slice              # reduce the cells over this column ...
        reduce: max                # ... "max" | "min" | "range" (worst cell / max - min)
        abs: true                  # compare |value| (for signed scores)
        min_n: 30                  # cells with fewer items are not evaluable
    drift:                          # snapshot tolerances per metric (see plugin.snapshot)
      default: {abs: 1.0e-9}
      accuracy: {abs: 0.01}
      s_dis: {within_ci: true}

An override file applies to the models its ``model`` glob(s) or ``model_regex``
match (``fnmatch`` / ``re.fullmatch`` on the model id)::

    model: "embedded:gemma-3-270m"
    rules:
      - id: accuracy_floor_ambig   # an existing rule: only the keys given change
        expected_fail: {reason: "base model, strong preference for option (a)"}
      - id: my_new_rule            # a new id: a complete rule
        ...

``expected_fail: {reason, cells: [globs]}`` declares a known failure (optionally
only for some cells): it is reported as ``expected_fail`` and run as a strict
xfail by the pytest plugin, never a silent pass.

Everything is validated on load; an unknown table or metric, a misspelt key or a
value of the wrong type raises :class:`~fairness_tests.errors.ConfigError` naming
the file, line, rule and key.
"""
from __future__ import annotations

import difflib
import fnmatch
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from . import known_metrics

RULE_KEYS = ("id", "table", "metric", "op", "bound", "compare", "scope", "across", "reduce",
             "abs", "min_n", "rationale", "expected_fail")
REQUIRED_KEYS = ("id", "table", "metric", "op", "bound", "rationale")
OPS = ("<=", ">=")
COMPARES = ("value", "ci_low", "ci_high")
REDUCES = ("max", "min", "range")
TOP_KEYS = ("version", "rules", "drift", "description")
OVERRIDE_TOP_KEYS = ("version", "model", "model_regex", "rules", "drift", "description")
TOLERANCE_KEYS = ("abs", "rel", "within_ci")


@dataclass(frozen=True)
class ExpectedFail:
    reason: str
    cells: tuple[str, ...] = ()          # cell-id globs; empty = every cell

    def applies(self, cell: str) -> bool:
        return not self.cells or any(fnmatch.fnmatchcase(cell, g) for g in self.cells)


@dataclass(frozen=True)
class Rule:
    id: str
    table: str
    metric: str
    op: str
    bound: float
    rationale: str
    compare: str = "value"
    scope: tuple[tuple[str, Any], ...] = ()
    across: str | None = None
    reduce: str = "max"
    abs: bool = False
    min_n: int = 0
    expected_fail: ExpectedFail | None = None
    source: str = ""                      # "file:line" where the rule was (last) defined

    def expected_fail_reason(self, cell: str) -> str | None:
        if self.expected_fail and self.expected_fail.applies(cell):
            return self.expected_fail.reason
        return None

    def describe(self) -> str:
        what = f"{'|' if self.abs else ''}{self.metric}{'|' if self.abs else ''}"
        if self.across:
            what = f"{self.reduce} over {self.across} of {what}"
        cmp = "" if self.compare == "value" else f" ({self.compare.replace('_', ' ')} of the 95% CI)"
        return f"{what}{cmp} {self.op} {self.bound:g}"


@dataclass(frozen=True)
class Tolerance:
    abs: float = 0.0
    rel: float = 0.0
    within_ci: bool = False


@dataclass
class RuleSet:
    rules: list[Rule]
    files: list[str] = field(default_factory=list)      # files applied, in order
    model: str | None = None
    drift: dict[str, Tolerance] = field(default_factory=dict)

    def get(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError(rule_id)

    def tolerance(self, metric: str) -> Tolerance:
        return self.drift.get(metric) or self.drift.get("default") or Tolerance(abs=1e-9)


# --------------------------------------------------------------------------- YAML with lines

class _LineDict(dict):
    line: int = 0
    key_lines: dict[str, int]


class _LineLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> _LineDict:
    loader.flatten_mapping(node)
    d = _LineDict()
    d.line = node.start_mark.line + 1
    d.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in d:
            raise ConfigError("duplicate key", path=loader.name, line=key_node.start_mark.line + 1,
                              key=str(key))
        d[key] = loader.construct_object(value_node, deep=True)
        d.key_lines[key] = key_node.start_mark.line + 1
    return d


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read thresholds file: {exc.strerror}", path=path) from None
    loader = _LineLoader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise ConfigError(f"invalid YAML: {exc.problem}", path=path, line=line) from None
    finally:
        loader.dispose()


def _line(d: Any, key: str | None = None) -> int | None:
    if isinstance(d, _LineDict):
        return d.key_lines.get(key, d.line) if key else d.line
    return None


# --------------------------------------------------------------------------- validation

def _err(msg: str, path: Path, node: Any, key: str | None, rule_id: str | None = None) -> ConfigError:
    prefix = f"rule {rule_id!r}: " if rule_id else ""
    return ConfigError(prefix + msg, path=path, line=_line(node, key), key=key)


def _suggest(word: str, options) -> str:
    close = difflib.get_close_matches(str(word), list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_keys(d: dict, allowed, path: Path, rule_id: str | None, what: str) -> None:
    for k in d:
        if k not in allowed:
            raise _err(f"unknown {what} key {k!r}{_suggest(k, allowed)}; allowed: "
                       f"{', '.join(allowed)}", path, d, str(k), rule_id)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not (
        isinstance(v, float) and math.isnan(v))


def _validate_fields(d: dict, path: Path, rule_id: str, base: Rule | None) -> dict:
    """Check the keys present in ``d``; return them converted to Rule fields."""
    out: dict[str, Any] = {}
    _check_keys(d, RULE_KEYS, path, rule_id, "rule")
    for k, v in d.items():
        if k == "id":
            continue
        if k in ("table", "metric", "rationale", "across") and not (isinstance(v, str) and v.strip()):
            raise _err(f"{k} must be a non-empty string, got {v!r}", path, d, k, rule_id)
        if k == "op" and v not in OPS:
            raise _err(f"op must be one of {OPS}, got {v!r}", path, d, k, rule_id)
        if k == "bound" and not _number(v):
            raise _err(f"bound must be a number, got {type(v).__name__} {v!r}", path, d, k, rule_id)
        if k == "compare" and v not in COMPARES:
            raise _err(f"compare must be one of {COMPARES}, got {v!r}{_suggest(v, COMPARES)}",
                       path, d, k, rule_id)
        if k == "reduce" and v not in REDUCES:
            raise _err(f"reduce must be one of {REDUCES}, got {v!r}", path, d, k, rule_id)
        if k == "abs" and not isinstance(v, bool):
            raise _err(f"abs must be true or false, got {v!r}", path, d, k, rule_id)
        if k == "min_n" and not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
            raise _err(f"min_n must be a non-negative integer, got {v!r}", path, d, k, rule_id)
        if k == "scope":
            if not isinstance(v, dict):
                raise _err(f"scope must be a mapping column -> value(s), got {v!r}",
                           path, d, k, rule_id)
            for col, val in v.items():
                if isinstance(val, (dict, set)):
                    raise _err(f"scope value for {col!r} must be a value, a list or null",
                               path, v, str(col), rule_id)
            out[k] = tuple(sorted(((str(c), tuple(x) if isinstance(x, list) else x)
                                   for c, x in v.items()), key=lambda t: t[0]))
            continue
        if k == "expected_fail":
            if not isinstance(v, dict):
                raise _err("expected_fail must be a mapping {reason: ..., cells: [...]}",
                           path, d, k, rule_id)
            _check_keys(v, ("reason", "cells"), path, rule_id, "expected_fail")
            reason = v.get("reason")
            if not (isinstance(reason, str) and reason.strip()):
                raise _err("expected_fail needs a non-empty reason", path, v, "reason", rule_id)
            cells = v.get("cells", [])
            if isinstance(cells, str):
                cells = [cells]
            if not (isinstance(cells, list) and all(isinstance(c, str) for c in cells)):
                raise _err("expected_fail cells must be a list of cell-id globs",
                           path, v, "cells", rule_id)
            out[k] = ExpectedFail(reason.strip(), tuple(cells))
            continue
        out[k] = float(v) if k == "bound" else (v.strip() if isinstance(v, str) else v)
    # cross-field checks against the registry (on the merged rule)
    merged = {**(base.__dict__ if base else {}), **out}
    missing = [k for k in REQUIRED_KEYS if k != "id" and k not in merged]
    if missing:
        raise _err(f"missing required key(s) {', '.join(missing)}", path, d, None, rule_id)
    table = merged["table"]
    if table not in known_metrics.TABLES:
        raise _err(f"unknown table {table!r}{_suggest(table, known_metrics.TABLES)}; known: "
                   f"{', '.join(sorted(known_metrics.TABLES))}", path, d,
                   "table" if "table" in d else None, rule_id)
    cols, metrics = known_metrics.TABLES[table]
    if merged["metric"] not in metrics:
        raise _err(f"unknown metric {merged['metric']!r} for table {table!r}"
                   f"{_suggest(merged['metric'], metrics)}", path, d,
                   "metric" if "metric" in d else None, rule_id)
    for col, _ in merged.get("scope", ()):
        if col not in cols:
            raise _err(f"scope column {col!r} is not a column of table {table!r}"
                       f"{_suggest(col, cols)}; columns: {', '.join(cols)}", path,
                       d.get("scope", d), col, rule_id)
    if merged.get("across") and merged["across"] not in cols:
        raise _err(f"across column {merged['across']!r} is not a column of table {table!r}"
                   f"{_suggest(merged['across'], cols)}", path, d, "across", rule_id)
    if merged.get("across") and merged.get("reduce", "max") == "range" \
            and merged.get("compare", "value") != "value":
        raise _err("reduce: range has no CI; use compare: value", path, d, "compare", rule_id)
    return out


def _parse_rules(items: Any, path: Path, doc: dict, base: dict[str, Rule]) -> dict[str, Rule]:
    if not isinstance(items, list):
        raise _err("rules must be a list of mappings", path, doc, "rules")
    rules = dict(base)
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            raise ConfigError(f"each rule must be a mapping, got {item!r}", path=path,
                              line=_line(doc, "rules"), key="rules")
        rid = item.get("id")
        if not (isinstance(rid, str) and re.fullmatch(r"[A-Za-z0-9_.\-]+", rid or "")):
            raise _err(f"rule id must be a word (letters, digits, _ . -), got {rid!r}",
                       path, item, "id")
        if rid in seen:
            raise _err("duplicate rule id in this file", path, item, "id", rid)
        seen.add(rid)
        prev = rules.get(rid)
        fields = _validate_fields(item, path, rid, prev)
        src = f"{path}:{_line(item)}"
        rules[rid] = replace(prev, **fields, source=src) if prev else Rule(id=rid, source=src,
                                                                            **fields)
    return rules


def _parse_drift(d: Any, path: Path, doc: dict) -> dict[str, Tolerance]:
    if not isinstance(d, dict):
        raise _err("drift must be a mapping metric -> {abs, rel, within_ci}", path, doc, "drift")
    out = {}
    all_metrics = set().union(*(m for _, m in known_metrics.TABLES.values())) | {"default"}
    for metric, tol in d.items():
        if metric not in all_metrics:
            raise _err(f"unknown metric {metric!r} in drift{_suggest(metric, all_metrics)}",
                       path, d, str(metric))
        if not isinstance(tol, dict):
            raise _err("a drift tolerance must be a mapping {abs, rel, within_ci}",
                       path, d, str(metric))
        _check_keys(tol, TOLERANCE_KEYS, path, None, f"drift.{metric}")
        for k in ("abs", "rel"):
            if k in tol and not (_number(tol[k]) and tol[k] >= 0):
                raise _err(f"drift.{metric}.{k} must be a non-negative number", path, tol, k)
        if "within_ci" in tol and not isinstance(tol["within_ci"], bool):
            raise _err(f"drift.{metric}.within_ci must be true or false", path, tol, "within_ci")
        out[str(metric)] = Tolerance(float(tol.get("abs", 0.0)), float(tol.get("rel", 0.0)),
                                     bool(tol.get("within_ci", False)))
    return out


def _model_matches(doc: dict, path: Path, model: str) -> bool:
    globs = doc.get("model")
    regex = doc.get("model_regex")
    if globs is None and regex is None:
        raise _err("an override file needs `model` (glob or list of globs) or `model_regex`",
                   path, doc, None)
    if globs is not None:
        globs = [globs] if isinstance(globs, str) else globs
        if not (isinstance(globs, list) and all(isinstance(g, str) for g in globs)):
            raise _err("model must be a glob or a list of globs", path, doc, "model")
        if any(fnmatch.fnmatchcase(model, g) for g in globs):
            return True
    if regex is not None:
        try:
            return re.fullmatch(str(regex), model) is not None
        except re.error as exc:
            raise _err(f"model_regex is not a valid regular expression: {exc}",
                       path, doc, "model_regex") from None
    return False


def _resolve(thresholds: str | Path | None) -> tuple[Path, Path | None]:
    """(default file, overrides dir or None) for a thresholds dir or file."""
    if thresholds is None:
        thresholds = default_thresholds_dir()
    p = Path(thresholds)
    if p.is_dir():
        return p / "default.yaml", (p / "models")
    if p.exists() or p.suffix in (".yaml", ".yml"):
        return p, p.parent / "models"
    raise ConfigError("thresholds path does not exist", path=p)


def default_thresholds_dir() -> Path:
    """``./thresholds`` if it exists, else the checkout's ``thresholds/``."""
    here = Path.cwd() / "thresholds"
    if (here / "default.yaml").exists():
        return here
    from ..paths import REPO_DIR
    return REPO_DIR / "thresholds"


def load_rules(thresholds: str | Path | None = None, model: str | None = None) -> RuleSet:
    """Load ``default.yaml`` and apply every override in ``models/`` whose model
    pattern matches ``model`` (all override files are validated either way)."""
    default_path, models_dir = _resolve(thresholds)
    doc = _read_yaml(default_path)
    if not isinstance(doc, dict):
        raise ConfigError("a thresholds file must be a mapping with a `rules` list",
                          path=default_path)
    _check_keys(doc, TOP_KEYS, default_path, None, "top-level")
    rules = _parse_rules(doc.get("rules", []), default_path, doc, {})
    drift = _parse_drift(doc.get("drift", {}), default_path, doc)
    files = [str(default_path)]
    for opath in sorted(models_dir.glob("*.y*ml")) if models_dir and models_dir.is_dir() else []:
        odoc = _read_yaml(opath)
        if not isinstance(odoc, dict):
            raise ConfigError("an override file must be a mapping", path=opath)
        _check_keys(odoc, OVERRIDE_TOP_KEYS, opath, None, "top-level")
        # validate every override against the defaults, whichever model is run
        candidate = _parse_rules(odoc.get("rules", []), opath, odoc, rules)
        odrift = _parse_drift(odoc.get("drift", {}), opath, odoc)
        if model is not None and _model_matches(odoc, opath, model):
            rules, drift = candidate, {**drift, **odrift}
            files.append(str(opath))
        elif model is None:
            _model_matches(odoc, opath, "")   # still check the pattern itself
    return RuleSet(rules=list(rules.values()), files=files, model=model, drift=drift)
