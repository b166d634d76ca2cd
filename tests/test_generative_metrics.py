"""Generative metrics on a small output set counted by hand (published rubric).

The 8 records (slice, family, temperature, text, status):

    r1 man_Muslim       F1 0.2 "I'm sorry, I can't."  ok   refusal (sorry), 4 words
    r2 man_Muslim       F1 0.7 "A skilled leader."    ok   positive = skilled + leader = 2, 3 words
    r3 man_Muslim       F2 0.2 "She is quiet."        ok   stereotype (quiet), 3 words
    r4 man_Muslim       F2 0.7 ""                     error
    r5 woman_Christian  F1 0.2 "Fine work."           ok   2 words
    r6 woman_Christian  F1 0.7 "Fine work."           ok   2 words
    r7 woman_Christian  F2 0.2 "Fine work."           ok   2 words
    r8 woman_Christian  F2 0.7 "Sorry."               ok   refusal, 1 word
"""
import numpy as np
import pandas as pd
import pytest

from fairness_tests.benchmarks.generative import metrics as G
from fairness_tests.benchmarks.generative.tables import protocol_cells
from fairness_tests.metrics import spread as PS
from fairness_tests.rules.evaluate import evaluate
from fairness_tests.rules.protocol import flipped_verdicts
from fairness_tests.rules.thresholds import Rule
from fairness_tests.scoring.lexical import score
from fairness_tests.stats.bootstrap import wilson_ci

ROWS = [
    ("man", "Muslim", "F1", 0.2, 0.9, "I'm sorry, I can't.", "ok"),
    ("man", "Muslim", "F1", 0.7, 0.95, "A skilled leader.", "ok"),
    ("man", "Muslim", "F2", 0.2, 0.9, "She is quiet.", "ok"),
    ("man", "Muslim", "F2", 0.7, 0.95, "", "error"),
    ("woman", "Christian", "F1", 0.2, 0.9, "Fine work.", "ok"),
    ("woman", "Christian", "F1", 0.7, 0.95, "Fine work.", "ok"),
    ("woman", "Christian", "F2", 0.2, 0.9, "Fine work.", "ok"),
    ("woman", "Christian", "F2", 0.7, 0.95, "Sorry.", "ok"),
]


@pytest.fixture(scope="module")
def scored():
    df = pd.DataFrame(ROWS, columns=["slice_gender", "slice_religion", "prompt_family",
                                     "temperature", "top_p", "output_text", "status"])
    df["paraphrase_id"], df["occupation"], df["seed"] = "p1", "CEO", 1
    return G.with_cells(score(df, "published"))


def val(t, **cell):
    m = np.ones(len(t), dtype=bool)
    for k, v in cell.items():
        m &= (t[k] == v).to_numpy()
    assert m.sum() == 1, cell
    return t[m].iloc[0]


def test_by_slice_rates_means_and_errors(scored):
    t = G.slice_table(scored, n_boot=200)
    # refusal: man_Muslim 1 of 3 ok rows (r1); woman_Christian 1 of 4 (r8)
    r = val(t, slice="man_Muslim", metric="refusal")
    assert r.value == pytest.approx(1 / 3) and r.n == 3
    # prompts resampled (the default): man_Muslim has two prompts, F1 (r1 refusal, r2)
    # and F2 (r3 ok; r4 is an error row): two draws give 2/4, 1/3 or 0/2 -> CI [0, 0.5]
    assert (r.ci_low, r.ci_high, r.n_clusters) == (0.0, 0.5, 2)
    # generations treated as independent: the Wilson interval of 1 of 3
    rr = val(G.slice_table(scored, n_boot=200, cluster="row"), slice="man_Muslim",
             metric="refusal")
    assert (rr.ci_low, rr.ci_high) == pytest.approx(wilson_ci(1, 3))
    assert np.isnan(rr.n_clusters)
    assert val(t, slice="woman_Christian", metric="refusal").value == pytest.approx(1 / 4)
    # pilot harm man_Muslim: r1 (refusal) + r3 (stereotype) = 2/3; woman_Christian r8 = 1/4
    assert val(t, slice="man_Muslim", metric="pilot_harm").value == pytest.approx(2 / 3)
    assert val(t, slice="woman_Christian", metric="pilot_harm").value == pytest.approx(1 / 4)
    # positive_professional mean man_Muslim: (0 + 2 + 0) / 3
    assert val(t, slice="man_Muslim", metric="positive_professional").value == pytest.approx(2 / 3)
    # word_len: man_Muslim (4 + 3 + 3) / 3 = 10/3; woman_Christian (2+2+2+1)/4 = 7/4
    assert val(t, slice="man_Muslim", metric="word_len").value == pytest.approx(10 / 3)
    assert val(t, slice="woman_Christian", metric="word_len").value == pytest.approx(7 / 4)
    # error rate over all rows: man_Muslim 1/4 (the error row is kept and counted)
    e = val(t, slice="man_Muslim", metric="error")
    assert e.value == pytest.approx(1 / 4) and e.n == 4
    counts = G.error_counts(scored).set_index("slice")
    assert counts.loc["man_Muslim", "n_error"] == 1 and counts.loc["man_Muslim", "n_ok"] == 3


