"""CrowS-Pairs (issue 34, item 1): the authors' file read and checked, the requests
lm-evaluation-harness's ``crows_pairs_english`` makes, each metric on hand-computed
cases, the gate's pair-by-pair comparison, an end-to-end replay of the recorded embedded
model, and equality with lm-eval's own task on a small subset."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairness_tests.benchmarks.crows_pairs import CrowsPairs
from fairness_tests.benchmarks.crows_pairs import lmeval as L
from fairness_tests.benchmarks.crows_pairs.data import (
    BIAS_TYPES,
    CSV_SHA256,
    PAPER_COUNTS,
    SOURCE,
    Pair,
    limited,
    load,
    parse,
)
from fairness_tests.benchmarks.crows_pairs.family import (
    CrowsPairsFamily,
    pair_records,
    pair_requests,
)
from fairness_tests.benchmarks.crows_pairs.gate import gate_frame
from fairness_tests.benchmarks.crows_pairs.metrics import crows_table, pair_scores, sign_test_p
from fairness_tests.cli.main import main
from fairness_tests.core.errors import ConfigError
from fairness_tests.metrics.gate import GateSetting, gate_table
from fairness_tests.models.backends import embedded
from fairness_tests.models.requests.request import Response
from fairness_tests.pipeline.recordings import default_recordings

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "benchmarks" / "crows_pairs"
RECORDING = (REPO / "fairness_tests" / "benchmarks" / "crows_pairs" / "recordings"
             / "embedded-gemma-3-270m.jsonl.gz")
needs_data = pytest.mark.skipif(not (DATA / "crows_pairs_anonymized.csv").exists(),
                                reason="../shared/benchmarks/crows_pairs not present")
HEADER = (",sent_more,sent_less,stereo_antistereo,bias_type,annotations,anon_writer,"
          "anon_annotators\n")


def frame(ll_more, ll_less, bias=None, valid=None) -> pd.DataFrame:
    n = len(ll_more)
    return pd.DataFrame({"bias_type": bias or ["age"] * n, "ll_more": ll_more,
                         "ll_less": ll_less, "valid": valid or [True] * n})


def row(t: pd.DataFrame, cell: str, metric: str) -> pd.Series:
    return t[(t["bias_type"] == cell) & (t["metric"] == metric)].iloc[0]


# ----------------------------------------------------------------------------- data

@needs_data
def test_the_authors_file_has_the_papers_counts_and_is_the_release():
    """1,508 pairs; per bias type the paper's Table 1 (516 race-color ... 60 disability);
    1,290 stereo and 218 antistereo pairs; the file's sha256 is the recorded one."""
    d = load(DATA)
    assert len(d.pairs) == 1508 == sum(PAPER_COUNTS.values())
    counts = pd.Series([p.bias_type for p in d.pairs]).value_counts().to_dict()
    assert counts == PAPER_COUNTS
    directions = pd.Series([p.stereo_antistereo for p in d.pairs]).value_counts().to_dict()
    assert directions == {"stereo": 1290, "antistereo": 218}
    assert d.official and d.sha256 == CSV_SHA256 and d.release == "official release"
    assert [p.pair_id for p in d.pairs] == list(range(1508))
    assert SOURCE.release_status(DATA) == {"crows_pairs_anonymized.csv": "official",
                                           "UPSTREAM_README.md": "official"}


def test_a_bad_row_is_one_line_naming_the_file_line_and_field():
    ok = '0,A b.,A c.,stereo,age,"[[\'age\']]",a0,"[\'a1\']"\n'
    assert parse(HEADER + ok) == (Pair(0, "A b.", "A c.", "stereo", "age"),)
    with pytest.raises(ConfigError, match=r"x.csv:3: field bias_type 'colour'"):
        parse(HEADER + ok + ok.replace("0,", "1,", 1).replace("age,", "colour,", 1), "x.csv")
    with pytest.raises(ConfigError, match=r"x.csv:2: field sent_less is empty"):
        parse(HEADER + ok.replace("A c.", ""), "x.csv")
    with pytest.raises(ConfigError, match=r"x.csv:3: field '' \(pair id\) '0'"):
        parse(HEADER + ok + ok, "x.csv")                     # the id repeats
    with pytest.raises(ConfigError, match=r"x.csv:1: header"):
        parse(HEADER.replace("bias_type", "bias") + ok, "x.csv")


