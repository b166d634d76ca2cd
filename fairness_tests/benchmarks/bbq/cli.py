"""BBQ's subcommands (its ``Benchmark.commands``): ``fairness-tests bbq filter``,
``fairness-tests bbq score``, and BBQ's ``fairness-tests data fetch`` (:func:`fetch`)."""
from __future__ import annotations

import json
import os
import shlex
import sys

from fairness_tests.benchmarks.bbq import fetch as bbq_fetch
from fairness_tests.benchmarks.bbq.answers import BBQ_AUTHORS, question_only, resolve
from fairness_tests.benchmarks.bbq.config import BBQFilterConfig, BBQScoreConfig
from fairness_tests.benchmarks.bbq.data import ENV_BBQ_DIR, bbq_dir, load_filtered
from fairness_tests.benchmarks.bbq.describe import bbq_info
from fairness_tests.benchmarks.bbq.filter import filter_counts
from fairness_tests.benchmarks.bbq.official import release_lines, release_status, resolve_categories
from fairness_tests.benchmarks.bbq.predictions import read_predictions
from fairness_tests.benchmarks.bbq.score import answers_lines, score_report
from fairness_tests.benchmarks.bbq.tables import bbq_records, bbq_tables
from fairness_tests.cli import scored
from fairness_tests.cli.command import add_command
from fairness_tests.core.fmt import shown, text_table
from fairness_tests.core.paths import display_path
from fairness_tests.pipeline.config_data import DataFetchConfig
from fairness_tests.pipeline.configure import command_line, recorded_config
from fairness_tests.pipeline.scored import scored_run


def register(subparsers) -> None:
    bbq = subparsers.add_parser("bbq", help="BBQ: filter counts, scoring predictions")
    sub = bbq.add_subparsers(dest="bbq_command", required=True)

    add_command(sub, "filter", BBQFilterConfig, cmd_filter,
                help="item counts per dataset, context and polarity")
    add_command(sub, "score", BBQScoreConfig, cmd_score, help="score a predictions JSONL file")


def _load(c: BBQFilterConfig, categories: tuple[str, ...] | None = None):
    return load_filtered(bbq_dir(c.bbq_dir), categories or c.categories, c.bbq_filter,
                         require_official=c.require_official)


def _say_release(data, json_out: bool) -> None:
    """One line per BBQ file read: official release or not (stdout beside a table,
    stderr beside JSON, which carries it as ``data.release``)."""
    for line in release_lines(list(data.release.values())):
        print(line, file=sys.stderr if json_out else sys.stdout)


def _score_inputs(c: BBQScoreConfig):
    """The data, the scored items and the resolved predictions of ``bbq score``: the
    categories asked (default: those the predictions name), every answer mapped to an
    option (:func:`fairness_tests.benchmarks.bbq.answers.resolve`); the authors'
    question-only baseline is scored on ambiguous items only, as they do."""
    raw = read_predictions(c.predictions, c.answer_field)
    categories = resolve_categories(c.categories) if c.categories else raw.categories()
    data, items = _load(c, categories)
    qonly = c.conventions == BBQ_AUTHORS and question_only(raw.field)
    resolved = resolve(raw, data.items, c.conventions, drop_disambiguated=qonly)
    if qonly:
        items = items[items["context"] == "ambig"].reset_index(drop=True)
    return data, items, resolved


def _cell(v: object) -> str:
    """A float to 4 decimals, a list in brackets, None empty."""
    if isinstance(v, float):
        return shown(v, ".4f")
    if isinstance(v, list):
        return "[" + ", ".join(_cell(x) for x in v) + "]"
    return "" if v is None else str(v)


def _table(rows: list[dict], columns: list[str]) -> str:
    return text_table(columns, [[_cell(r.get(c)) for c in columns] for r in rows], rule=False)


def cmd_filter(c: BBQFilterConfig) -> int:
    data, kept = _load(c)
    counts = filter_counts(data.items, kept)
    rows = [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
            for r in counts.to_dict("records")]
    totals = {ds: {"loaded": int((data.items.dataset == ds).sum()),
                   "kept": int((kept.dataset == ds).sum()),
                   "by_context": {c: int(n) for c, n in
                                  kept[kept.dataset == ds].groupby("context").size().items()}}
              for ds in sorted(data.items.dataset.unique())}
    if c.format == "json":
        print(json.dumps({"filter": c.bbq_filter, "rows": rows, "totals": totals,
                          "data": data.provenance()}, indent=2))
    else:
        print(_table(rows, ["dataset", "context", "polarity", "n_loaded", "n_items",
                            "n_reinforcing", "n_counter"]))
        for ds, t in totals.items():
            print(f"{ds}: {t['kept']} of {t['loaded']} items kept ({c.bbq_filter})")
    _say_release(data, c.format == "json")
    return 0


