"""``fairness-tests store stats | export | import | prune | merge | capabilities``."""
from __future__ import annotations

import json
import re

from ..errors import ConfigError
from .request import STATUSES

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``"90s"``, ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"`` (or plain seconds) -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text or "")
    if not m:
        raise ConfigError(f"bad duration {text!r}; use e.g. 90s, 30m, 12h, 7d, 2w",
                          key="--older-than")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def register(subparsers) -> None:
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

    p = sub.add_parser("capabilities", help="what servers were seen to support (n, logprobs, "
                       "top_logprobs); --forget makes the next run ask them again")
    common(p)
    p.add_argument("--model", default=None)
    p.add_argument("--server", default=None, help="the api_base as recorded")
    p.add_argument("--forget", action="store_true", help="delete the (matching) records")
    p.add_argument("--format", default="table", choices=("table", "json"))
    p.set_defaults(func=cmd_capabilities)

    p = sub.add_parser("merge", help="combine stores recorded apart (e.g. --shard i/N) into one")
    p.add_argument("sources", nargs="+", help="SQLite stores to merge")
    p.add_argument("--into", required=True, help="the store they are merged into (created "
                   "if absent; its own rows are kept)")
    p.set_defaults(func=cmd_merge)


def _open(args):
    from .store import open_store
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


def cmd_capabilities(args) -> int:
    with _open(args) as store:
        if args.forget:
            n = store.forget_capabilities(model=args.model, server=args.server)
            print(f"forgot {n} capability record(s); the next run asks those servers again")
            return 0
        recs = store.capabilities(model=args.model, server=args.server)
    if args.format == "json":
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


def cmd_merge(args) -> int:
    from .store_merge import merge_stores
    c = merge_stores(args.sources, args.into)
    print(f"merged {c['sources']} store(s) into {args.into}: added {c['added']}, "
          f"duplicates kept once {c['duplicates']}, error rows replaced {c['replaced_errors']}, "
          f"error rows not copied {c['kept_errors']}")
    return 0