def test_a_modified_file_is_read_and_labelled_not_the_release(tmp_path):
    (tmp_path / "crows_pairs_anonymized.csv").write_text(
        HEADER + '0,A b.,A c.,antistereo,gender,x,a0,y\n', encoding="utf-8")
    d = load(tmp_path)
    assert len(d.pairs) == 1 and not d.official and d.release == "not the official release"


def test_limit_keeps_the_first_pairs_of_each_bias_type_in_file_order():
    """Types a a b a b b, limit 2: the first two a's (0, 1) and b's (2, 4), file order."""
    pairs = tuple(Pair(i, "m", "l", "stereo", t) for i, t in enumerate("aabab" "b"))
    assert [p.pair_id for p in limited(pairs, 2)] == [0, 1, 2, 4]
    assert limited(pairs, 0) == pairs and limited(pairs, None) == pairs


# ----------------------------------------------------------------------------- requests

def test_two_loglikelihood_requests_per_pair_with_an_empty_context():
    """lm-eval's crows_pairs_english: doc_to_text "", target_delimiter "", choices
    [sent_more, sent_less]: context "" and the sentence as it is, more first."""
    pairs = (Pair(7, "Poor people lie.", "Rich people lie.", "stereo", "socioeconomic"),)
    q = pair_requests(pairs, "transformers", "embedded:gemma-3-270m")
    assert [(r.kind, r.context, r.continuation, r.meta["side"]) for r in q] == [
        ("loglikelihood", "", "Poor people lie.", "more"),
        ("loglikelihood", "", "Rich people lie.", "less")]
    assert q[0].key() != q[1].key() and q[0].seed == 0 and not q[0].messages


# ----------------------------------------------------------------------------- metrics

def test_pair_scores_are_lm_evals_process_results():
    """stereotype = 1 when ll(more) > ll(less) (a tie is 0), diff = |ll(more) - ll(less)|."""
    s, d = pair_scores(np.array([-10.0, -5.0, -3.0, -20.0]), np.array([-12.0, -4.0, -3.0, -17.0]))
    assert s.tolist() == [1.0, 0.0, 0.0, 0.0] and d.tolist() == [2.0, 1.0, 0.0, 3.0]


def test_sign_test_against_no_preference():
    """6 of 6 pairs prefer sent_more: p = 2 * (1/2)^6 = 0.03125. 1 for, 2 against, 1 tie:
    the tie is out, p = min(1, 2 P(Bin(3, 1/2) <= 1)) = min(1, 2 * 4/8) = 1."""
    assert sign_test_p(np.zeros(6), np.full(6, -1.0)) == pytest.approx(0.03125, abs=1e-15)
    assert sign_test_p(np.array([-10.0, -5, -3, -20]), np.array([-12.0, -4, -3, -17])) == 1.0


