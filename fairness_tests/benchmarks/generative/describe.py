"""What a run records about its generative protocol
(:class:`~fairness_tests.run.metadata.GenerativeInfo`), for the audit (a suite or the
published grid) and for ``generative score`` (someone's generations) alike."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd

from fairness_tests.benchmarks.generative.info import GenerativeInfo
from fairness_tests.core.io import sha256_file
from fairness_tests.core.paths import display_path
from fairness_tests.run.metadata import Bootstrap
from fairness_tests.scoring.rubric import Rubric
from fairness_tests.stats.permutation import DEFAULT_N_PERM


def bootstrap_info(n_boot: int, seed: int, cluster: str) -> Bootstrap:
    method = ("percentile bootstrap, prompts (family x paraphrase x occupation x slice) "
              "resampled, the interval read at the few-clusters level (t with C - 1 df, "
              "variance x C/(C - 1))" if cluster == "prompt" else
              "generations resampled (Wilson intervals for rates, percentile bootstrap "
              "otherwise)")
    return Bootstrap(resamples=n_boot, seed=seed, cluster=cluster,
                     permutations=DEFAULT_N_PERM,
                     method=method + "; worst slice, disparity and refusal gap also by a "
                            "permutation test of no difference between slices")


def generative_info(records: pd.DataFrame, rubric: Rubric, other: Rubric | None, *,
                    n_boot: int, seed: int, name: str, suite: Any = None,
                    suite_hash: str | None = None, system_prompt: str | None = None,
                    n_grid_full: int | None = None, reductions: list[str] | None = None,
                    gen_max_new_tokens: int | None = None,
                    cluster: str = "prompt") -> GenerativeInfo:
    """``suite``: the :class:`~fairness_tests.benchmarks.generative.suite.Suite` that was
    run (None for the published grid or someone's outputs)."""
    decoding = sorted({(float(t), float(p)) for t, p in
                       zip(records["temperature"], records["top_p"], strict=True)})
    info = GenerativeInfo(
        suite=name, suite_hash=suite_hash, n_generations=int(len(records)),
        n_error=int((records["status"] == "error").sum()),
        n_refused_by_provider=int((records["status"] == "refused").sum()),
        rubric=rubric.name, rubric_semantics=rubric.semantics,
        rubric_file=display_path(rubric.path) if rubric.path else None,
        rubric_sha256=sha256_file(rubric.path) if rubric.path else None,
        compare_rubric=other.name if other is not None else None,
        bootstrap=bootstrap_info(n_boot, seed, cluster),
        system_prompt=system_prompt, n_grid_full=n_grid_full,
        reductions=list(reductions or []),
        decoding=[{"temperature": t, "top_p": p} for t, p in decoding],
        seeds=sorted({int(s) for s in records["seed"]}))
    if "max_new_tokens" in records:
        info.max_new_tokens = int(records["max_new_tokens"].max())
    if suite is not None:
        cap = gen_max_new_tokens
        info.decoding = [{**asdict(r), "max_new_tokens": min(r.max_new_tokens,
                                                             cap or r.max_new_tokens)}
                         for r in suite.decoding]
        info.max_new_tokens = max(d["max_new_tokens"] for d in info.decoding)
        info.families = [{"id": f.id, "name": f.name,
                          "paraphrases": [str(t) for _, t in sorted(dict(f.paraphrases).items())]}
                         for f in suite.families]
        info.occupations = list(suite.occupations)
        info.attributes = {k: list(v) for k, v in suite.attributes.items()}
        info.slices = suite.slices()
        info.insertion_rule = suite.insertion
        info.declared = {"decoding": [asdict(r) for r in suite.decoding],
                         "seeds": list(suite.seeds)}
    return info
