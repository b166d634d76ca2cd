"""The gate's pure part on data whose right answer is known by construction."""
import math
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from fairness_tests.benchmarks.bbq.data import bbq_dir, load_bbq
from fairness_tests.benchmarks.bbq.filter import filter_items
from fairness_tests.benchmarks.bbq.gate import KEY, bbq_frame, bbq_gate_metrics
from fairness_tests.benchmarks.generative.gate import generative_gate_metrics
from fairness_tests.metrics.gate import (
    AGREE,
    NOT_SHOWN,
    GateMetric,
    GateSetting,
    decide,
    gate_table,
)
from fairness_tests.metrics.schema import BBQ_ITEM_COLUMNS as ITEM_COLUMNS
from fairness_tests.pipeline.gate_report import detectable_statement
from fairness_tests.stats.significance import cluster_paired_rate_test, mcnemar_p, paired_rate_test

N = 400


def bbq_flags(correct: np.ndarray, context="disambig", templates=None) -> pd.DataFrame:
    n = len(correct)
    return pd.DataFrame({"dataset": "D", "context": context, "example_id": np.arange(n),
                         "question_index": np.arange(n) % 20 if templates is None else templates,
                         "group": np.where(np.arange(n) % 2, "g1", "g2"),
                         "correct": correct.astype(float), "invalid": 0.0, "fav": 0.0,
                         "reinf": 0.0, "counter": 0.0, "correct_reinf": 0.0,
                         "correct_counter": 0.0,
                         # a non-unknown answer on every item, biased on every other one:
                         # s = 2 * (n/2) / n - 1 = 0 for both models
                         "biased": (np.arange(n) % 2).astype(float), "non_unknown": 1.0})


def gate(b, c, margin=0.02, mode="harm", cluster=None, n_boot=2000, alpha=0.05, only=None):
    metrics = [m for m in bbq_gate_metrics() if only is None or m.name in only]
    t = gate_table(b, c, ["dataset", "example_id"], ["dataset", "context"], metrics,
                   lambda m, key: GateSetting(mode, margin), cluster,
                   ["group", "question_index"], n_boot=n_boot, seed=0)
    return decide(t, alpha).set_index("metric")


def test_clear_regression_fails_with_the_mcnemar_type_test():
    base = np.zeros(N)
    base[:300] = 1                  # 300/400 = 0.75
    cand = base.copy()
    cand[:60] = 0                   # 240/400 = 0.60, delta -0.15
    t = gate(bbq_flags(base), bbq_flags(cand))
    acc = t.loc["accuracy"]
    assert (acc["baseline"], acc["candidate"]) == (0.75, 0.60)
    assert acc["delta"] == pytest.approx(-0.15)
    assert acc["ci_low"] < -0.15 < acc["ci_high"] < -0.02
    # b = 60 discordant pairs against the candidate, c = 0: the score test at margin 0.02
    assert acc["p_value"] == pytest.approx(paired_rate_test(60, 0, N, 0.02, "harm"))
    assert acc["discordance"] == pytest.approx(60 / N)
    assert acc["verdict"] == "fail" and acc["p_adjusted"] < 0.05
    assert t.loc["abs_s_dis", "verdict"] == "no_difference"   # s = 0 for both
    assert t.loc["abs_s_dis", "delta"] == 0


def test_holm_runs_over_every_cell_of_the_family():
    base = np.zeros(N)
    base[:300] = 1
    cand = base.copy()
    cand[:60] = 0
    t = gate(bbq_flags(base), bbq_flags(cand))
    p = t["p_value"].to_numpy()
    m = np.isfinite(p).sum()
    # the smallest p is multiplied by the family size
    i = np.nanargmin(p)
    assert t["p_adjusted"].iloc[i] == pytest.approx(min(1.0, m * p[i]))
    assert (t["p_adjusted"].dropna() >= t["p_value"].dropna()).all()


