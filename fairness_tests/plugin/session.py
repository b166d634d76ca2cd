"""One RunResult per model per pytest session, shared by xdist workers.

The first process (controller or worker) that needs a model's run takes an
exclusive file lock ``<cache>/<session>/<hash>.lock`` (:mod:`fairness_tests.locks`), computes
the run with ``fairness_tests.audit.run_audit`` and saves it to
``<cache>/<session>/<hash>/`` (written to a temporary directory, then renamed);
every other process waits on the lock and loads the saved directory. ``<hash>`` is
the sha256 of the audit settings, ``<session>`` the pytest session id shared by the
controller and its workers, so each ``pytest`` invocation asks the store once.

A run that cannot be produced (nothing recorded to replay, audit not available) is
recorded as ``unavailable.json`` in the same place, so workers do not retry it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..locks import exclusive as file_lock
from ..run import RunResult

ENV_SESSION = "FAIRNESS_PYTEST_SESSION"
DEFAULT_MODEL = "embedded:gemma-3-270m"


@dataclass(frozen=True)
class Settings:
    models: tuple[str, ...] = (DEFAULT_MODEL,)
    backend: str | None = None
    live: bool = False
    bbq_dir: str | None = None
    protocols: tuple[str, ...] = ()
    repeats: int | None = None
    store: str | None = None
    thresholds: str | None = None
    baseline: str | None = None
    report_dir: str | None = None
    runs: tuple[str, ...] = ()           # saved run directories to use instead of auditing
    on_missing: str = "skip"             # "skip" | "fail" when nothing can be replayed

    def audit_options(self, model: str) -> dict[str, Any]:
        """The keyword arguments given to ``fairness_tests.audit.config_from_options``."""
        return dict(model=model, backend=self.backend, live=self.live, bbq_dir=self.bbq_dir,
                    protocols=list(self.protocols) or None, repeats=self.repeats,
                    store=self.store)


@dataclass
class Unavailable:
    """Why a model's run could not be produced; tests skip (or fail) with it."""
    model: str
    reason: str


def settings_hash(options: dict[str, Any]) -> str:
    blob = json.dumps(options, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def session_id(config) -> str:
    """Shared by an xdist controller and its workers: the controller sets the env
    variable in pytest_configure (workers inherit it); xdist's testrunuid as fallback."""
    sid = os.environ.get(ENV_SESSION)
    if sid:
        return sid
    winput = getattr(config, "workerinput", None)
    if winput and winput.get("testrunuid"):
        return str(winput["testrunuid"])
    sid = uuid.uuid4().hex[:12]
    os.environ[ENV_SESSION] = sid
    return sid


def call_audit(options: dict[str, Any]) -> RunResult:
    """``fairness_tests.audit.run_audit(config_from_options(**options))``.

    The contract with audit.py: ``config_from_options(model, backend, live, bbq_dir,
    protocols, repeats, store)`` builds its config (None = its default), and
    ``run_audit(config)`` returns a RunResult, raising MissingResponsesError in replay
    mode when responses were never recorded."""
    audit = importlib.import_module("fairness_tests.audit")
    make = getattr(audit, "config_from_options", None)
    if make is not None:
        config = make(**options)
    elif hasattr(audit, "AuditConfig") and dataclasses.is_dataclass(audit.AuditConfig):
        names = {f.name for f in dataclasses.fields(audit.AuditConfig)}
        config = audit.AuditConfig(**{k: v for k, v in options.items()
                                      if k in names and v is not None})
    else:
        config = options
    return audit.run_audit(config)


def record_hint(settings: Settings, model: str) -> str:
    parts = ["pytest", "--live", f"--fairness-model {model}"]
    if settings.backend:
        parts.append(f"--backend {settings.backend}")
    return " ".join(parts) + " fairness_tests/suite   (or: fairness-tests audit --live ...)"


def produce(settings: Settings, model: str, cache_root: Path, sid: str) -> RunResult | Unavailable:
    """The model's RunResult for this session (computed once, shared through the cache)."""
    for d in settings.runs:                      # explicit saved runs win
        r = RunResult.load(d)
        if r.metadata.get("model", model) == model or len(settings.runs) == 1 and \
                len(settings.models) == 1:
            return r
    options = settings.audit_options(model)
    key = settings_hash(options)
    sdir = cache_root / sid
    out = sdir / key
    with file_lock(sdir / f"{key}.lock"):
        if (out / "run.json").exists():
            return RunResult.load(out)
        if (out / "unavailable.json").exists():
            return Unavailable(**json.loads((out / "unavailable.json").read_text()))
        result = _compute(settings, model, options)
        tmp = sdir / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(result, Unavailable):
            tmp.mkdir(parents=True)
            (tmp / "unavailable.json").write_text(json.dumps(dataclasses.asdict(result)))
        else:
            result.metadata.setdefault("model", model)
            result.save(tmp)                     # metadata, tables, verdicts, records
        os.replace(tmp, out)
        return result if isinstance(result, Unavailable) else RunResult.load(out)


def _compute(settings: Settings, model: str, options: dict[str, Any]) -> RunResult | Unavailable:
    from ..errors import MissingResponsesError
    try:
        return call_audit(options)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("fairness_tests"):
            return Unavailable(model, f"the audit module is not available ({exc.name}); "
                                      "nothing to run yet")
        raise
    except MissingResponsesError as exc:
        return Unavailable(model, f"nothing recorded to replay for {model}: {exc}. "
                                  f"Record with: {record_hint(settings, model)}")
