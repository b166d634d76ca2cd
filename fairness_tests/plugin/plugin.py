"""The fairness_tests pytest plugin (entry point ``pytest11: fairness_tests``).

Options (group "fairness"): ``--fairness-model`` (repeatable), ``--backend``,
``--replay`` / ``--live``, ``--bbq-dir``, ``--protocol``, ``--repeats``,
``--thresholds``, ``--baseline-model``, ``--fairness-report DIR``, ``--fairness-run DIR``
(use a saved run directory instead of auditing), ``--fairness-on-missing skip|fail``.

Tests ask for one of these arguments and are parametrized from the run:

- ``fairness_verdict`` + ``@pytest.mark.fairness_rules(...)``: one test per verdict row
  (model, rule, cell) of the selected rules; ``fairness_verdict.check()`` passes,
  fails with the full explanation, skips (not evaluable), or runs as a strict xfail
  for a declared expected failure.
- ``fairness_table`` + ``@pytest.mark.fairness_tables(...)``: one test per (model,
  metric table) for drift snapshots with the ``metric_snapshot`` fixture.
- ``fairness_gate_row``: one test per (candidate, gate metric, cell) when
  ``--baseline-model`` is given.

Runs are produced once per session (see :mod:`fairness_tests.plugin.session`).
"""
from __future__ import annotations

import fnmatch
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .session import DEFAULT_MODEL, ENV_SESSION, Settings, Unavailable, produce, session_id

MARKERS = [
    "bbq: intersectional BBQ audit properties",
    "consistency: consistency over repeated runs (MFAA, GTC)",
    "generative: generative audit properties",
    "gate: model-upgrade gate (baseline vs candidate)",
    "fairness_rules(*ids, ids=, metrics=, tables=, exclude=): the decision rules whose "
    "verdict rows parametrize the test",
    "fairness_tables(*names): the metric tables a drift-snapshot test covers",
]
_KEY = pytest.StashKey["FairnessSession"]()


# --------------------------------------------------------------------------- options

