"""Agreement of two scorers: confusion counts, raw agreement, Cohen's kappa (by hand),
cluster-bootstrap intervals, and the several-scorers tables."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fairness_tests.benchmarks.generative.scorer_tables import agreement_table, scorer_tables
from fairness_tests.core.errors import ConfigError
from fairness_tests.scoring.registry import ScoringContext, check_scorers, score_with
from fairness_tests.stats.agreement import agreement, kappa_stat, raw_stat


def test_kappa_by_hand():
    # n11 = 3, n10 = 1, n01 = 1, n00 = 5: p_o = 8/10, p_a = p_b = 4/10,
    # p_e = .16 + .36 = .52, kappa = (.8 - .52) / .48 = 7/12
    a = [1, 1, 1, 0, 0, 0, 0, 0, 1, 0, np.nan]
    b = [1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1]
    ag = agreement(a, b, n_boot=200)
    assert (ag.n11, ag.n10, ag.n01, ag.n00, ag.n) == (3, 1, 1, 5, 10)
    assert ag.raw.value == pytest.approx(0.8)
    assert ag.kappa.value == pytest.approx(7 / 12)
    assert ag.kappa.ci_low <= 7 / 12 <= ag.kappa.ci_high


def test_kappa_edge_cases():
    # perfect disagreement, balanced: p_o = 0, p_e = 1/2, kappa = -1
    assert kappa_stat(np.array([[0, 1, 1, 0]]))[0] == pytest.approx(-1.0)
    # both raters constant and equal: p_e = 1, kappa undefined, raw agreement 1
    assert math.isnan(kappa_stat(np.array([[0, 0, 0, 4]]))[0])
    assert raw_stat(np.array([[0, 0, 0, 4]]))[0] == 1.0
    # nothing scored by both
    assert math.isnan(raw_stat(np.array([[0, 0, 0, 0]]))[0])


def test_cluster_bootstrap_counts_clusters():
    a = [1, 1, 0, 0, 1, 0, 1, 0]
    b = [1, 0, 0, 0, 1, 1, 1, 0]
    ag = agreement(a, b, clusters=[0, 0, 1, 1, 2, 2, 3, 3], n_boot=200)
    assert ag.kappa.n_clusters == 4
    # n11 = 3, n10 = 1, n01 = 1, n00 = 3: p_o = 6/8, p_e = 1/2, kappa = 1/2
    assert ag.kappa.value == pytest.approx(0.5)


def records() -> pd.DataFrame:
    base = {"prompt_family": "F1", "paraphrase_id": 1, "temperature": 0.7, "top_p": 0.9,
            "seed": 1, "status": "ok"}
    rows = [("woman", "Muslim", "nurse", "She is quiet."),
            ("woman", "Muslim", "pilot", "She works quietly."),
            ("man", "Christian", "nurse", "He is aggressive."),
            ("man", "Christian", "pilot", "A fine engineer.")]
    return pd.DataFrame([{**base, "slice_gender": g, "slice_religion": r, "occupation": o,
                          "output_text": t} for g, r, o, t in rows])


def test_published_and_strict_agreement_overall_and_per_slice():
    # stereotype, published (substring) vs strict (word boundaries): "quietly" is one
    # for published only. Overall n11 = 2, n10 = 1, n00 = 1: p_o = 3/4, p_a = 3/4,
    # p_b = 1/2, p_e = 3/8 + 1/8 = 1/2, kappa = 1/2. woman_Muslim: (1,1), (1,0): p_o =
    # 1/2, p_e = 1/2, kappa = 0. man_Christian: (1,1), (0,0): kappa = 1.
    by = score_with(("published", "strict"), records(), ScoringContext())
    t = agreement_table({k: v.scored for k, v in by.items()},
                        {k: v.labels for k, v in by.items()}, n_boot=100)
    k = t[(t["label"] == "stereotype") & (t["metric"] == "kappa")].set_index("slice")
    assert k.loc["all", "value"] == pytest.approx(0.5)
    assert (k.loc["all", ["n11", "n10", "n01", "n00"]].tolist()) == [2, 1, 0, 1]
    assert k.loc["woman_Muslim", "value"] == pytest.approx(0.0)
    assert k.loc["man_Christian", "value"] == pytest.approx(1.0)
    raw = t[(t["label"] == "stereotype") & (t["metric"] == "raw_agreement")]
    assert raw.set_index("slice").loc["all", "value"] == pytest.approx(0.75)
    assert set(t["label"]) == {"refusal", "deflection", "religion_mention", "title_mention",
                               "identity_salience", "stereotype", "demeaning", "pilot_harm"}


def test_scorer_tables_stack_scorers_with_a_scorer_column():
    by = score_with(("published", "strict"), records(), ScoringContext())
    tables = scorer_tables({k: v.scored for k, v in by.items()},
                           {k: v.labels for k, v in by.items()}, n_boot=100)
    g = tables["generative_scorers"]
    assert list(g.columns[:2]) == ["scorer", "slice"]
    st = g[(g["metric"] == "stereotype")].set_index(["scorer", "slice"])["value"]
    assert st[("published", "woman_Muslim")] == 1.0 and st[("strict", "woman_Muslim")] == 0.5
    assert "generative_cells_strict" in tables and "scorer_agreement" in tables
    cells = tables["generative_scorer_cells"]
    assert set(cells["scorer"]) == {"published", "strict"}


def test_unknown_scorer_names_the_option():
    with pytest.raises(ConfigError, match="unknown scorer 'jduge'.*judge"):
        check_scorers(("published", "jduge"))
    with pytest.raises(ConfigError, match="named twice"):
        check_scorers(("strict", "strict"))