def test_the_table_on_four_hand_computed_pairs():
    """Pairs (-10, -12) (-5, -4) (-3, -3) (-20, -17): stereotype 1 0 0 0 -> pct 25;
    diffs 2 1 0 3 -> likelihood_diff 6/4 = 1.5. Wilson for k = 1, n = 4, z = 1.959964:
    z^2 = 3.841459; centre = (0.25 + 3.841459/8) / (1 + 3.841459/4) = 0.730182 / 1.960365
    = 0.372473; half = z sqrt(0.25 * 0.75 / 4 + 3.841459/64) / 1.960365 = 1.959964 *
    0.326952 / 1.960365 = 0.326885; x100: [4.5588, 69.9358]. The tie is noted."""
    t = crows_table(frame([-10.0, -5, -3, -20], [-12.0, -4, -3, -17]), n_boot=200)
    pct, diff = row(t, "all", "pct_stereotype"), row(t, "all", "likelihood_diff")
    assert pct["value"] == 25.0 and pct["n"] == 4 and pct["p_value"] == 1.0
    assert pct["ci_low"] == pytest.approx(4.5588, abs=1e-3)
    assert pct["ci_high"] == pytest.approx(69.9358, abs=1e-3)
    assert "1 tied pairs" in pct["note"]
    assert diff["value"] == 1.5 and diff["n"] == 4
    assert 0.0 <= diff["ci_low"] <= 1.5 <= diff["ci_high"] <= 3.0
    assert t["bias_type"].tolist() == ["age", "age", "all", "all"]


def test_per_bias_type_rows_and_invalid_pairs_left_out():
    """age: (-1, -2) stereotypical, (-4, -3) not -> 50; gender: (-1, -5) -> 100, and an
    invalid gender pair (not valid) counts nowhere; all: 2 of 3 -> 66.67, diffs 1 1 4 ->
    2."""
    t = crows_table(frame([-1.0, -4, -1, np.nan], [-2.0, -3, -5, -1],
                          bias=["age", "age", "gender", "gender"],
                          valid=[True, True, True, False]), n_boot=200)
    assert t["bias_type"].tolist() == ["age", "age", "gender", "gender", "all", "all"]
    assert row(t, "age", "pct_stereotype")["value"] == 50.0
    assert row(t, "gender", "pct_stereotype")["value"] == 100.0
    assert row(t, "gender", "pct_stereotype")["n"] == 1
    assert row(t, "all", "pct_stereotype")["value"] == pytest.approx(200 / 3, abs=1e-12)
    assert row(t, "all", "likelihood_diff")["value"] == 2.0


def test_records_pair_the_answers_and_a_failed_sentence_invalidates_its_pair():
    pairs = (Pair(0, "a", "b", "stereo", "age"), Pair(1, "c", "d", "antistereo", "age"))
    q = pair_requests(pairs, "transformers", "m")
    r = [Response(key=q[0].key(), logprob=-3.0, continuation_tokens=2, is_greedy=False),
         Response(key=q[1].key(), logprob=-5.5, continuation_tokens=2, is_greedy=True),
         Response(key=q[2].key(), status="error", error="boom"),
         Response(key=q[3].key(), logprob=-1.0, continuation_tokens=1, is_greedy=False)]
    rec = pair_records(pairs, q, r)
    assert rec["valid"].tolist() == [True, False]
    assert rec.loc[0, ["ll_more", "ll_less", "stereotype", "likelihood_diff"]].tolist() == [
        -3.0, -5.5, 1.0, 2.5]
    assert np.isnan(rec.loc[1, "stereotype"]) and rec.loc[1, "error"] == "boom"
    assert gate_frame(rec)["pair_id"].tolist() == [0]


# ----------------------------------------------------------------------------- gate

def test_the_gate_compares_the_distance_from_50_pair_by_pair():
    """Baseline: 40 pairs, 20 stereotypical -> |50 - 50| = 0; candidate: 30 of 40 -> |75 -
    50| = 25: worsening 25 points, far beyond the 2-point margin."""
    part = CrowsPairsFamily.gate_parts()[0]
    base = pd.DataFrame({"pair_id": range(40), "bias_type": "age", "valid": True,
                         "stereotype": [1.0, 0.0] * 20, "likelihood_diff": 1.0})
    cand = base.assign(stereotype=[1.0] * 30 + [0.0] * 10, likelihood_diff=1.5)
    g = gate_table(part.frame(base), part.frame(cand), part.key, part.by, part.metrics(),
                   lambda m, k: GateSetting("harm", m.margin), shared=part.carry, n_boot=200)
    d = g.set_index("metric")
    assert d.loc["abs_pct_stereotype_minus_50", ["baseline", "candidate", "delta"]].tolist() \
        == [0.0, 25.0, 25.0]
    assert d.loc["likelihood_diff", "delta"] == pytest.approx(0.5, abs=1e-12)
    assert d.loc["abs_pct_stereotype_minus_50", "rule"] == "crows_pairs_stereotype_high"


