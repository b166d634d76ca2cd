"""Decision rules as data: load and validate threshold files.

Each registered benchmark brings its default rules in its folder (``Benchmark.rules``:
:func:`~.rule_files.benchmark_rule_files`); a thresholds directory holds the project's
``default.yaml`` (which changes a benchmark's rule by its id and adds its own) and
``models/*.yaml`` overrides. Every file has the one format::

    version: 1
    rules:
      - id: sdis_bound
        table: bbq                 # a metric table of the run (see known_metrics.TABLES)
        metric: s_dis
        scope: {context: disambig} # which cells: column -> value | [values] | null
        op: "<="                   # the cell passes when <compared> <op> <bound>
        bound: 0.10
        compare: ci_low            # "value" | "ci_low" | "ci_high" | "p_value" (default "value")
        rationale: "..."           # why this bound (shown in failures and on the card)
        # optional:
        across: slice              # reduce the cells over this column ...
        reduce: max                # ... "max" | "min" | "range" (worst cell / max - min)
        abs: true                  # compare |value| (for signed scores)
        min_n: 30                  # cells with fewer items are not evaluable (default:
                                   # DEFAULT_MIN_N; 0: no minimum)
        alpha: 0.05                # with compare: p_value (0 < alpha < 1): fail when p < alpha
        gate: {mode: harm, margin: 0.02}   # the upgrade gate: harm | non_inferiority
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
xfail by the pytest plugin, never a silent pass. Its reason quotes the run's figures
only through placeholders (``{value}``, ``{ci}``, ...; :mod:`.reasons`), filled in from
each run: a literal decimal figure or percentage in it is an error.

Everything is validated on load by the one validator (:mod:`fairness_tests.core.validate`:
the JSON Schema ``data/schemas/thresholds.yaml``, then the checks against the metric
registry here); an unknown table or metric, a misspelt key or a value of the wrong
type raises one :class:`~fairness_tests.core.errors.ConfigError` listing every problem of
the file, each with file, line, rule and key.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from fairness_tests.core.errors import ConfigError, Problem, suggest
from fairness_tests.core.project import find_project
from fairness_tests.core.validate import (
    error,
    load_file,
    load_schema,
    load_yaml,
    nearest_line,
    read_text,
)
from fairness_tests.metrics import schema as known_metrics
from fairness_tests.rules.reasons import reason_problems
from fairness_tests.rules.rule_files import own_rule_files, rule_owners

REQUIRED_KEYS = ("table", "metric", "op", "bound", "rationale")
#: THE minimum cell size of every rule that does not give its own ``min_n``: a cell
#: (a row of the rule's table; with ``across``, each row reduced over) whose ``n`` is
#: smaller is not evaluable, "only N items (< min_n M)"
DEFAULT_MIN_N = 30


@dataclass(frozen=True)
class ExpectedFail:
    reason: str
    cells: tuple[str, ...] = ()          # cell-id globs; empty = every cell

    def applies(self, cell: str) -> bool:
        return not self.cells or any(fnmatch.fnmatchcase(cell, g) for g in self.cells)


@dataclass(frozen=True)
class GateSpec:
    """``gate: {mode, margin}``: ``harm`` fails only when the whole CI of the change is
    worse than the margin; ``non_inferiority`` fails unless its worse end is within it."""
    mode: str
    margin: float | None = None


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
    min_n: int | None = None              # None: DEFAULT_MIN_N
    expected_fail: ExpectedFail | None = None
    alpha: float | None = None            # compare: p_value -> fail when p < alpha
    gate: GateSpec | None = None          # the upgrade gate's decision for this rule
    source: str = ""                      # "file:line" where the rule was (last) defined
    optional: bool = False                # a benchmark's default rule: no verdict when the
                                          # run lacks its table (the benchmark was not run)
    owners: tuple[str, ...] = ()          # the benchmarks whose rules file declares it

    @property
    def minimum_n(self) -> int:
        """The smallest ``n`` a cell of this rule is judged on: the rule's own ``min_n``
        when given (0: no minimum), else :data:`DEFAULT_MIN_N`."""
        return DEFAULT_MIN_N if self.min_n is None else int(self.min_n)

    def expected_fail_reason(self, cell: str) -> str | None:
        if self.expected_fail and self.expected_fail.applies(cell):
            return self.expected_fail.reason
        return None

    def describe(self) -> str:
        what = f"{'|' if self.abs else ''}{self.metric}{'|' if self.abs else ''}"
        if self.across:
            what = f"{self.reduce} over {self.across} of {what}"
        cmp = ("" if self.compare == "value"
               else f" ({self.compare.replace('_', ' ')} of the 95% CI)")
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

    @property
    def thresholds_files(self) -> list[str]:
        """:attr:`files` but the benchmarks' own rules files: the thresholds in force and
        the overrides applied."""
        own = {r.source.rsplit(":", 1)[0] for r in self.rules if r.optional}
        return [f for f in self.files if f not in own]

    def files_used(self, tables: Any) -> list[str]:
        """:attr:`files` but a benchmark's own rules file none of whose tables is in
        ``tables`` (a run's: that benchmark was not run)."""
        def used(f: str) -> bool:
            mine = [r for r in self.rules if r.optional and r.source.startswith(f + ":")]
            return not mine or any(r.table in tables for r in mine)
        return [f for f in self.files if used(f)]

    def get(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError(rule_id)

    def tolerance(self, metric: str) -> Tolerance:
        return self.drift.get(metric) or self.drift.get("default") or Tolerance(abs=1e-9)


# --------------------------------------------------------------------------- validation

def _schema(kind: str) -> dict:
    """The thresholds schema rooted at ``default_file`` or ``override_file``."""
    return {**load_schema("thresholds"), "$ref": f"#/$defs/{kind}"}


def _rule_items(doc: Any) -> list[tuple[int, dict]]:
    rules = doc.get("rules") if isinstance(doc, dict) else None
    return [(i, r) for i, r in enumerate(rules) if isinstance(r, dict)] \
        if isinstance(rules, list) else []


def _rule_checks(base: dict[str, dict]) -> Callable[[Any, dict[str, int]], list[Problem]]:
    """Checks a schema cannot express, on each rule merged with the rule it overrides
    (``base``: id -> raw mapping of the defaults): required keys, table, metric, scope
    and across columns from :mod:`known_metrics`, CI/p-value combinations."""

    def check(doc: Any, lines: dict[str, int]) -> list[Problem]:
        out: list[Problem] = []
        seen: set[str] = set()
        for i, item in _rule_items(doc):
            rid = item.get("id")
            at = f"rules[{i}]"

            def p(key: str | None, msg: str, at: str = at) -> None:
                k = f"{at}.{key}" if key else at
                out.append(Problem(k, msg, nearest_line(k, lines)))

            if not isinstance(rid, str):
                continue
            if rid in seen:
                p("id", "duplicate rule id in this file")
            seen.add(rid)
            merged = {**base.get(rid, {}), **item}
            missing = [k for k in REQUIRED_KEYS if k not in merged]
            if missing:
                p(None, f"missing required key(s) {', '.join(missing)}"
                  + ("" if rid in base else " (a new rule id must be a complete rule)"))
            table = merged.get("table")
            if not isinstance(table, str):
                continue
            if table not in known_metrics.TABLES:
                p("table" if "table" in item else None,
                  f"unknown table {table!r}{suggest(table, known_metrics.TABLES)}; known: "
                  f"{', '.join(sorted(known_metrics.TABLES))}")
                continue
            cols, metrics = known_metrics.TABLES[table]
            metric = merged.get("metric")
            if isinstance(metric, str) and metric not in metrics:
                p("metric" if "metric" in item else None,
                  f"unknown metric {metric!r} for table {table!r}{suggest(metric, metrics)}")
            raw_scope = merged.get("scope")
            scope: dict = raw_scope if isinstance(raw_scope, dict) else {}
            for col in scope:
                if col not in cols:
                    p(f"scope.{col}" if "scope" in item else None,
                      f"scope column {col!r} is not a column of table {table!r}"
                      f"{suggest(col, cols)}; columns: {', '.join(cols)}")
                    continue
                bad = _outside_domain(table, col, scope[col])
                if bad:
                    p(f"scope.{col}" if "scope" in item else None, bad)
            across = merged.get("across")
            if isinstance(across, str) and across not in cols:
                p("across", f"across column {across!r} is not a column of table {table!r}"
                  f"{suggest(across, cols)}")
            compare = merged.get("compare", "value")
            if across and merged.get("reduce", "max") == "range" \
                    and compare in ("ci_low", "ci_high"):
                p("compare", "reduce: range has no CI; use compare: value or p_value")
            if compare == "p_value" and "alpha" not in merged:
                p("compare", "compare: p_value needs alpha (0 < alpha < 1)")
            if "alpha" in merged and compare != "p_value":
                p("alpha", "alpha applies only with compare: p_value")
        return [_named(x, doc) for x in out]
    return check


def _outside_domain(table: str, col: str, want: Any) -> str:
    """Why a scope value names no value its column can take (the protocol's fixed
    values, :data:`known_metrics.COLUMN_VALUES`); "" when it is fine or the column's
    values depend on the run."""
    allowed = known_metrics.COLUMN_VALUES.get(table, {}).get(col)
    if allowed is None or want is None:
        return ""
    wants = want if isinstance(want, list) else [want]
    bad = [w for w in wants if str(w) not in allowed]
    if not bad:
        return ""
    return (f"scope value {bad[0]!r} matches no value of column {col!r} of table "
            f"{table!r}{suggest(bad[0], allowed)}; its values: {', '.join(allowed)}")


def _named(problem: Problem, doc: Any) -> Problem:
    """Prefix a problem under ``rules[i]`` with the rule's id."""
    m = re.match(r"rules\[(\d+)\]", problem.key)
    if not m:
        return problem
    rules = doc.get("rules") if isinstance(doc, dict) else None
    if rules is None:
        return problem
    try:
        rid = rules[int(m.group(1))].get("id")
    except (IndexError, TypeError, AttributeError):
        return problem
    if not isinstance(rid, str) or problem.message.startswith("rule "):
        return problem
    return Problem(problem.key, f"rule {rid!r}: {problem.message}", problem.line)


def _drift_check(doc: Any, lines: dict[str, int]) -> list[Problem]:

    drift = doc.get("drift") if isinstance(doc, dict) else None
    known = set().union(*(m for _, m in known_metrics.TABLES.values())) | {"default"}
    out = []
    for metric in drift if isinstance(drift, dict) else ():
        if metric not in known:
            k = f"drift.{metric}"
            out.append(Problem(k, f"unknown metric {metric!r} in drift"
                                  f"{suggest(metric, known)}", nearest_line(k, lines)))
    return out


def _reason_check(doc: Any, lines: dict[str, int]) -> list[Problem]:
    """Each ``expected_fail.reason``: known placeholders, no literal figure
    (:func:`fairness_tests.rules.reasons.reason_problems`)."""
    out = []
    for i, item in _rule_items(doc):
        xf = item.get("expected_fail")
        reason = xf.get("reason") if isinstance(xf, dict) else None
        if isinstance(reason, str):
            k = f"rules[{i}].expected_fail.reason"
            out += [_named(Problem(k, f"expected_fail.reason {msg}", nearest_line(k, lines)), doc)
                    for msg in reason_problems(reason)]
    return out


def _regex_check(doc: Any, lines: dict[str, int]) -> list[Problem]:

    regex = doc.get("model_regex") if isinstance(doc, dict) else None
    if isinstance(regex, str):
        try:
            re.compile(regex)
        except re.error as exc:
            return [Problem("model_regex", f"not a valid regular expression: {exc}",
                            nearest_line("model_regex", lines))]
    return []


def _read(path: Path, kind: str, base: dict[str, dict]) -> dict:
    """Read and validate one thresholds file; every problem of the file at once."""
    known_metrics.registered()            # every benchmark's tables known

    try:
        doc, lines = load_file(path, _schema(kind),
                               checks=[_rule_checks(base), _drift_check, _regex_check,
                                       _reason_check],
                               what="thresholds file")
    except ConfigError as exc:
        if exc.problems:
            raise error([_named(p, _raw(path)) for p in exc.problems], path) from None
        raise
    doc = doc or {}
    doc["__lines__"] = lines
    return doc


def _raw(path: Path) -> Any:
    try:
        return load_yaml(read_text(path))
    except (ConfigError, yaml.YAMLError):
        return None


def _to_fields(item: dict) -> dict[str, Any]:
    """A validated rule mapping -> Rule keyword arguments (the keys present)."""
    out: dict[str, Any] = {}
    for k, v in item.items():
        if k == "id":
            continue
        if k == "scope":
            out[k] = tuple(sorted(((str(c), tuple(x) if isinstance(x, list) else x)
                                   for c, x in v.items()), key=lambda t: t[0]))
        elif k == "expected_fail":
            cells = v.get("cells", [])
            out[k] = ExpectedFail(v["reason"].strip(),
                                  tuple([cells] if isinstance(cells, str) else cells))
        elif k == "gate":
            out[k] = GateSpec(v["mode"], None if v.get("margin") is None
                              else float(v["margin"]))
        elif k in ("bound", "alpha"):
            out[k] = float(v)
        else:
            out[k] = v.strip() if isinstance(v, str) else v
    return out


def _apply(doc: dict, path: Path, rules: dict[str, Rule],
           optional: bool = False, owners: tuple[str, ...] = ()) -> dict[str, Rule]:
    rules = dict(rules)
    lines = doc.get("__lines__", {})
    for i, item in _rule_items(doc):
        rid = item["id"]
        src = f"{path}:{lines.get(f'rules[{i}]', '')}"
        prev = rules.get(rid)
        fields = _to_fields(item)
        rules[rid] = replace(prev, **fields, source=src) if prev else Rule(
            id=rid, source=src, optional=optional, owners=owners, **fields)
    return rules


def _drift(doc: dict) -> dict[str, Tolerance]:
    return {str(m): Tolerance(float(t.get("abs", 0.0)), float(t.get("rel", 0.0)),
                              bool(t.get("within_ci", False)))
            for m, t in (doc.get("drift") or {}).items()}


def _model_matches(doc: dict, model: str) -> bool:
    globs = doc.get("model")
    globs = [globs] if isinstance(globs, str) else (globs or [])
    if any(fnmatch.fnmatchcase(model, g) for g in globs):
        return True
    regex = doc.get("model_regex")
    return regex is not None and re.fullmatch(str(regex), model) is not None


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
    """The thresholds directory in force: the project's ``thresholds/``, else the
    packaged one (see :mod:`fairness_tests.core.project`)."""
    return find_project().thresholds_dir()


def override_applies(path: str | Path, model: str) -> bool:
    """Does the override file ``path`` (in ``<dir>/models/``) apply to ``model``? The
    file is validated on the way against the rules it may change: the benchmarks' own
    and ``<dir>/default.yaml``'s."""
    default = Path(path).parent.parent / "default.yaml"
    base = _defaults(default)[1] if default.exists() else {}
    return _model_matches(_read(Path(path), "override_file", base), model)


def _defaults(default_path: Path) -> tuple[dict[str, Rule], dict[str, dict],
                                          dict[str, Tolerance], list[str]]:
    """The benchmarks' own rules (:func:`own_rule_files`), then ``default_path``'s: the
    rules, their raw mappings by id (what an override is validated against), the drift
    tolerances and the files read."""
    rules: dict[str, Rule] = {}
    base_raw: dict[str, dict] = {}
    drift: dict[str, Tolerance] = {}
    owners = rule_owners()
    paths = own_rule_files(default_path)
    for path in [*paths, default_path]:
        doc = _read(path, "default_file", dict(base_raw))
        base_raw.update({item["id"]: item for _, item in _rule_items(doc)})
        mine = path in owners and path != default_path
        rules = _apply(doc, path, rules, optional=mine, owners=owners.get(path, ()))
        drift = {**drift, **_drift(doc)}
    return rules, base_raw, drift, [str(p) for p in (*paths, default_path)]


def load_rules(thresholds: str | Path | None = None, model: str | None = None,
               extra: Sequence[tuple[Path, dict]] = ()) -> RuleSet:
    """The registered benchmarks' own rules (:func:`own_rule_files`), then
    ``default.yaml``, then ``extra`` (``(file, thresholds document)``: a benchmark file's
    own rules, ``Family.rule_documents``), then every override in ``models/`` whose model
    pattern matches ``model`` (all override files are validated either way)."""
    default_path, models_dir = _resolve(thresholds)
    rules, base_raw, drift, files = _defaults(default_path)
    for epath, edoc in extra:           # a benchmark file's own rules (already checked)
        base_raw.update({item["id"]: item for _, item in _rule_items(edoc)})
        rules = _apply(edoc, Path(epath), rules, optional=True)
        files.append(str(epath))
    for opath in sorted(models_dir.glob("*.y*ml")) if models_dir and models_dir.is_dir() else []:
        # every override is validated against the defaults, whichever model is run
        odoc = _read(opath, "override_file", base_raw)
        if model is not None and _model_matches(odoc, model):
            rules = _apply(odoc, opath, rules)
            drift = {**drift, **_drift(odoc)}
            files.append(str(opath))
    return RuleSet(rules=list(rules.values()), files=files, model=model, drift=drift)
