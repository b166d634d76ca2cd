"""What a run records about its BBQ protocol (:class:`~fairness_tests.run.metadata.BBQInfo`),
derived from the data, the items and the predictions, so the audit and ``bbq score``
describe the same predictions the same way."""
from __future__ import annotations

import pandas as pd

from fairness_tests.benchmarks.bbq.data import BBQData
from fairness_tests.benchmarks.bbq.filter import filter_counts
from fairness_tests.benchmarks.bbq.info import BBQInfo, ConsistencyInfo
from fairness_tests.benchmarks.bbq.official import ReleaseStatus, recorded_release, release_lines
from fairness_tests.benchmarks.bbq.prompt import prompt_text
from fairness_tests.run.metadata import Bootstrap
from fairness_tests.stats.permutation import DEFAULT_N_PERM

PROMPT_DESCRIPTION = ("zero-shot, options (a) (b) (c), answer with one letter; correct "
                      "answer never shown")


def data_release(b: BBQInfo) -> list[ReleaseStatus]:
    """Per BBQ file of a run: official release or not, as the run recorded it (from
    the digests of older runs)."""
    return recorded_release(b.sha256, b.git_blob, b.release)


def data_release_lines(b: BBQInfo | None) -> list[str]:
    """The console lines of :func:`data_release` (none for a run without BBQ)."""
    return release_lines(data_release(b)) if b is not None else []


def bootstrap_info(n_boot: int, seed: int, cluster: str) -> Bootstrap:
    unit = {"template": "templates (dataset, question_index) resampled, the interval read "
                        "at the few-clusters level (t with C - 1 df, variance x C/(C - 1))",
            "item": "items resampled"}[cluster]
    return Bootstrap(resamples=n_boot, seed=seed, cluster=cluster,
                     permutations=DEFAULT_N_PERM,
                     method=f"percentile bootstrap, {unit}; SF, DF and position bias also "
                            "by a permutation test of no difference (group labels within "
                            "templates, rotations within items)")


def rotations_mode(preds: pd.DataFrame) -> str:
    """``none`` (dataset order only), ``sample`` (some items under all three cyclic
    orders) or ``all`` (every item under all three)."""
    p = preds[preds["repeat"] == 0]
    nrot = p.groupby(["dataset", "example_id"])["rotation"].nunique()
    if not len(nrot) or nrot.max() < 3:
        return "none"
    return "all" if nrot.min() == 3 else "sample"


def bbq_info(data: BBQData, items: pd.DataFrame, preds: pd.DataFrame, *, filter: str,
             seed: int, n_boot: int, data_dir: str, temperature: float | None = None,
             max_tokens: int | None = None, limit: int | None = None,
             sample: dict | None = None, asked: bool = True,
             cluster: str = "template", conventions: str = "project",
             answers: dict | None = None) -> BBQInfo:
    """``asked``: the prompts are this package's (the audit); False for predictions
    made by another tool (then the prompt is not described). Item counts are of the
    items that have an answer. ``conventions``: the scoring conventions (``bbq score
    --conventions``); ``answers``: how a score command read and mapped the answers."""
    rep = preds[preds["rotation"] == 0].groupby(["dataset", "example_id"]).size()
    repeated = rep[rep > 1]
    mode = rotations_mode(preds)
    answered = pd.MultiIndex.from_frame(preds[["dataset", "example_id"]].drop_duplicates())
    items = items[pd.MultiIndex.from_frame(items[["dataset", "example_id"]]).isin(answered)]
    consistency = None
    if len(repeated):
        ids = {ds: sorted(int(x) for x in g.index.get_level_values(1))
               for ds, g in repeated.groupby(level=0)}
        consistency = ConsistencyInfo(
            n_items=int(len(repeated)), repeats=int(repeated.max()),
            seed=(sample or {}).get("seed"), per_cell=(sample or {}).get("per_cell"),
            example_ids=ids)
    order = {"none": "dataset order", "sample": "dataset order; all three cyclic rotations "
             "on the consistency sample", "all": "all three cyclic rotations"}[mode]
    return BBQInfo(
        data_dir=data_dir, sha256=dict(data.sha256), official=bool(data.official),
        filter=filter, n_items=int(len(items)),
        counts=filter_counts(data.items, items).to_dict(orient="records"),
        n_answers=int(len(preds)), invalid_answers=int(preds["answer"].isna().sum()),
        seed=seed, bootstrap=bootstrap_info(n_boot, seed, cluster),
        rotations=3 if mode == "all" else 1, rotations_mode=mode,
        repeats=int(repeated.max()) if len(repeated) else 1,
        temperature=temperature, top_p=1.0 if asked else None, max_tokens=max_tokens,
        prompt_description=PROMPT_DESCRIPTION if asked else None,
        prompt_template=prompt_text("{context}", "{question}", ["{ans0}", "{ans1}", "{ans2}"])
        if asked else None,
        option_order=order, limit=limit, consistency=consistency,
        categories=list(data.categories), target_loc=dict(data.target_loc),
        conventions=conventions, answers=answers, data_notes=list(data.notes),
        git_blob=dict(sorted(data.blob.items())),
        release={n: st.to_dict() for n, st in data.release.items()})