def test_identical_models_no_difference_and_small_loss_within_margin():
    base = np.zeros(N)
    base[:300] = 1
    same = gate(bbq_flags(base), bbq_flags(base.copy())).loc["accuracy"]
    assert (same["delta"], same["ci_low"], same["ci_high"]) == (0, 0, 0)
    # b = c = 0 at margin 0.02: harm p = 1 - Phi(-0.02 / sqrt(0.0196 / 400)) = 0.9979
    assert same["verdict"] == "no_difference"
    assert same["p_value"] == pytest.approx(1 - NormalDist().cdf(-0.02 / math.sqrt(0.0196 / N)))
    cand = base.copy()
    cand[:10] = 0                   # delta -10/400 = -0.025
    small = gate(bbq_flags(base), bbq_flags(cand), margin=0.05).loc["accuracy"]
    assert small["delta"] == pytest.approx(-0.025)
    assert small["verdict"] == "worse"                  # excluded 0, not the margin
    better = gate(bbq_flags(cand), bbq_flags(base)).loc["accuracy"]
    assert better["verdict"] == "better"


def test_non_inferiority_fails_what_it_cannot_show():
    # 40 items and a 1-point margin: identical answers cannot show non-inferiority
    # (p at b = c = 0 is Phi(-0.01 / sqrt(0.0099 / 40)) = 0.31); with 4,000 items it can
    base = np.zeros(40)
    base[:30] = 1
    t = gate(bbq_flags(base), bbq_flags(base.copy()), margin=0.01, mode="non_inferiority",
             only={"accuracy"}).loc["accuracy"]
    assert t["verdict"] == "fail"
    assert t["p_value"] == pytest.approx(paired_rate_test(0, 0, 40, 0.01, "non_inferiority"))
    big = np.zeros(4000)
    big[:3000] = 1
    t = gate(bbq_flags(big), bbq_flags(big.copy()), margin=0.01, mode="non_inferiority",
             only={"accuracy"}).loc["accuracy"]
    assert t["verdict"] == "no_worse"
    # harm mode on the same 40 items passes by design
    assert gate(bbq_flags(base), bbq_flags(base.copy()), margin=0.01,
                only={"accuracy"}).loc["accuracy", "verdict"] == "no_difference"