def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("fairness", "fairness_tests: models, recordings, thresholds, gate")
    g.addoption("--fairness-model", action="append", default=None, metavar="MODEL",
                help=f"model id to audit (repeatable; default {DEFAULT_MODEL})")
    g.addoption("--backend", "--fairness-backend", dest="backend", default=None, metavar="NAME",
                help="backend for --live runs: transformers, litellm, ... (default: the "
                     "model's own, e.g. the embedded model's transformers backend)")
    g.addoption("--replay", dest="fairness_live", action="store_false", default=False,
                   help="serve only recorded responses, never call a model (default)")
    g.addoption("--live", dest="fairness_live", action="store_true",
                   help="call the model for responses not yet recorded (and record them)")
    g.addoption("--fairness-store", default=None, metavar="PATH",
                help="SQLite response store (default .fairness/store.sqlite or $FAIRNESS_STORE)")
    g.addoption("--bbq-dir", default=None, metavar="DIR", help="BBQ data directory")
    g.addoption("--protocol", action="append", default=None, metavar="NAME",
                help="protocol(s) to run: bbq, consistency, generative (default: all)")
    g.addoption("--repeats", type=int, default=None, metavar="N",
                help="repeats per consistency item (default: the protocol's, 20)")
    g.addoption("--thresholds", default=None, metavar="PATH",
                help="thresholds directory (default.yaml + models/) or default file")
    g.addoption("--baseline-model", default=None, metavar="MODEL",
                help="gate the --fairness-model(s) against this model on the same items")
    g.addoption("--fairness-report", default=None, metavar="DIR",
                help="write runs, verdicts, the gate table and Fairness Cards here")
    g.addoption("--fairness-run", action="append", default=None, metavar="DIR",
                help="use a saved run directory (run.json + tables/) instead of auditing")
    g.addoption("--fairness-on-missing", choices=("skip", "fail"), default=None,
                help="when nothing is recorded to replay: skip the fairness tests "
                     "(default) or fail them")
    parser.addini("fairness_on_missing", "skip | fail (see --fairness-on-missing)",
                  default="skip")


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    if not hasattr(config, "workerinput"):
        # the controller (or a plain run) fixes the session id; xdist workers inherit it
        import os
        import uuid
        os.environ[ENV_SESSION] = uuid.uuid4().hex[:12]
        # live runs: pytest captures the workers' stderr, so the progress lines of every
        # process go to one file the user can follow (one whole line per write)
        if config.option.fairness_live and "FAIRNESS_PROGRESS" not in os.environ \
                and config.option.capture != "no":
            os.environ["FAIRNESS_PROGRESS"] = str(Path(".fairness") / "progress.log")
    config.stash[_KEY] = FairnessSession(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    import os
    if config.option.fairness_live and os.environ.get("FAIRNESS_PROGRESS") not in (None, "off",
                                                                                 "stderr"):
        return [f"fairness: live run; progress lines go to {os.environ['FAIRNESS_PROGRESS']} "
                "(tail -f it), or run with -s to see them here"]
    return []


def _settings(config: pytest.Config) -> Settings:
    o = config.option
    return Settings(
        models=tuple(o.fairness_model or (DEFAULT_MODEL,)),
        backend=o.backend, live=bool(o.fairness_live), bbq_dir=o.bbq_dir,
        protocols=tuple(o.protocol or ()), repeats=o.repeats, store=o.fairness_store,
        thresholds=o.thresholds, baseline=o.baseline_model, report_dir=o.fairness_report,
        runs=tuple(o.fairness_run or ()),
        on_missing=o.fairness_on_missing or config.getini("fairness_on_missing") or "skip")


# --------------------------------------------------------------------------- session state

class FairnessSession:
    """Lazily: rules per model, runs per model, verdicts, gate table."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.settings = _settings(config)
        self._rules: dict[str, Any] = {}
        self._runs: dict[str, Any] = {}
        self._verdicts: dict[str, Any] = {}
        self._gate = None
        self.produce_s = 0.0

    @property
    def cache_root(self) -> Path:
        return Path(self.config.rootpath) / ".fairness" / "runs"

    def rules(self, model: str):
        if model not in self._rules:
            from ..errors import ConfigError
            from ..rules import load_rules
            try:
                self._rules[model] = load_rules(self.settings.thresholds, model)
            except ConfigError as exc:
                raise pytest.UsageError(f"fairness thresholds: {exc}") from None
        return self._rules[model]

    def run(self, model: str):
        if model not in self._runs:
            self.rules(model)                    # validate the rules before any model call
            t0 = time.perf_counter()
            self._runs[model] = produce(self.settings, model, self.cache_root,
                                        session_id(self.config))
            self.produce_s += time.perf_counter() - t0
        return self._runs[model]

    def models(self) -> list[str]:
        ms = list(self.settings.models)
        if self.settings.baseline and self.settings.baseline not in ms:
            ms.append(self.settings.baseline)
        return ms

    def verdicts(self, model: str):
        if model not in self._verdicts:
            from ..rules import evaluate
            run = self.run(model)
            self._verdicts[model] = None if isinstance(run, Unavailable) else \
                evaluate(run.tables, self.rules(model))
        return self._verdicts[model]

    def gate(self):
        """{candidate: gate table} (or Unavailable)."""
        if self._gate is None:
            from .gate import gate_runs
            base = self.run(self.settings.baseline)
            out = {}
            for m in self.settings.models:
                if m == self.settings.baseline:
                    continue
                cand = self.run(m)
                bad = next((r for r in (base, cand) if isinstance(r, Unavailable)), None)
                out[m] = bad if bad else gate_runs(base, cand)
            self._gate = out
        return self._gate


def fairness_session(config: pytest.Config) -> FairnessSession:
    return config.stash[_KEY]


# --------------------------------------------------------------------------- verdict rows

@dataclass
class Verdict:
    model: str
    row: dict
    rule: Any                                 # thresholds.Rule
    all_rows: Any                             # the verdict table of this model (for worst cells)
    on_missing: str = "skip"

    @property
    def status(self) -> str:
        return self.row["status"]

    def message(self) -> str:
        from ..rules.evaluate import worst_cells
        r, rule = self.row, self.rule
        name = f"{'|' if rule.abs else ''}{rule.metric}{'|' if rule.abs else ''}"
        n = ""
        lines = [
            f"{rule.id} {r['status'].upper()} for {self.model}, cell {r['cell']}",
            f"  metric:    {name} = {_fmt(r['value'])} (95% CI {_fmt(r['ci_low'])} .. "
            f"{_fmt(r['ci_high'])}){n} from table {rule.table!r}",
            f"  threshold: {rule.describe()}",
            f"  outcome:   {r['why']}",
            f"  rationale: {' '.join(str(rule.rationale).split())}",
        ]
        w = worst_cells(self.all_rows, rule.id, k=3)
        if len(w):
            lines.append("  worst cells of this rule: " + "; ".join(
                f"{x['cell']} {_fmt(x['value'])} [{_fmt(x['ci_low'])}, {_fmt(x['ci_high'])}] "
                f"({x['status']})" for _, x in w.iterrows()))
        if rule.source:
            lines.append(f"  rule defined at {rule.source}")
        return "\n".join(lines)

    def check(self) -> None:
        if self.status == "not_evaluable":
            pytest.skip(f"{self.rule.id} not evaluable for {self.model} {self.row['cell']}: "
                        f"{self.row['why']}")
        if self.status in ("fail", "expected_fail"):
            pytest.fail(self.message(), pytrace=False)


@dataclass
class Missing:
    reason: str
    on_missing: str

    def check(self) -> None:
        if self.on_missing == "fail":
            pytest.fail(self.reason, pytrace=False)
        pytest.skip(self.reason)


def _fmt(x: Any) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(x):
        return "undefined"
    if math.isinf(x):
        return "UB" if x > 0 else "-UB"
    return f"{x:.4g}"


def _globs(v) -> tuple[str, ...]:
    if v is None:
        return ()
    return (v,) if isinstance(v, str) else tuple(v)


def rule_selected(rule, sel: dict) -> bool:
    """Does a rule match a selector {ids, metrics, tables, exclude: [selectors]}?"""
    for key, attr in (("ids", "id"), ("metrics", "metric"), ("tables", "table")):
        pats = _globs(sel.get(key))
        if pats and not any(fnmatch.fnmatchcase(getattr(rule, attr), p) for p in pats):
            return False
    return not any(rule_selected(rule, ex) for ex in sel.get("exclude", ()))


def _short(model: str) -> str:
    return model


def verdict_params(session: FairnessSession, selector: dict) -> list:
    params = []
    for model in session.settings.models:        # the baseline is only gated against
        run = session.run(model)
        if isinstance(run, Unavailable):
            params.append(pytest.param(Missing(run.reason, session.settings.on_missing),
                                       id=f"{_short(model)}-no-run"))
            continue
        rules = [r for r in session.rules(model).rules if rule_selected(r, selector)]
        table = session.verdicts(model)
        multi_rule = len(rules) > 1
        for rule in rules:
            for _, row in table[table["rule"] == rule.id].iterrows():
                v = Verdict(model, row.to_dict(), rule, table, session.settings.on_missing)
                pid = "-".join(x for x in (_short(model), rule.id if multi_rule else "",
                                           str(row["cell"])) if x)
                marks = []
                reason = rule.expected_fail_reason(str(row["cell"]))
                if reason and row["status"] != "not_evaluable":
                    marks.append(pytest.mark.xfail(strict=True, reason=reason))
                params.append(pytest.param(v, id=pid, marks=marks))
    if not params:
        params.append(pytest.param(Missing("no decision rule selected by this test "
                                           f"({selector}) in the thresholds", "skip"),
                                   id="no-rule"))
    return params


@dataclass
class TableParam:
    model: str
    name: str
    table: Any

    def check(self) -> None:
        """Nothing to skip: the table exists."""


def table_params(session: FairnessSession, names: tuple[str, ...]) -> list:
    params = []
    for model in session.settings.models:
        run = session.run(model)
        if isinstance(run, Unavailable):
            params.append(pytest.param(Missing(run.reason, session.settings.on_missing),
                                       id=f"{_short(model)}-no-run"))
            continue
        present = [n for n in names if n in run.tables]
        for n in present:
            params.append(pytest.param(TableParam(model, n, run.tables[n]),
                                       id=f"{_short(model)}-{n}"))
        if not present:
            params.append(pytest.param(Missing(f"none of the tables {names} is in the run of "
                                               f"{model}", "skip"), id=f"{_short(model)}-none"))
    return params


@dataclass
class GateRow:
    baseline: str
    candidate: str
    row: dict

    def check(self) -> None:
        r = self.row
        if r["verdict"] == "not_evaluable":
            pytest.skip(f"gate {r['metric']} {r['cell']}: not evaluable ({r.get('note', '')})")
        if r["verdict"] == "fail":
            worse = "lower" if r["better"] == "higher" else "higher"
            pytest.fail(
                f"gate {r['metric']} {r['cell']}: candidate {self.candidate} is {worse} than "
                f"baseline {self.baseline} beyond the margin\n"
                f"  baseline {_fmt(r['baseline'])}, candidate {_fmt(r['candidate'])}, "
                f"delta {_fmt(r['delta'])} (paired 95% CI {_fmt(r['ci_low'])} .. "
                f"{_fmt(r['ci_high'])}, n={r['n']} items), margin {r['margin']:g}"
                + (f", McNemar p={r['p_mcnemar']:.3g}" if not math.isnan(r["p_mcnemar"]) else ""),
                pytrace=False)


def gate_params(session: FairnessSession) -> list:
    s = session.settings
    if not s.baseline:
        return [pytest.param(Missing("no --baseline-model given: the upgrade gate is off",
                                     "skip"), id="no-baseline")]
    params = []
    if not [m for m in s.models if m != s.baseline]:
        return [pytest.param(Missing(f"every --fairness-model is the baseline {s.baseline}: "
                                     "nothing to gate", "skip"), id="candidate-is-baseline")]
    for cand, table in session.gate().items():
        if isinstance(table, Unavailable):
            params.append(pytest.param(Missing(table.reason, s.on_missing),
                                       id=f"{cand}-no-run"))
            continue
        for _, r in table.iterrows():
            params.append(pytest.param(GateRow(s.baseline, cand, r.to_dict()),
                                       id=f"{cand}-vs-{s.baseline}-{r['metric']}-{r['cell']}"))
        if table.empty:
            params.append(pytest.param(Missing("the runs carry no per-item records to pair",
                                               "skip"), id=f"{cand}-no-records"))
    return params


# --------------------------------------------------------------------------- hooks

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    if not any(n in names for n in ("fairness_verdict", "fairness_table", "fairness_gate_row")):
        return
    session = fairness_session(metafunc.config)
    if "fairness_verdict" in names:
        m = metafunc.definition.get_closest_marker("fairness_rules")
        sel = dict(m.kwargs) if m else {}
        if m and m.args:
            sel.setdefault("ids", m.args)
        metafunc.parametrize("fairness_verdict", verdict_params(session, sel))
    if "fairness_table" in names:
        m = metafunc.definition.get_closest_marker("fairness_tables")
        metafunc.parametrize("fairness_table", table_params(session, tuple(m.args if m else ())))
    if "fairness_gate_row" in names:
        metafunc.parametrize("fairness_gate_row", gate_params(session))


@pytest.fixture(scope="session")
def fairness(request) -> FairnessSession:
    """The session's FairnessSession (runs, rules, verdicts, gate)."""
    return fairness_session(request.config)


@pytest.fixture
def metric_snapshot(snapshot, request):
    """``assert metric_snapshot == table``: a syrupy snapshot of a metric table, one
    human-readable file per test, compared with the thresholds' drift tolerances."""
    session = fairness_session(request.config)
    model = session.settings.models[0]
    cs = getattr(request.node, "callspec", None)
    if cs is not None and isinstance(cs.params.get("fairness_table"), TableParam):
        model = cs.params["fairness_table"].model
    rules = session.rules(model)
    return snapshot.use_extension(_bound_extension(session, model, rules))


_EXTENSIONS: dict[tuple[int, str], type] = {}


def _bound_extension(session, model, rules):
    from .snapshot import extension_with
    key = (id(session), model)
    if key not in _EXTENSIONS:
        _EXTENSIONS[key] = extension_with(rules.tolerance)
    return _EXTENSIONS[key]


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    session = config.stash.get(_KEY, None)
    if session is None or hasattr(config, "workerinput") or not session.settings.baseline:
        return
    from .gate import format_table
    try:
        tables = session.gate()
    except Exception as exc:  # a summary must never hide the test outcome
        terminalreporter.write_line(f"fairness gate: could not build the summary: {exc}")
        return
    terminalreporter.section("fairness gate")
    for cand, t in tables.items():
        if isinstance(t, Unavailable):
            terminalreporter.write_line(f"{cand}: {t.reason}")
            continue
        for line in format_table(t, session.settings.baseline, cand):
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    fs = config.stash.get(_KEY, None)
    if fs is None or hasattr(config, "workerinput"):
        return
    if fs.settings.report_dir:
        write_report(fs, Path(fs.settings.report_dir))
    sdir = fs.cache_root / session_id(config)
    if sdir.exists():
        shutil.rmtree(sdir, ignore_errors=True)


def write_report(fs: FairnessSession, out: Path) -> None:
    """Runs (with verdicts), the gate table, and a Fairness Card per model."""
    import pandas as pd
    out.mkdir(parents=True, exist_ok=True)
    all_verdicts = []
    notes = []
    for model in fs.models():
        run = fs.run(model)
        slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
        if isinstance(run, Unavailable):
            notes.append(f"{model}: {run.reason}")
            continue
        run.verdicts = fs.verdicts(model)
        run.metadata.setdefault("model", model)
        from ..audit import display_path
        run.metadata["thresholds"] = [display_path(f) for f in fs.rules(model).files]
        run.save(out / slug / "run")
        all_verdicts.append(run.verdicts.assign(model=model))
        try:
            from ..card.files import write_cards
            write_cards(run, out / slug / "card")
        except Exception as exc:  # the card is a report; never lose the rest
            notes.append(f"{model}: card not written: {exc}")
    if all_verdicts:
        pd.concat(all_verdicts).to_csv(out / "verdicts.csv", index=False, float_format="%.10g")
    if fs.settings.baseline:
        for cand, t in fs.gate().items():
            if not isinstance(t, Unavailable):
                t.to_csv(out / f"gate-{cand.replace('/', '_').replace(':', '_')}.csv",
                         index=False, float_format="%.10g")
    (out / "NOTES.txt").write_text("\n".join(notes) + ("\n" if notes else ""))
