"""One RunResult per model per pytest session, shared by xdist workers.

The first process (controller or worker) that needs a model's run takes an
exclusive file lock ``<cache>/<session>/<hash>.lock`` (:mod:`fairness_tests.core.locks`),
computes the run with
:func:`fairness_tests.pipeline.audit.run_audit` and saves it to ``<cache>/<session>/<hash>/``
(:meth:`RunResult.save` writes beside it and renames); every other process waits on
the lock and loads the saved directory. ``<hash>`` is the sha256 of the audit
settings, ``<session>`` the pytest session id shared by the controller and its
workers, so each ``pytest`` invocation asks the store once.

A saved run (``--fairness-run DIR``) is used for the model its metadata names, and
only for that model: a baseline is never served a candidate's run. Its verdicts are
re-evaluated with the session's thresholds, like an audited run's.

A run that cannot be produced (nothing recorded to replay) is recorded as
``unavailable.json`` in the same place, so workers do not retry it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairness_tests.core.locks import exclusive as file_lock
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.plugin.options import Settings
from fairness_tests.run.result import RunResult


@dataclass
class Unavailable:
    """Why a model's run could not be produced; tests skip (or fail) with it."""
    model: str
    reason: str


def settings_hash(options: dict[str, Any]) -> str:
    blob = json.dumps(options, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def record_hint(settings: Settings, model: str) -> str:
    parts = ["pytest --pyargs fairness_tests.suite", "--fairness-live", f"--fairness-model {model}"]
    backend = settings.audit(model).backend
    if backend:
        parts.append(f"--fairness-backend {backend}")
    return " ".join(parts) + "   (or: fairness-tests audit --live ...)"


def saved_run(settings: Settings, model: str) -> RunResult | None:
    """The saved run (--fairness-run) of ``model``, if one was given."""
    for d in settings.runs:
        run = RunResult.load(d)
        if run.metadata.model == model:
            return run
    return None


def produce(settings: Settings, model: str, cache_root: Path, sid: str,
            rules) -> RunResult | Unavailable:
    """The model's RunResult for this session (computed once, shared through the cache),
    with its verdicts from ``rules`` (the session's thresholds for the model)."""
    from fairness_tests.rules.apply import apply_to_run

    run = saved_run(settings, model)
    if run is not None:
        apply_to_run(run, rules)
        return run
    config = settings.audit(model)
    key = settings_hash(dataclasses.asdict(config))
    sdir = cache_root / sid
    out = sdir / key
    with file_lock(sdir / f"{key}.lock"):
        if (out / "run.json").exists():
            return RunResult.load(out)
        if (out / "unavailable.json").exists():
            return Unavailable(**json.loads((out / "unavailable.json").read_text()))
        result = _compute(settings, model, config, rules)
        if isinstance(result, Unavailable):
            tmp = sdir / f"{key}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            (tmp / "unavailable.json").write_text(json.dumps(dataclasses.asdict(result)))
            os.replace(tmp, out)
            return result
        result.save(out)
        return RunResult.load(out)


def _compute(settings: Settings, model: str, config: AuditConfig,
             rules: Any) -> RunResult | Unavailable:
    from fairness_tests.core.errors import MissingResponsesError
    from fairness_tests.pipeline.audit import run_audit
    try:
        return run_audit(config, rules=rules)
    except MissingResponsesError as exc:
        return Unavailable(model, f"nothing recorded to replay for {model}: {exc}. "
                                  f"Record with: {record_hint(settings, model)}")