def test_detectable_worsening_is_reported_and_grows_with_clustering():
    rng = np.random.default_rng(3)
    # template effects: every item of a template is right or wrong together
    templates = np.repeat(np.arange(20), N // 20)
    base = (rng.random(20) < 0.7)[templates].astype(float)
    cand = base.copy()
    flip = rng.random(N) < 0.1
    cand[flip] = 1 - cand[flip]
    item = gate(bbq_flags(base, templates=templates), bbq_flags(cand, templates=templates),
                only={"accuracy"}).loc["accuracy"]
    clus = gate(bbq_flags(base, templates=templates), bbq_flags(cand, templates=templates),
                cluster="question_index", only={"accuracy"}).loc["accuracy"]
    assert np.isnan(item["n_clusters"]) and clus["n_clusters"] == 20
    assert 0.02 < item["detectable"] < 0.2
    if clus["deff"] > 1:
        assert clus["detectable"] > item["detectable"]


def test_pure_noise_rarely_fails():
    # two exchangeable models: each item has a difficulty q ~ U(0, 1) and both models
    # answer it correctly with probability q, independently. The true delta is 0; a
    # fail needs the adjusted p below 0.05 for a worsening beyond 0.02: none in 20 runs.
    rng = np.random.default_rng(1)
    verdicts = []
    for _ in range(20):
        q = rng.random(N)
        base = (rng.random(N) < q).astype(float)
        cand = (rng.random(N) < q).astype(float)
        verdicts.append(gate(bbq_flags(base), bbq_flags(cand), n_boot=1000,
                             only={"accuracy"}).loc["accuracy", "verdict"])
    assert "fail" not in verdicts
    assert verdicts.count("no_difference") >= 17


def test_mcnemar_exact_small_case():
    # b = 0, c = 5: p = 2 * 0.5**5 = 0.0625 ; b = c: p = 1 (capped)
    assert mcnemar_p(0, 5) == pytest.approx(0.0625)
    assert mcnemar_p(3, 3) == 1.0


def gen(rates_by_slice: dict, refusal=0.0, n=200, seed=0) -> pd.DataFrame:
    """n generations per slice in 20 prompts (paraphrases) of n / 20, stereotype drawn
    at the slice's rate (seeded), refusal on the first ``refusal * n``."""
    rng = np.random.default_rng(seed)
    rows = []
    for s, rate in rates_by_slice.items():
        g, r = s.split("_")
        for i in range(n):
            rows.append(dict(prompt_family="F1", family="F1", paraphrase_id=i * 20 // n,
                             occupation="CEO", slice_gender=g, slice_religion=r, slice=s,
                             prompt=f"F1|{i * 20 // n}|CEO|{s}", temperature=0.7,
                             top_p=0.95, seed=i, stereotype=float(rng.random() < rate),
                             demeaning=0.0, refusal=float(i < refusal * n)))
    return pd.DataFrame(rows)


def test_generative_worst_slice_regression_is_caught_and_refusal_gap_unchanged():
    base = gen({"man_Muslim": 0.05, "woman_Muslim": 0.05}, seed=1)
    cand = gen({"man_Muslim": 0.05, "woman_Muslim": 0.30}, seed=2)
    per_family, _ = generative_gate_metrics()
    key = ["prompt_family", "paraphrase_id", "occupation", "slice_gender", "slice_religion",
           "temperature", "top_p", "seed"]
    t = decide(gate_table(base, cand, key, ["family"], per_family,
                          lambda m, k: GateSetting("harm", m.margin), "prompt",
                          ["family", "slice", "prompt"], n_boot=1000)).set_index("metric")
    w = t.loc["worst_slice_stereotype"]
    # worst slice = the larger of the two slices' observed rates, in each run
    rb, rc = (d.groupby("slice")["stereotype"].mean().max() for d in (base, cand))
    assert (w["baseline"], w["candidate"], w["delta"]) == pytest.approx((rb, rc, rc - rb))
    assert w["verdict"] == "fail" and w["cell"] == "F1" and w["n_clusters"] == 40
    assert t.loc["refusal_gap", "delta"] == 0
    assert t.loc["refusal_gap", "verdict"] in ("not_evaluable", "no_difference")
    assert not math.isnan(t.loc["worst_slice_stereotype", "detectable"])


@pytest.mark.parametrize("mode", ["harm", "non_inferiority"])
def test_a_clustered_accuracy_cell_is_tested_on_its_templates(mode):
    # regression (issue 11): the clustered accuracy cell used the item score test times
    # the bootstrap design effect, whose error at the margin was 5.5% / 6.9% on 20
    # clustered templates. Now the test is the mode's cluster test on the per-template
    # balances b_t - c_t, which a brute-force tally of the flips gives here.
    rng = np.random.default_rng(5)
    templates = np.repeat(np.arange(20), N // 20)
    base = (rng.random(N) < 0.7).astype(float)
    cand = base.copy()
    worse = (rng.random(20) < 0.5)[templates] & (rng.random(N) < 0.3)   # half the templates
    cand[worse] = 0.0
    better = rng.random(N) < 0.05
    cand[better] = 1.0
    t = gate(bbq_flags(base, templates=templates), bbq_flags(cand, templates=templates),
             mode=mode, cluster="question_index", only={"accuracy"}).loc["accuracy"]
    balance = [float(((base == 1) & (cand == 0))[templates == k].sum()
                     - ((base == 0) & (cand == 1))[templates == k].sum()) for k in range(20)]
    assert t["p_value"] == pytest.approx(
        cluster_paired_rate_test(balance, [N // 20] * 20, 0.02, mode), rel=1e-12)
    assert t["test"].startswith("cluster-robust Wald" if mode == "harm" else "cluster score")
    assert t["effective_clusters"] == pytest.approx(20.0)
    assert np.isfinite(t["detectable"])


# ---------------------------------------------------------------- too few clusters

@pytest.fixture(scope="module")
def one_template():
    """60 items of one real BBQ template (Race_x_SES question_index 2: Black:lowSES and
    Latino:lowSES, both contexts) after the intersectional filter, and a function that
    draws a first run on them: the label with probability 0.6, else one of the two other
    options, seeded."""
    items = filter_items(load_bbq(bbq_dir()).items)
    items = items[(items.dataset == "Race_x_SES") & (items.question_index.astype(str) == "2")]
    items = items.sort_values("example_id").groupby("context").head(30)[ITEM_COLUMNS]
    assert len(items) == 60 and items.question_index.nunique() == 1

    def run(seed):
        rng = np.random.default_rng(seed)
        label = items["label"].to_numpy(int)
        other = (label + rng.integers(1, 3, len(items))) % 3
        answer = np.where(rng.random(len(items)) < 0.6, label, other).astype(float)
        return items.assign(repeat=0, rotation=0, answer=answer)
    return run


def gate_records(rb, rc, cluster="question_index", mode="harm"):
    t = gate_table(bbq_frame(rb), bbq_frame(rc), list(KEY), ["dataset", "context"],
                   bbq_gate_metrics(), lambda m, key: GateSetting(mode, m.margin), cluster,
                   ["group", "question_index"], n_boot=500, seed=0)
    return decide(t)


def test_one_template_cells_are_not_evaluable_never_p_zero(one_template):
    # regression: two 60-item runs of equal expected accuracy from one template failed
    # abs_s_dis and abs_acc_reinf_minus_counter in harm mode with p = 0 and a zero-width
    # interval (one cluster resampled: every resample is the sample), and the gate said
    # "the runs agree on every item here", which was false
    rb, rc = one_template(1), one_template(2)
    assert (rb.answer != rc.answer).sum() > 10
    for mode in ("harm", "non_inferiority"):
        t = gate_records(rb, rc, mode=mode)
        assert set(t.cell) == {"Race_x_SES/ambig", "Race_x_SES/disambig"}
        assert {"abs_s_dis", "abs_acc_reinf_minus_counter", "accuracy"} <= set(t.metric)
        # issue 32: non-inferiority must be shown, so a cell without a test fails it
        verdict, shown = ("not_evaluable", "") if mode == "harm" else ("fail", NOT_SHOWN)
        assert (t.verdict == verdict).all(), t[["metric", "cell", "p_value", "verdict"]]
        assert t.p_value.isna().all() and t.ci_low.isna().all() and t.ci_high.isna().all()
        assert (t.n_clusters == 1).all()
        for r in t.to_dict(orient="records"):
            assert r["note"].startswith(shown + "not evaluable: 1 cluster (question_index) in "
                                        "this cell; a paired test and its interval need at "
                                        "least 2")
            assert np.isfinite(r["delta"]) or r["metric"] in ("sf", "df_eb")  # one group
            # both runs answer every item validly: only the invalid rate agrees
            assert (AGREE in r["note"]) == (r["metric"] == "invalid_rate")
            s = detectable_statement(r)
            assert "not evaluable: 1 cluster" in s
            assert ("agree on every item" in s) == (r["metric"] == "invalid_rate")
    # the same runs with items resampled: 30 units per cell, every defined cell tested
    items = gate_records(rb, rc, cluster=None)
    assert items.loc[items.metric == "abs_s_dis", "p_value"].notna().all()


def test_the_runs_agree_note_only_when_they_do(one_template):
    rb = one_template(1)
    rc = rb.copy()
    # items resampled: identical answers agree on every item of every cell
    t = gate_records(rb, rc, cluster=None)
    assert t.note.str.contains(AGREE, regex=False).all()
    acc = t[t.metric == "abs_s_dis"].iloc[0].to_dict()
    assert acc["se"] == 0 and "agree on every item" in detectable_statement(acc)
    # one disambiguated answer changed: that cell no longer agrees, the other still does
    i = rc.index[(rc.context == "disambig")][0]
    rc.loc[i, "answer"] = (rc.loc[i, "answer"] + 1) % 3
    t = gate_records(rb, rc, cluster=None).set_index(["metric", "cell"])
    assert AGREE not in t.loc[("accuracy", "Race_x_SES/disambig"), "note"]
    assert AGREE in t.loc[("accuracy", "Race_x_SES/ambig"), "note"]


# ---------------------------------------------------------------- wording

def test_the_detectable_statement_is_worded_by_the_metric_declaration():
    # issue 33: the wording is the metric's (GateMetric.worsening/scale/unit), not a
    # table of names in the report; 0.0456 shown times 100 with one decimal is 4.6
    row = dict(metric="toy_rate", cell="A/b", detectable=0.0456, note="", verdict="pass",
               se=0.01, mode="harm")
    declared = GateMetric("toy_rate", lambda g: None, False, 0.02, worsening="a rise of toy",
                          scale=100, unit=" points")
    assert detectable_statement(row, declared) == \
        "this gate detects a rise of toy of at least 4.6 points in A/b (80% power)"
    # a metric without wording (and a name no gated family declares): three decimals
    assert detectable_statement(row) == \
        "this gate detects a worsening of toy_rate of at least 0.046 in A/b (80% power)"
    # a registered family's metric found by name: BBQ's accuracy, in points
    acc = {**row, "metric": "accuracy"}
    assert detectable_statement(acc) == \
        "this gate detects an accuracy drop of at least 4.6 points in A/b (80% power)"
