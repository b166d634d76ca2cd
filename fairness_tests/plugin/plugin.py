"""The fairness_tests pytest plugin (entry point ``pytest11: fairness_tests``): hooks
and fixtures only.

- options and ini keys: :mod:`fairness_tests.plugin.options` (``--fairness-*``,
  ``fairness_*``);
- runs, once per session and shared by xdist workers: :mod:`~fairness_tests.plugin.session`;
- test parameters from verdict rows, tables and gate rows:
  :mod:`~fairness_tests.plugin.parametrize`;
- JUnit properties, the gate table, the GitHub step summary and ``--fairness-report``:
  :mod:`~fairness_tests.plugin.report`.

Tests ask for ``fairness_verdict`` (+ ``@pytest.mark.fairness_rules(...)``),
``fairness_table`` (+ ``@pytest.mark.fairness_tables(...)``, with the
``metric_snapshot`` fixture) or ``fairness_gate_row`` and are parametrized from the run.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any, NoReturn

import pytest

from fairness_tests.pipeline.benchmark import benchmarks
from fairness_tests.plugin import options as O
from fairness_tests.plugin.session_id import ENV_SESSION, session_id

# Loading this module (every pytest run where the package is installed) imports neither
# pandas nor numpy: what needs them (runs, rules, parameters, snapshots) is imported on
# first use, and nothing is computed for a session that uses no fairness option, ini key
# or fixture (tests/test_plugin_cost.py; bench/bench_plugin_cost.py measures it).

#: the plugin's own markers (each benchmark's follow from the registry: :func:`markers`)
MARKERS = [
    "gate: model-upgrade gate (baseline vs candidate)",
    "fairness_rules(*ids, ids=, metrics=, tables=, exclude=): the decision rules whose "
    "verdict rows parametrize the test",
    "fairness_tables(*names): the metric tables a drift-snapshot test covers",
]
_KEY = pytest.StashKey["FairnessSession"]()
_USAGE = pytest.StashKey[str]()          # a usage error met while collecting
_OUTER_SESSION = pytest.StashKey["str | None"]()


def markers() -> list[str]:
    """Every marker line: one per registered benchmark that declares a marker (its name:
    its text), in registry order, then the plugin's own."""
    return [f"{b.name}: {b.marker}" for b in benchmarks() if b.marker] + MARKERS


def pytest_addoption(parser: pytest.Parser) -> None:
    O.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for line in markers():
        config.addinivalue_line("markers", line)
    if not hasattr(config, "workerinput"):
        # the controller (or a plain run) fixes the session id; xdist workers inherit it.
        # The one it replaces (an outer session's, for pytester's in-process runs) comes
        # back in pytest_unconfigure.
        config.stash[_OUTER_SESSION] = os.environ.get(ENV_SESSION)
        os.environ[ENV_SESSION] = uuid.uuid4().hex[:12]
    fs = FairnessSession(config)
    config.stash[_KEY] = fs
    if not O.requested(config):
        return                          # nothing to check now; built on first use
    if not hasattr(config, "workerinput") and fs.settings.live \
            and "FAIRNESS_PROGRESS" not in os.environ and config.option.capture != "no":
        # live runs: pytest captures the workers' stderr, so the progress lines of every
        # process go to one file the user can follow (one whole line per write)
        os.environ["FAIRNESS_PROGRESS"] = str(Path(".fairness") / "progress.log")
    for model in fs.models():           # a bad thresholds file: one clean usage error
        fs.rules(model)
    if fs.settings.dry_run and not hasattr(config, "workerinput"):
        dry_run(fs)


def dry_run(fs: "FairnessSession") -> None:
    """``--fairness-dry-run``: each model's requests, tokens and cost; then stop."""
    from fairness_tests.core.errors import FairnessTestsError
    from fairness_tests.pipeline.dry_run import dry_run as audit_dry_run
    lines = []
    for model in fs.models():
        try:
            lines.append(audit_dry_run(fs.settings.audit(model))[1])
        except FairnessTestsError as exc:
            raise pytest.UsageError(usage_text(exc)) from None
    pytest.exit("\n\n".join(lines), returncode=0)


def usage_text(exc: Exception) -> str:
    """An input error's one line as pytest's usage error, in pytest's words
    (:meth:`~fairness_tests.core.errors.FairnessTestsError.in_pytest`: e.g. a missing
    data directory names ``--fairness-...`` options, not the command line's)."""
    from fairness_tests.core.errors import FairnessTestsError
    return exc.in_pytest() if isinstance(exc, FairnessTestsError) else str(exc)