def cmd_score(c: BBQScoreConfig) -> int:
    rules = scored.prepare(c)
    data, items, resolved = _score_inputs(c)
    preds = resolved.table
    tables = bbq_tables(items, preds, n_boot=c.n_boot, seed=c.seed,
                        concentration=c.concentration, min_group_n=c.min_group_n,
                        cluster=c.bbq_cluster, conventions=c.conventions)
    run = _run(c, data, items, resolved, tables,
               bbq_records(items, preds) if c.out else None, rules)
    scored.save(run, c)
    report = score_report(items, preds, tables, provenance=data.provenance(),
                          answers=resolved.report, notes=data.notes)
    if c.format == "json":
        verdicts = scored.json_verdicts(run, c)
        if verdicts is not None:
            report["verdicts"] = verdicts
        print(json.dumps(report, indent=2, allow_nan=False))
        _say_release(data, True)
        return scored.outcome(run, c, text=False)
    _print_report(c, report)
    _say_release(data, False)
    if c.out:
        print(f"\nrun: {c.out}")
    return scored.outcome(run, c, text=True)


def _print_report(c: BBQScoreConfig, report: dict) -> None:
    """The metric tables of ``bbq score`` as text."""
    cols = ["dataset", "context", *(["proxy"] if c.conventions == BBQ_AUTHORS else []),
            "n_items", "accuracy", "accuracy_ci", "s_amb", "s_dis", "sf", "df", "df_smoothed",
            "df_eb", "acc_reinf", "acc_counter", "invalid_rate"]
    print(_table(report["rows"], cols))
    for line in answers_lines(report):
        print(line)
    for r in report["rows"]:
        for metric, note in r["notes"].items():
            proxy = "" if r["proxy"] == "all" else f"/{r['proxy']}"
            print(f"note: {r['dataset']}/{r['context']}{proxy} {metric}: {note}")
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


def _run(c: BBQScoreConfig, data, items, resolved, tables, records, rules):
    """The run of someone's predictions, judged (:mod:`fairness_tests.pipeline.scored`)."""
    return scored_run(
        model=c.model, kind="predictions", file=c.predictions,
        command=command_line(c, ("fairness-tests", "bbq", "score")),
        config=recorded_config(c), rules=rules, tables=tables,
        records={"bbq": records} if records is not None else {},
        infos={"bbq": bbq_info(data, items, resolved.table, filter=c.bbq_filter, seed=c.seed,
                               n_boot=c.n_boot, data_dir=display_path(data.directory),
                               asked=False, cluster=c.bbq_cluster, conventions=c.conventions,
                               answers=resolved.report)})


def fetch(c: DataFetchConfig) -> int:
    """``data fetch`` of the BBQ files (:mod:`fairness_tests.benchmarks.bbq.fetch`): the
    categories asked (``--categories``), each file's release status by its sha256 and
    git blob id."""
    dest = bbq_dir(c.dest)
    files = bbq_fetch.fetch(dest, categories=c.categories,
                            base_url=c.base_url or bbq_fetch.BASE_URL, source=c.from_dir,
                            timeout=c.timeout, log=lambda m: print(m, file=sys.stderr))
    release = {n: release_status(n, f.sha256, f.blob) for n, f in files.items()}
    print(json.dumps({"dest": display_path(dest),
                      "files": {n: {**f.to_dict(), "release": release[n].status}
                                for n, f in files.items()}}, indent=2))
    for line in release_lines(list(release.values())):
        print(line, file=sys.stderr)
    if os.path.abspath(dest) != os.path.abspath(bbq_dir()):
        print(where_line(dest), file=sys.stderr)
    return 0


def where_line(dest: str | os.PathLike) -> str:
    """How to point the BBQ commands and pytest at ``dest``: its absolute path, as a
    shell line (quoted for a POSIX shell) and as the options."""
    path = os.path.abspath(dest)
    return (f"BBQ data in {path}; the BBQ commands and pytest look there after:\n"
            f"    export {ENV_BBQ_DIR}={shlex.quote(path)}\n"
            f"(or pass --bbq-dir {shlex.quote(path)}; pytest: --fairness-bbq-dir)")


__all__ = ["fetch", "register"]