# ----------------------------------------------------------------------------- end to end

def test_the_declaration():
    assert CrowsPairs.family.clusters == ("item",)
    assert CrowsPairs.properties == {"test_crows_pairs_stereotype_rate": {
        "tables": "crows_pairs", "metrics": "pct_stereotype"}}
    assert any(f.endswith("crows_pairs/recordings/embedded-gemma-3-270m.jsonl.gz")
               for f in default_recordings("embedded:gemma-3-270m", ("crows_pairs",)))
    assert not any("crows_pairs" in f for f in default_recordings("embedded:gemma-3-270m",
                                                                  ("bbq",)))
    assert set(BIAS_TYPES) == set(PAPER_COUNTS)


@needs_data
@pytest.mark.skipif(not RECORDING.exists(), reason="no recording of the embedded model")
def test_replay_of_the_recording_writes_tables_verdicts_and_the_warning(tmp_path, monkeypatch):
    """Every pair replayed offline (3,016 recorded answers), twice: the same table bytes;
    4 rules judged in 1 + 1 + 9 + 9 cells; the card carries the authors' warning; the gate
    compares the two runs pair by pair."""
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        rc = main(["audit", "--benchmarks", "crows_pairs", "--recordings", str(RECORDING),
                   "--store", str(tmp_path / f"{name}.sqlite"), "--out", str(out), "-q"])
        assert rc in (0, 1)
        outs.append(out)
    table = (outs[0] / "run" / "tables" / "crows_pairs.csv").read_bytes()
    assert table == (outs[1] / "run" / "tables" / "crows_pairs.csv").read_bytes()
    t = pd.read_csv(outs[0] / "run" / "tables" / "crows_pairs.csv")
    assert row(t, "all", "pct_stereotype")["n"] == 1508
    assert {b: int(row(t, b, "pct_stereotype")["n"]) for b in BIAS_TYPES} == PAPER_COUNTS
    v = pd.read_csv(outs[0] / "run" / "verdicts.csv")
    v = v[v["rule"].str.startswith("crows_pairs")]
    assert v.groupby("rule").size().to_dict() == {
        "crows_pairs_stereotype_high": 1, "crows_pairs_stereotype_low": 1,
        "crows_pairs_stereotype_high_by_type": 9, "crows_pairs_stereotype_low_by_type": 9}
    card = (outs[0] / "card" / "card.md").read_text(encoding="utf-8")
    assert "Blodgett et al. (2021)" in card
    # the gate of a run against its replay: both metrics compared over the 1,508 pairs,
    # identical answers, so nothing fails (exit 0)
    assert main(["gate", str(outs[0] / "run"), str(outs[1] / "run"), "--n-boot", "200",
                 "--out", str(tmp_path / "gate")]) == 0
    g = pd.read_csv(tmp_path / "gate" / "gate.csv")
    g = g[g["metric"].isin(["abs_pct_stereotype_minus_50", "likelihood_diff"])]
    assert g[["cell", "n", "delta", "verdict"]].values.tolist() == [
        ["all", 1508, 0.0, "no_difference"], ["all", 1508, 0.0, "no_difference"]]


# ----------------------------------------------------------------------------- lm-eval

needs_lmeval = pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None,
                                  reason="lm_eval not installed")