def end_session(config: pytest.Config, message: str) -> NoReturn:
    """End the session on the usage error ``message`` (exit 4), printed now as pytest
    prints one (``ERROR: ...``), so that it comes first: pytest would print it after the
    session's summary, below the reports of other plugins. syrupy is stopped first: no
    test ran, so it has nothing to report, and under xdist it would warn that no worker
    sent its snapshot report (the workers never ran a test)."""
    if hasattr(config, "workerinput"):   # an xdist worker: the controller says it
        raise pytest.UsageError(message)
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            sys.stderr.write(f"ERROR: {message}\n\n")
    else:
        sys.stderr.write(f"ERROR: {message}\n\n")
    sys.stderr.flush()
    if config.pluginmanager.has_plugin("syrupy"):
        config.pluginmanager.set_blocked("syrupy")
    raise pytest.UsageError()            # printed above: pytest prints no line for it


def pytest_report_header(config: pytest.Config) -> list[str]:
    fs = config.stash.get(_KEY, None)
    if fs and fs.built and fs.settings.live \
            and os.environ.get("FAIRNESS_PROGRESS") not in (None, "off", "stderr"):
        return [f"fairness: live run; progress lines go to {os.environ['FAIRNESS_PROGRESS']} "
                "(tail -f it), or run with -s to see them here"]
    return []


class FairnessSession:
    """Lazily: rules per model, runs per model, the gate tables."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self._settings: O.Settings | None = None
        self._rules: dict[str, Any] = {}
        self._runs: dict[str, Any] = {}
        self._gate: dict[str, Any] | None = None
        self.produce_s = 0.0
        self.sid = session_id(config)       # fixed now: a nested session may change the env

    @property
    def settings(self) -> O.Settings:
        """The session's options (built on first use: a session that uses no fairness
        option, ini key or fixture never builds them)."""
        if self._settings is None:
            self._settings = O.settings(self.config)
        return self._settings

    @property
    def built(self) -> bool:
        return self._settings is not None

    @property
    def cache_root(self) -> Path:
        return Path(self.config.rootpath) / ".fairness" / "runs"

    def rules(self, model: str):
        if model not in self._rules:
            from fairness_tests.core.errors import FairnessTestsError
            from fairness_tests.pipeline.benchmark import extra_rules
            from fairness_tests.rules import load_rules
            try:
                config = self.settings.audit(model)
                self._rules[model] = load_rules(config.thresholds, model,
                                                extra=extra_rules(config))
            except FairnessTestsError as exc:
                raise pytest.UsageError(str(exc)) from None
        return self._rules[model]

    def run(self, model: str):
        if model not in self._runs:
            from fairness_tests.core.errors import FairnessTestsError
            from fairness_tests.plugin.session import produce
            t0 = time.perf_counter()
            try:
                self._runs[model] = produce(self.settings, model, self.cache_root,
                                            self.sid, self.rules(model))
            except FairnessTestsError as exc:
                raise pytest.UsageError(usage_text(exc)) from None
            self.produce_s += time.perf_counter() - t0
        return self._runs[model]

    def models(self) -> list[str]:
        ms = list(self.settings.models)
        if self.settings.baseline and self.settings.baseline not in ms:
            ms.append(self.settings.baseline)
        return ms

    def gate(self) -> dict[str, Any]:
        """{candidate: gate table} (or Unavailable)."""
        if self._gate is None:
            from fairness_tests.plugin.gate import gate_runs
            from fairness_tests.plugin.session import Unavailable
            baseline = self.settings.baseline
            assert baseline is not None     # the callers check for a baseline model first
            base = self.run(baseline)
            out = {}
            for m in self.settings.models:
                if m == self.settings.baseline:
                    continue
                cand = self.run(m)
                bad = next((r for r in (base, cand) if isinstance(r, Unavailable)), None)
                out[m] = bad if bad else gate_runs(base, cand, rules=self.rules(m))
            self._gate = out
        return self._gate


def fairness_session(config: pytest.Config) -> FairnessSession:
    return config.stash[_KEY]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    if not any(n in names for n in ("fairness_verdict", "fairness_table", "fairness_gate_row")):
        return
    try:
        _parametrize(metafunc, names)
    except pytest.UsageError as exc:     # remembered: the collection report raises it again
        metafunc.config.stash[_USAGE] = str(exc)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A usage error found while collecting (no BBQ data, a bad store, an option the
    run rejects) ends the session as pytest's usage errors do: one ``ERROR:`` line and
    exit code 4, not a collection error under framework frames."""
    report = yield
    message = collector.config.stash.get(_USAGE, None)
    if message is not None and report.failed:
        end_session(collector.config, message)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """Under xdist the controller collects nothing and a worker's usage error never
    reaches the terminal: the controller builds the session's runs first (the workers
    then read them from the session cache), so a usage error is its one ``ERROR:`` line
    and exit code 4 there too."""
    config = session.config
    fs = config.stash.get(_KEY, None)
    distributed = config.pluginmanager.hasplugin("dsession") \
        and not hasattr(config, "workerinput")
    if fs is not None and distributed and O.requested(config) and not fs.settings.dry_run:
        try:
            for model in fs.models():
                fs.run(model)
        except pytest.UsageError as exc:
            end_session(config, str(exc))
    return (yield)