def test_slice_x_family_and_worst_slice(scored):
    t = G.slice_table(scored, ["family"], n_boot=200)
    # F1 refusal: man_Muslim r1 of (r1, r2) = 1/2; woman_Christian 0/2
    assert val(t, family="F1", slice="man_Muslim", metric="refusal").value == 0.5
    # F2 refusal: man_Muslim 0/1 (r3; r4 is an error); woman_Christian r8 of (r7, r8) = 1/2
    r = val(t, family="F2", slice="man_Muslim", metric="refusal")
    assert r.value == 0 and r.n == 1
    w = G.worst_slice(t, ["family"])
    assert tuple(val(w, family="F1", metric="refusal")[["slice", "value"]]) == ("man_Muslim", 0.5)
    assert tuple(val(w, family="F2", metric="refusal")[["slice", "value"]]) == (
        "woman_Christian", 0.5)
    wo = G.worst_slice(G.slice_table(scored, n_boot=200))
    assert tuple(val(wo, metric="stereotype")[["slice", "value"]]) == (
        "man_Muslim", pytest.approx(1 / 3))


def test_all_views_present(scored):
    tables = G.all_tables(scored, n_boot=100)
    assert set(tables) == set(G.VIEWS)
    sfd = tables["generative_by_slice_family_decoding"]
    # man_Muslim F1 t0.2: only r1 -> refusal 1/1
    assert val(sfd, family="F1", decoding="t0.2_p0.9", slice="man_Muslim",
               metric="refusal").value == 1.0
    # man_Muslim F2 t0.7: only the error row -> no ok rows, NaN with a note
    r = val(sfd, family="F2", decoding="t0.7_p0.95", slice="man_Muslim", metric="refusal")
    assert np.isnan(r.value) and r.n == 0 and r.note
    assert val(sfd, family="F2", decoding="t0.7_p0.95", slice="man_Muslim",
               metric="error").value == 1.0


def test_disparity_and_refusal_gap(scored):
    d = G.disparity(scored, n_boot=500, seed=1).set_index("metric")
    # refusal 1/3 - 1/4 = 1/12; stereotype 1/3 - 0; word_len 10/3 - 7/4 = 19/12
    assert d.loc["refusal", "value"] == pytest.approx(1 / 12)
    assert d.loc["stereotype", "value"] == pytest.approx(1 / 3)
    assert d.loc["word_len", "value"] == pytest.approx(19 / 12)
    assert d.loc["refusal", "ci_low"] <= d.loc["refusal", "ci_high"]
    gap = G.refusal_gap(scored, n_boot=500, seed=1)
    assert gap["metric"].tolist() == ["refusal_gap"]
    assert gap["value"].iloc[0] == pytest.approx(1 / 12)


def test_rubric_deltas_and_flips():
    a = pd.DataFrame({"slice": ["s1", "s2"], "metric": "stereotype", "value": [0.5, 0.1],
                      "ci_low": 0, "ci_high": 1, "n": 10, "note": ""})
    b = a.assign(value=[0.2, 0.1])
    d = G.rubric_deltas(a, b)
    assert d["delta"].tolist() == pytest.approx([-0.3, 0.0])   # 0.2 - 0.5, 0.1 - 0.1
    va = pd.DataFrame({"rule": ["r", "r"], "cell": ["overall", "family/F1"],
                       "value": [0.5, 0.0], "status": ["fail", "pass"]})
    vb = va.assign(value=[0.02, 0.0], status=["pass", "pass"])
    f = flipped_verdicts(va, vb)
    assert f["cell"].tolist() == ["overall"]
    assert (f["status_published"].iloc[0], f["status_strict"].iloc[0]) == ("fail", "pass")


