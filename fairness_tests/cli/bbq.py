"""``fairness-tests bbq filter``, ``fairness-tests bbq score`` and
``fairness-tests data fetch``."""
from __future__ import annotations

import json
import sys

from fairness_tests.core.paths import bbq_dir, display_path
from fairness_tests.metrics.bbq_tables import bbq_records, bbq_tables
from fairness_tests.pipeline.bbq_info import bbq_info
from fairness_tests.pipeline.scored import write_scored_run
from fairness_tests.protocols.bbq.data import load_bbq
from fairness_tests.protocols.bbq.fetch import BASE_URL, fetch
from fairness_tests.protocols.bbq.filter import filter_counts, filter_items
from fairness_tests.protocols.bbq.predictions import check_against, read_predictions
from fairness_tests.report.bbq_score import score_report


def register(subparsers) -> None:
    bbq = subparsers.add_parser("bbq", help="intersectional BBQ audit: filter counts, scoring")
    sub = bbq.add_subparsers(dest="bbq_command", required=True)

    def common(p):
        p.add_argument("--data", "--bbq-dir", dest="data", default=None,
                       help="BBQ directory in the official layout (default: $FAIRNESS_BBQ_DIR "
                            "or ../shared/bbq)")
        p.add_argument("--filter", default="intersectional", choices=("intersectional", "none"),
                       help="item filter (default: intersectional)")
        p.add_argument("--format", default="table", choices=("json", "table"))
        p.add_argument("--require-official", action="store_true",
                       help="fail unless every file's sha256 is the official release's")

    f = sub.add_parser("filter", help="item counts per dataset, context and polarity")
    common(f)
    f.set_defaults(func=cmd_filter)

    s = sub.add_parser("score", help="score a predictions JSONL file")
    common(s)
    s.add_argument("--predictions", required=True, help="JSONL: one answer a line")
    s.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    s.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples (default 2000)")
    s.add_argument("--cluster", default="template", choices=("template", "item"),
                   help="bootstrap unit: whole templates (dataset, question_index; default) "
                        "or single items")
    s.add_argument("--concentration", type=float, default=1.0,
                   help="Dirichlet concentration of smoothed DF (default 1.0)")
    s.add_argument("--min-group-n", type=int, default=30,
                   help="groups with fewer items get a warning (default 30)")
    s.add_argument("--out", default=None, metavar="DIR",
                   help="also write a run directory (tables, verdicts, records, metadata) "
                        "that the card, the gate, compare and pytest --fairness-run read")
    s.add_argument("--model", default=None,
                   help="model id the predictions are of (run metadata; selects the "
                        "model's threshold overrides)")
    s.add_argument("--thresholds", default=None, help="thresholds dir or file for --out")
    s.set_defaults(func=cmd_score)

    data = subparsers.add_parser("data", help="data sets")
    dsub = data.add_subparsers(dest="data_command", required=True)
    fe = dsub.add_parser("fetch", help="download the official BBQ files and verify sha256")
    fe.add_argument("--dest", required=True, help="directory to write the files to")
    fe.add_argument("--base-url", default=None,
                    help="mirror of https://raw.githubusercontent.com/nyu-mll/BBQ/<commit>")
    fe.add_argument("--timeout", type=float, default=60.0)
    fe.set_defaults(func=cmd_fetch)


def _load(args):
    data = load_bbq(bbq_dir(args.data), require_official=args.require_official)
    return data, filter_items(data.items, args.filter)


def _table(rows: list[dict], columns: list[str]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4f}"
        if isinstance(v, list):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return "" if v is None else str(v)
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) if cells else len(c)
              for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(x.ljust(w) for x, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def cmd_filter(args) -> int:
    data, kept = _load(args)
    counts = filter_counts(data.items, kept)
    rows = [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
            for r in counts.to_dict("records")]
    totals = {ds: {"loaded": int((data.items.dataset == ds).sum()),
                   "kept": int((kept.dataset == ds).sum()),
                   "by_context": {c: int(n) for c, n in
                                  kept[kept.dataset == ds].groupby("context").size().items()}}
              for ds in sorted(data.items.dataset.unique())}
    if args.format == "json":
        print(json.dumps({"filter": args.filter, "rows": rows, "totals": totals,
                          "data": data.provenance()}, indent=2))
    else:
        print(_table(rows, ["dataset", "context", "polarity", "n_loaded", "n_items",
                            "n_reinforcing", "n_counter"]))
        for ds, t in totals.items():
            print(f"{ds}: {t['kept']} of {t['loaded']} items kept ({args.filter})")
    return 0


def cmd_score(args) -> int:
    data, items = _load(args)
    preds = read_predictions(args.predictions)
    check_against(preds, data.items, args.predictions)
    tables = bbq_tables(items, preds, n_boot=args.n_boot, seed=args.seed,
                        concentration=args.concentration, min_group_n=args.min_group_n,
                        cluster=args.cluster)
    if args.out:
        _write_run(args, data, items, preds, tables, bbq_records(items, preds))
    report = score_report(items, preds, tables, provenance=data.provenance())
    if args.format == "json":
        print(json.dumps(report, indent=2, allow_nan=False))
        return 0
    cols = ["dataset", "context", "n_items", "accuracy", "accuracy_ci", "s_amb", "s_dis", "sf",
            "df", "df_smoothed", "df_eb", "acc_reinf", "acc_counter", "invalid_rate"]
    print(_table(report["rows"], cols))
    for r in report["rows"]:
        for metric, note in r["notes"].items():
            print(f"note: {r['dataset']}/{r['context']} {metric}: {note}")
    miss = report["missing"]
    if miss["n_items"]:
        print(f"missing: {miss['n_items']} items have no answer (not scored): "
              f"{miss['by_dataset']}")
    if "consistency" in report:
        print()
        print(_table(report["consistency"]["rows"],
                     ["dataset", "context", "n_items", "mfaa_mean", "mfaa_std", "mfaa_min",
                      "mfaa_max", "gtc_mean", "gtc_std", "gtc_min", "gtc_max", "flagged"]))
    if "position" in report:
        print()
        print(_table(report["position"], ["dataset", "context", "position_bias",
                                          "position_share_a", "position_share_b",
                                          "position_share_c"]))
    if args.out:
        print(f"\nrun: {args.out}")
    return 0


def _write_run(args, data, items, preds, tables, records) -> None:
    """The run directory of someone's predictions (:mod:`fairness_tests.pipeline.scored`)."""

    write_scored_run(
        args.out, model=args.model, kind="predictions", file=args.predictions,
        command=["bbq", "score", "--predictions", display_path(args.predictions),
                 "--data", display_path(data.directory), "--filter", args.filter,
                 "--seed", str(args.seed), "--n-boot", str(args.n_boot),
                 "--cluster", args.cluster, "--concentration", str(args.concentration),
                 "--min-group-n", str(args.min_group_n)],
        config={"filter": args.filter, "n_boot": args.n_boot, "seed": args.seed,
                "cluster": args.cluster, "concentration": args.concentration,
                "min_group_n": args.min_group_n},
        thresholds=args.thresholds, tables=tables, records={"bbq": records},
        bbq=bbq_info(data, items, preds, filter=args.filter, seed=args.seed,
                     n_boot=args.n_boot, data_dir=display_path(data.directory),
                     asked=False, cluster=args.cluster))


def cmd_fetch(args) -> int:
    digests = fetch(args.dest, base_url=args.base_url or BASE_URL, timeout=args.timeout,
                    log=lambda m: print(m, file=sys.stderr))
    print(json.dumps({"dest": args.dest, "sha256": digests}, indent=2))
    return 0


__all__ = ["register"]
