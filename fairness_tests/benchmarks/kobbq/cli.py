"""``fairness-tests kobbq score FILE``: KoBBQ predictions made elsewhere (the authors'
evaluation TSV or JSONL, :mod:`fairness_tests.benchmarks.kobbq.score`), scored into the
audit's tables and judged like an audited run: with ``--out`` a run directory that
``card``, ``gate``, ``compare`` and ``pytest --fairness-run`` read. Exit codes as every
command's: 0 every rule holds, 1 a rule fails, 2 bad input (one line naming the file,
line or key), 5 nothing evaluated."""
from __future__ import annotations

from fairness_tests.benchmarks.kobbq import score as S
from fairness_tests.benchmarks.kobbq.config import KoBBQScoreConfig
from fairness_tests.cli import scored
from fairness_tests.cli.command import add_command
from fairness_tests.core.fmt import shown, text_table
from fairness_tests.pipeline.configure import command_line, recorded_config
from fairness_tests.pipeline.scored import scored_run

#: the columns ``kobbq score`` prints: (metric, heading)
SHOWN = (("kobbq_accuracy", "accuracy"), ("kobbq_diff_bias", "diff_bias"),
         ("kobbq_ooc_rate", "ooc_rate"))


def register(subparsers) -> None:
    kobbq = subparsers.add_parser("kobbq", help="KoBBQ (Korean BBQ): scoring predictions")
    sub = kobbq.add_subparsers(dest="kobbq_command", required=True)
    add_command(sub, "score", KoBBQScoreConfig, cmd_score,
                help="score KoBBQ predictions made elsewhere (the authors' TSV or JSONL)",
                description=__doc__.split("\n\n")[0])


def cmd_score(c: KoBBQScoreConfig) -> int:
    rules = scored.prepare(c)
    s = S.scored(c.predictions, c.data_dir, c.prompt_id, c.kobbq_cluster, c.n_boot, c.seed)
    run = scored_run(
        model=c.model, kind="predictions", file=c.predictions,
        command=command_line(c, ("fairness-tests", "kobbq", "score")),
        config=recorded_config(c), rules=rules, tables=s.tables,
        records={"kobbq": S.records(s, c.prompt_id)},
        infos={"kobbq": S.scored_info(s, c.prompt_id, c.kobbq_cluster, c.n_boot, c.seed)})
    scored.save(run, c)
    print(summary(s.tables["kobbq"]))
    info = run.metadata.infos["kobbq"]
    print(f"\n{info.n_answers} answers of {info.n_samples} test samples; "
          f"{info.notes[0]}")
    for name, release in sorted(s.data.release.items()):
        print(f"{name}: {release}")
    if c.out:
        print(f"\nrun: {c.out}")
    return scored.outcome(run, c, text=True)


def summary(table) -> str:
    """The ``kobbq`` table as text: per category and context, each metric of
    :data:`SHOWN` with its interval (``value [low, high]``) and the answers counted."""
    t = table.set_index(["category", "context", "metric"])
    keys = list(dict.fromkeys((k[0], k[1]) for k in t.index))
    rows = []
    for cat, ctx in keys:
        cells = []
        n = ""
        for metric, _ in SHOWN:
            if (cat, ctx, metric) not in t.index:
                cells.append("")
                continue
            r = t.loc[(cat, ctx, metric)]
            cells.append(f"{shown(r['value'], '.4f')} [{shown(r['ci_low'], '.4f')}, "
                         f"{shown(r['ci_high'], '.4f')}]")
            n = n or str(int(r["n"]))
        rows.append([cat, ctx, n, *cells])
    return text_table(["category", "context", "n", *(h for _, h in SHOWN)], rows, rule=False)


__all__ = ["register"]