def test_spread_decomposition_by_hand():
    # R (slices x cells) = [[0.1, 0.3], [0.2, 0.4]]; m = 0.25; cell means 0.15, 0.35
    # SS_cells = 2 * ((0.15-0.25)^2 + (0.35-0.25)^2) = 0.04
    # SS_within = 4 * 0.05^2 = 0.01; share_cells = 0.04 / 0.05 = 0.8
    t = pd.DataFrame({"slice": ["s1", "s2", "s1", "s2"], "family": ["c1", "c1", "c2", "c2"],
                      "value": [0.1, 0.2, 0.3, 0.4]})
    d = PS.spread_decomposition(t, "family")
    assert d["ss_cells"] == pytest.approx(0.04) and d["ss_within"] == pytest.approx(0.01)
    assert d["share_cells"] == pytest.approx(0.8) and d["dominant"] == "protocol_cells"
    assert d["cell_range"] == pytest.approx(0.2) and d["mean_slice_range"] == pytest.approx(0.1)
    # transpose the roles: slices differ by 0.2, cells by 0.1 -> slices dominate
    t2 = t.assign(value=[0.1, 0.3, 0.2, 0.4])
    assert PS.spread_decomposition(t2, "family")["dominant"] == "slices_within_cell"


def test_protocol_cells_shape_and_refusal_gap(scored):
    cs = protocol_cells(scored, n_boot=100)
    assert set(cs["cell_kind"]) == {"overall", "family", "decoding"}
    assert set(cs[cs["cell_kind"] == "family"]["cell"]) == {"F1", "F2"}
    # refusal: man_Muslim 1 of 3 ok rows, woman_Christian 1 of 4 -> gap 1/3 - 1/4 = 1/12
    gap = Rule(id="gap", table="generative_cells", metric="refusal", op="<=", bound=0.1,
               rationale="", across="slice", reduce="range", min_n=0)    # a handful of rows
    v = evaluate({"generative_cells": cs}, [gap]).set_index("cell")
    assert v.loc["overall", "value"] == pytest.approx(1 / 12)
    # F1: man_Muslim 1 of 2 refuse, woman_Christian 0 of 2 -> worst slice 0.5
    worst = Rule(id="w", table="generative_cells", metric="refusal", op="<=", bound=0.1,
                 rationale="", across="slice", reduce="max", min_n=0)
    w = evaluate({"generative_cells": cs}, [worst]).set_index("cell")
    assert w.loc["family/F1", "value"] == 0.5
    assert "worst slice: man_Muslim" in w.loc["family/F1", "why"]



def frames_data(effect: bool) -> pd.DataFrame:
    """20 frames (paraphrase x occupation) x 2 slices, each prompt asked 3 times (seeds);
    stereotype on every generation of slice man_Muslim (effect) or at random with
    probability 0.3 whatever the slice (no slice effect, seeded)."""
    rng = np.random.default_rng(4)
    rows = []
    for f in range(20):
        for g, r in (("man", "Muslim"), ("woman", "Christian")):
            for seed in range(3):
                hit = (g == "man") if effect else (rng.random() < 0.3)
                rows.append(dict(slice_gender=g, slice_religion=r, prompt_family="F1",
                                 paraphrase_id=f"p{f % 4}", occupation=f"o{f // 4}",
                                 temperature=0.7, top_p=0.95, seed=seed, status="ok",
                                 output_text="quiet" if hit else "fine"))
    return G.with_cells(score(pd.DataFrame(rows), "published"))


def test_max_type_statistics_carry_the_permutation_p_and_the_bias_corrected_value():
    d = G.max_over_slices(frames_data(True), (), ["stereotype"], "range", n_boot=300,
                          n_perm=2000).iloc[0]
    # disparity 1 - 0 = 1; permuting the slice labels of the 2 prompts of each frame
    # reaches it only when all 20 frames keep (or all swap) their labels: exact
    # p = 2 / 2^20, so no random relabelling does and p = 1 / 2001
    assert d.value == 1.0 and d.p_value == pytest.approx(1 / 2001)
    assert d.n_clusters == 40 and not np.isnan(d.value_bc)
    data = frames_data(False)
    w = G.max_over_slices(data, (), ["stereotype"], "max", n_boot=300).iloc[0]
    rates = data.groupby("slice")["stereotype"].mean()
    assert w.value == pytest.approx(rates.max()) and w.p_value > 0.05
    # the bootstrap of a max is biased upward: the corrected value is lower
    assert w.value_bc < w.value
