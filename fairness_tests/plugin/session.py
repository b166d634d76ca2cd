"""One RunResult per model per pytest session, shared by xdist workers.

The first process (controller or worker) that needs a model's run takes an exclusive
file lock ``<cache>/<session>/<hash>.lock`` (:mod:`fairness_tests.core.locks`) and
makes the run: it audits (:func:`fairness_tests.pipeline.audit.run_audit`), saves the
run directory ``<cache>/<session>/<hash>/run/`` and reads it back, so that every
process sees the run as a saved run is read; or, with ``--fairness-run DIR``, it reads
that directory and re-evaluates its verdicts with the session's thresholds. It then
writes the result as ``run.pickle`` beside it (pandas frames as they are: reading it
is a fraction of reading the CSV files again) and ``made-by.json`` (which process,
how, in how many seconds). Every other process waits on the lock (bounded:
:func:`fairness_tests.core.locks.default_timeout_s`) and reads
``run.pickle``, leaving a ``used-by-*`` mark; the controller's terminal summary says
how each run was made and how many processes shared it (:func:`made_lines`).
``<hash>`` is the sha256 of the model's audit settings (and of the saved run's path),
``<session>`` the pytest session id shared by the controller and its workers: each
``pytest`` invocation makes each run once, and another configuration makes its own.

A saved run (``--fairness-run DIR``) is used for the model its metadata names, and
only for that model: a baseline is never served a candidate's run.

A run that cannot be produced (nothing recorded to replay) is recorded as
``unavailable.json`` in the same place, so workers do not retry it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairness_tests.core.locks import exclusive as file_lock
from fairness_tests.pipeline.benchmark import data_notes
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


def saved_run_dir(settings: Settings, model: str) -> Path | None:
    """The saved run directory (--fairness-run) of ``model``, if one was given (read:
    its ``run.json`` only)."""
    for d in settings.runs:
        meta = Path(d) / "run.json"
        try:
            named = json.loads(meta.read_text(encoding="utf-8")).get("model")
        except (OSError, ValueError, AttributeError):
            named = RunResult.load(d).metadata.model      # raises the DataError naming it
        if named == model:
            return Path(d)
    return None


def produce(settings: Settings, model: str, cache_root: Path, sid: str,
            rules) -> RunResult | Unavailable:
    """The model's RunResult for this session (made once, shared through the cache),
    with its verdicts from ``rules`` (the session's thresholds for the model)."""
    config = settings.audit(model)
    saved = saved_run_dir(settings, model)
    key = _key(config, saved)
    sdir = cache_root / sid
    out = sdir / key
    # bounded ($FAIRNESS_LOCK_TIMEOUT_S): the LockTimeout names the lock file and the run
    with file_lock(sdir / f"{key}.lock",
                   what=f"the run of {model} that another process of this session makes"):
        if (out / "run.pickle").exists():
            _mark(out / f"used-by-{_worker()}-{os.getpid()}")
            with open(out / "run.pickle", "rb") as fh:
                return pickle.load(fh)
        if (out / "unavailable.json").exists():
            return Unavailable(**json.loads((out / "unavailable.json").read_text()))
        t0 = time.perf_counter()
        result = _make(settings, model, config, rules, saved, out)
        out.mkdir(parents=True, exist_ok=True)
        if isinstance(result, Unavailable):
            (out / "unavailable.json").write_text(json.dumps(dataclasses.asdict(result)))
            return result
        tmp = out / f".run.pickle.tmp-{os.getpid()}"
        with open(tmp, "wb") as fh:
            pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, out / "run.pickle")
        (out / "made-by.json").write_text(json.dumps({
            "model": model, "how": f"read from {saved}" if saved else "audited",
            "by": _worker(), "seconds": round(time.perf_counter() - t0, 1),
            "notes": data_notes(getattr(result, "metadata", None))}))
        return result


def _key(config: AuditConfig, saved: Path | None) -> str:
    return settings_hash({"config": dataclasses.asdict(config),
                          "saved": str(saved.resolve()) if saved else None})


def _make(settings: Settings, model: str, config: AuditConfig, rules: Any,
          saved: Path | None, out: Path) -> RunResult | Unavailable:
    from fairness_tests.rules.apply import apply_to_run
    if saved is not None:
        run = RunResult.load(saved)
        apply_to_run(run, rules)
        return run
    result = _compute(settings, model, config, rules)
    if isinstance(result, Unavailable):
        return result
    result.save(out / "run")
    return RunResult.load(out / "run")


def made_lines(sdir: Path) -> list[str]:
    """One line per run made in the session (``sdir``): how, by which process, in how
    many seconds, and how many other processes read it; then its data notes
    (:func:`~fairness_tests.pipeline.benchmark.data_notes`: e.g. each BBQ file official
    release or not)."""
    lines = []
    for made in sorted(sdir.glob("*/made-by.json")):
        m = json.loads(made.read_text())
        users = len(list(made.parent.glob("used-by-*")))
        lines.append(f"{m['model']}: {m['how']} once ({m['by']}, {m['seconds']:g} s); "
                     f"{users} other process{'es' if users != 1 else ''} read it")
        lines += [f"{m['model']}: {n}" for n in m.get("notes", [])]
    return lines


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def _mark(path: Path) -> None:
    path.write_text("")


def _compute(settings: Settings, model: str, config: AuditConfig,
             rules: Any) -> RunResult | Unavailable:
    from fairness_tests.core.errors import MissingResponsesError
    from fairness_tests.pipeline.audit import run_audit
    try:
        return run_audit(config, rules=rules)
    except MissingResponsesError as exc:
        return Unavailable(model, f"nothing recorded to replay for {model}: {exc}. "
                                  f"Record with: {record_hint(settings, model)}")