def _parametrize(metafunc: pytest.Metafunc, names: list[str]) -> None:
    from fairness_tests.plugin.parametrize import gate_params, table_params, verdict_params
    session = fairness_session(metafunc.config)
    if "fairness_verdict" in names:
        m = metafunc.definition.get_closest_marker("fairness_rules")
        sel = dict(m.kwargs) if m else {}
        if m and m.args:
            sel.setdefault("ids", m.args)
        metafunc.parametrize("fairness_verdict", verdict_params(session, sel))
    if "fairness_table" in names:
        from fairness_tests.plugin.snapshot import stored_ids
        m = metafunc.definition.get_closest_marker("fairness_tables")
        metafunc.parametrize("fairness_table", table_params(
            session, tuple(m.args if m else ()), stored_ids(metafunc.definition)))
    if "fairness_gate_row" in names:
        metafunc.parametrize("fairness_gate_row", gate_params(session))


def pytest_runtest_setup(item: pytest.Item) -> None:
    cs = getattr(item, "callspec", None)
    if cs is not None and "fairness_verdict" in cs.params:
        from fairness_tests.plugin.report import junit_properties
        item.user_properties.extend(junit_properties(cs.params["fairness_verdict"]))


@pytest.fixture(scope="session")
def fairness(request) -> FairnessSession:
    """The session's FairnessSession (runs, rules, verdicts, gate)."""
    return fairness_session(request.config)


@pytest.fixture
def metric_snapshot(snapshot, request):
    """``assert metric_snapshot == table``: a syrupy snapshot of a metric table, one
    human-readable file per test, compared with the thresholds' drift tolerances."""
    from fairness_tests.plugin.parametrize import TableParam
    session = fairness_session(request.config)
    model = session.settings.models[0]
    cs = getattr(request.node, "callspec", None)
    if cs is not None and isinstance(cs.params.get("fairness_table"), TableParam):
        model = cs.params["fairness_table"].model
    return snapshot.use_extension(_bound_extension(session, model, session.rules(model)))


_EXTENSIONS: dict[tuple[int, str], type] = {}


def _bound_extension(session, model, rules):
    from fairness_tests.plugin.snapshot import extension_with
    key = (id(session), model)
    if key not in _EXTENSIONS:
        _EXTENSIONS[key] = extension_with(rules.tolerance)
    return _EXTENSIONS[key]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Controller only: the gate tables (from the runs the workers saved) and the
    ``--fairness-report`` directory, while the session's run cache still exists; the
    cache is removed in :func:`pytest_unconfigure`, after the terminal summary."""
    config = session.config
    fs = config.stash.get(_KEY, None)
    if fs is None or not fs.built or hasattr(config, "workerinput") \
            or not session.testscollected:
        return
    from fairness_tests.plugin.report import append_step_summary, write_report
    gate = fs.gate() if fs.settings.baseline else {}
    if fs.settings.report_dir:
        write_report(fs, Path(fs.settings.report_dir), gate)
    append_step_summary(fs, gate)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Controller only: how each run was made (once per session, whatever the number
    of xdist workers), then the gate tables."""
    fs = config.stash.get(_KEY, None)
    if fs is None or hasattr(config, "workerinput") or not fs.built:
        return
    from fairness_tests.plugin.session import made_lines
    made = made_lines(fs.cache_root / fs.sid)
    if made:
        terminalreporter.section("fairness runs")
        for line in made:
            terminalreporter.write_line(line)
    if fs._gate is None:
        return
    from fairness_tests.plugin.gate import format_table
    from fairness_tests.plugin.session import Unavailable
    terminalreporter.section("fairness gate")
    for cand, t in fs._gate.items():
        if isinstance(t, Unavailable):
            terminalreporter.write_line(f"{cand}: {t.reason}")
            continue
        for line in format_table(t, fs.settings.baseline, cand):
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    if _OUTER_SESSION in config.stash:
        outer = config.stash[_OUTER_SESSION]
        if outer is None:
            os.environ.pop(ENV_SESSION, None)
        else:
            os.environ[ENV_SESSION] = outer
    fs = config.stash.get(_KEY, None)
    if fs is None or not fs.built:
        return
    shutil.rmtree(fs.cache_root / fs.sid, ignore_errors=True)
