"""``fairness-tests audit``: the main job. Runs the audit (replay by default: the
committed recordings, no model call), saves the run directory, writes the Fairness
Card (YAML, Markdown, HTML) and prints the decision rules' outcomes.

Exit code 0 when no rule fails (expected failures and "not evaluable" do not fail
the run), 1 when a rule fails or a declared expected failure passes (as pytest's
strict xfail does), 2 on bad input, 3 when replay misses responses, 4 when --max-cost
was reached (everything recorded is kept; run it again to resume).

``--dry-run`` asks nothing: per protocol and repeat mode it prints the requests,
input/output tokens and cost the run would spend, and what the store already holds.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fairness_tests.card import write_cards
from fairness_tests.pipeline.audit import config_from_options, dry_run, run_audit
from fairness_tests.rules.evaluate import worst_cells
from fairness_tests.stats.bootstrap import json_value


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "audit", help="run the fairness audit and write the run, the card and the report",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None,
                   help="model id (default: the embedded Gemma 3 270M, embedded:gemma-3-270m); "
                        "e.g. openai/gpt-4o-mini with --backend litellm, or a checkpoint dir")
    p.add_argument("--backend", default=None, choices=["transformers", "litellm"],
                   help="backend that answers (and whose recordings are replayed)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--live", action="store_true",
                      help="ask the model for whatever the store lacks (records it)")
    mode.add_argument("--replay", dest="live", action="store_false",
                      help="serve only recorded responses (default)")
    p.add_argument("--api-base", default=None, help="OpenAI-compatible server URL (litellm)")
    p.add_argument("--store", default=None, help="SQLite response store (default "
                   ".fairness/store.sqlite or $FAIRNESS_STORE)")
    p.add_argument("--recordings", nargs="*", default=None,
                   help="JSONL(.gz) recordings to import first (default: the files the "
                        "recordings manifest lists for the model; see --project-dir)")
    p.add_argument("--protocols", nargs="+", default=None,
                   choices=["bbq", "consistency", "generative", "probe"])
    p.add_argument("--bbq-dir", default=None)
    p.add_argument("--bbq-filter", default=None, choices=["intersectional", "none"])
    p.add_argument("--repeats", type=int, default=None, help="consistency repeats (default 20)")
    p.add_argument("--rotations", default=None, choices=["none", "sample", "all"],
                   help="option rotations for position bias (default: on the consistency sample)")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--limit", type=int, default=None,
                   help="smoke run: at most N items per dataset x context x polarity")
    p.add_argument("--suite", default=None, help="generative protocol YAML (default: ours)")
    p.add_argument("--published-grid", default=None, help="a published grid CSV instead")
    p.add_argument("--gen-seeds", type=int, nargs="+", default=None)
    p.add_argument("--gen-max-new-tokens", type=int, default=None)
    p.add_argument("--gen-limit", type=int, default=None)
    p.add_argument("--rubric", default=None, help="published | strict | PATH")
    p.add_argument("--compare-rubric", default=None,
                   help="second rubric for scorer sensitivity (default strict; 'none' to skip)")
    p.add_argument("--consistency-items", default=None, choices=["sample", "all"],
                   help="consistency on the seeded 448-item sample (default) or all items")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="new tokens for a BBQ answer (default 16; reasoning models need more)")
    api = p.add_argument_group("API models (litellm)")
    api.add_argument("--repeat-mode", default=None, choices=["calls", "n", "logprobs"],
                     help="calls: one request per repeat (default, the study's protocol); n: one "
                          "request with n choices; logprobs: one request, repeats drawn from the "
                          "letter distribution (falls back to calls if the provider ignores it)")
    api.add_argument("--reasoning-effort", default=None,
                     help="litellm reasoning_effort for every request, e.g. low | medium | high")
    api.add_argument("--thinking-budget", type=int, default=None,
                     help="thinking budget in tokens (litellm thinking.budget_tokens)")
    api.add_argument("--max-cost", type=float, default=None, metavar="USD",
                     help="stop cleanly when this run's spend reaches USD (exit code 4)")
    p.add_argument("--dry-run", action="store_true",
                   help="print requests, tokens and cost per protocol and repeat mode; ask nothing")
    p.add_argument("--per-cell", type=int, default=None,
                   help="consistency sample: items per dataset x context x polarity (default 56)")
    p.add_argument("--thresholds", default=None, help="thresholds dir or file (default: the "
                   "project's thresholds/, else the packaged one)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--n-boot", type=int, default=None)
    p.add_argument("--bbq-cluster", default=None, choices=["template", "item"],
                   help="BBQ bootstrap unit: whole templates (default) or single items")
    p.add_argument("--gen-cluster", default=None, choices=["prompt", "row"],
                   help="generative bootstrap unit: whole prompts (default) or generations")
    p.add_argument("--batch-size", type=int, default=None,
                   help="local models: rows per forward pass (default 32)")
    p.add_argument("--workers", default=None, metavar="N|auto",
                   help="local models on a CPU: forward passes side by side, each on "
                        "threads/N torch threads (default auto: one per CPU thread)")
    p.add_argument("--rpm", type=float, default=None,
                   help="API requests per minute, shared by every process using this store")
    p.add_argument("--tpm", type=float, default=None,
                   help="API tokens per minute, shared by every process using this store")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="with --live: record only shard I of N of the requests (by key hash) "
                        "into --store; combine the stores with `fairness-tests store merge`")
    p.add_argument("--out", default="report", help="output directory (default: report)")
    p.add_argument("--user-yaml", default=None,
                   help="what a run cannot know for the card (intended use, governance, ...); "
                        "default: the model's fixtures/cards/<model>.yaml of the project, "
                        "else of the package, when it exists")
    p.add_argument("--export", default=None,
                   help="also export the store's rows of this run to this JSONL(.gz) file")
    p.set_defaults(func=cmd_audit)


def config_from_args(args):
    """The parsed ``audit`` options -> :class:`~fairness_tests.pipeline.audit.AuditConfig`."""

    extra = {k: getattr(args, k) for k in (
        "api_base", "bbq_filter", "rotations", "temperature", "limit", "suite",
        "published_grid", "gen_max_new_tokens", "gen_limit", "rubric", "thresholds", "seed",
        "n_boot", "bbq_cluster", "gen_cluster", "batch_size", "workers", "per_cell", "export", "rpm", "tpm", "shard", "consistency_items", "max_tokens",
        "repeat_mode", "reasoning_effort", "thinking_budget", "max_cost")}
    if args.compare_rubric is not None:
        extra["compare_rubric"] = None if args.compare_rubric == "none" else args.compare_rubric
    if args.gen_seeds:
        extra["gen_seeds"] = tuple(args.gen_seeds)
    if args.recordings is not None:
        extra["recordings"] = tuple(args.recordings)
    return config_from_options(model=args.model, backend=args.backend, live=args.live,
                               bbq_dir=args.bbq_dir, protocols=args.protocols,
                               repeats=args.repeats, store=args.store, **extra)


def cmd_audit(args) -> int:

    config = config_from_args(args)
    if args.dry_run:
        print(dry_run(config)[1])
        return 0
    result = run_audit(config)
    if config.shard:
        return _shard_summary(result, config)
    out = Path(args.out)
    result.save(out / "run")
    card = write_cards(result, out / "card", user_yaml=args.user_yaml)
    print(summary(result))
    for note in result.metadata.notes:
        print(note)
    print(f"\nrun: {out / 'run'}\ncard: {', '.join(str(p) for p in _paths(card))}")
    return exit_code(result.verdicts)


def exit_code(verdicts) -> int:
    """1 when a rule fails or a declared expected failure passes (strict), else 0."""
    if verdicts is None or not len(verdicts):
        return 0
    failed = (verdicts["status"] == "fail").any()
    return 1 if failed or len(unexpected_passes(verdicts)) else 0


def unexpected_passes(verdicts):
    """Verdict rows that pass although the rule declares an expected failure for them."""
    return verdicts[(verdicts["status"] == "pass")
                    & verdicts["why"].astype(str).str.contains("declared expected_fail", regex=False)]


def _shard_summary(result, config) -> int:
    """A sharded run records; its tables (of one shard) are not a result."""
    req = result.metadata.requests
    parts = [f"{k}: {req[k + '_shard']} of {req[k]} requests ({req[k + '_new']} new)"
             for k in req if f"{k}_shard" in req]
    print(f"recorded shard {config.shard} into {config.store or 'the default store'}: "
          + "; ".join(parts))
    print("no tables or card from one shard: merge the shard stores with `fairness-tests "
          "store merge S1 S2 ... --into S`, then `fairness-tests audit --store S`")
    return 0


def _paths(card) -> list:
    return list(card.paths.values())


def summary(result) -> str:
    """One line per rule: how many cells pass / fail / expected_fail / not evaluable,
    and the worst failing cell (furthest on the wrong side of the bound, in the rule's
    own direction); then every declared expected failure that passed."""

    v = result.verdicts
    if v is None or not len(v):
        return "no decision rule was evaluated"
    lines = [f"{'rule':38} {'pass':>5} {'fail':>5} {'xfail':>5} {'n/e':>5}  worst failing cell"]
    for rule, g in v.groupby("rule", sort=False):
        counts = g["status"].value_counts()
        bad = worst_cells(g[g["status"].isin(["fail", "expected_fail"])], rule, k=1)
        worst = ""
        if len(bad):
            r = bad.iloc[0]
            val = json_value(r[r["compared"]])
            worst = f"{r['cell']}: {r['compared']} {val:.3g}" if isinstance(val, float) \
                else f"{r['cell']}"
            worst += f" ({r['op']} {r['bound']})"
        lines.append(f"{rule:38} {counts.get('pass', 0):>5} {counts.get('fail', 0):>5} "
                     f"{counts.get('expected_fail', 0):>5} {counts.get('not_evaluable', 0):>5}  "
                     f"{worst}")
    for _, r in unexpected_passes(v).iterrows():
        lines.append(f"error: {r['rule']} {r['cell']} is declared an expected failure but "
                     "passed: remove the declaration (or the model regressed back)")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    from fairness_tests.cli.main import main
    sys.exit(main(["audit", *sys.argv[1:]]))