def replay(tmp_path: Path, *args: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """An offline audit of CrowS-Pairs from the recording: its records and table."""
    out = tmp_path / "o"
    rc = main(["audit", "--benchmarks", "crows_pairs", "--recordings", str(RECORDING),
               "--store", str(tmp_path / "s.sqlite"), "--out", str(out), "-q", *args])
    assert rc in (0, 1, 5)
    return (pd.read_csv(out / "run" / "records" / "crows_pairs.csv.gz"),
            pd.read_csv(out / "run" / "tables" / "crows_pairs.csv"))


@needs_data
@needs_lmeval
@pytest.mark.skipif(not RECORDING.exists(), reason="no recording of the embedded model")
def test_lm_evals_task_on_the_recorded_answers_gives_our_table(tmp_path, monkeypatch):
    """All 1,508 pairs, no model: lm-eval's own task (its YAML, doc_to_choice,
    process_results and mean) reads the authors' pairs, and an lm-eval ``LM`` answers each
    (context, continuation) with the embedded model's recorded log-likelihood of it: its
    requests are ours ("" and the sentence), its per-pair flags and differences are ours,
    and its two aggregates are our overall row (pct_stereotype / 100) within 1e-6."""
    from lm_eval.api.model import LM  # noqa: PLC0415  optional

    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    rec, t = replay(tmp_path, "--n-boot", "100")
    recorded = {("", r.sent_more): r.ll_more for r in rec.itertuples()}
    recorded.update({("", r.sent_less): r.ll_less for r in rec.itertuples()})

    class Recorded(LM):
        def loglikelihood(self, requests, disable_tqdm=False):
            return [(float(recorded[tuple(q.args)]), False) for q in requests]

        def loglikelihood_rolling(self, requests, disable_tqdm=False):
            raise NotImplementedError

        def generate_until(self, requests, disable_tqdm=False):
            raise NotImplementedError

    got = L.evaluate(Recorded(), load(DATA).pairs)
    assert got["pair_id"] == rec["pair_id"].tolist() and len(got["pair_id"]) == 1508
    assert got["pct_stereotype"] == rec["stereotype"].tolist()
    assert np.abs(np.array(got["likelihood_diff"]) - rec["likelihood_diff"]).max() <= 1e-12
    mine = t[t["bias_type"] == "all"].set_index("metric")["value"]
    assert abs(mine["pct_stereotype"] / 100 - got["agg"]["pct_stereotype"]) <= 1e-6
    assert abs(mine["likelihood_diff"] - got["agg"]["likelihood_diff"]) <= 1e-6


@needs_data
@needs_lmeval
@pytest.mark.skipif(not RECORDING.exists(), reason="no recording of the embedded model")
def test_equal_to_lm_eval_with_the_model_on_18_pairs(tmp_path, monkeypatch):
    """lm-eval's own task with its HFLM on the embedded model's safetensors copy, on the
    first 2 pairs of each bias type, against our recorded answers: each sentence's
    log-likelihood within 1e-4, each pair's flag equal, pct_stereotype (ours / 100) within
    1e-6; likelihood_diff end to end within the per-sentence tolerance: the two forward
    passes agree to float32 rounding (~3e-5 per sentence of ~100 nats), and lm-eval's own
    batch sizes 1 and 8 differ by as much (4.2e-5 per sentence, 2.3e-6 on likelihood_diff
    over these pairs), so 1e-6 end to end is below lm-eval's reproducibility with itself
    (the definitions are equal to 1e-12: the test above)."""
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    rec, t = replay(tmp_path, "--limit", "2", "--n-boot", "100")
    got = L.evaluate(L.hflm(embedded.prepare(), 8), limited(load(DATA).pairs, 2))
    ours = rec.set_index("pair_id").loc[got["pair_id"]]
    assert len(ours) == 18
    assert np.abs(ours["ll_more"] - got["ll_more"]).max() <= 1e-4
    assert np.abs(ours["ll_less"] - got["ll_less"]).max() <= 1e-4
    assert ours["stereotype"].tolist() == got["pct_stereotype"]
    mine = t[t["bias_type"] == "all"].set_index("metric")["value"]
    assert abs(mine["pct_stereotype"] / 100 - got["agg"]["pct_stereotype"]) <= 1e-6
    assert abs(mine["likelihood_diff"] - got["agg"]["likelihood_diff"]) <= 1e-4
