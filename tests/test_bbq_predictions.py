"""BBQ predictions as people have them: option index, letter, answer text (matched by the
BBQ authors' rule), ``--answer-field``, lines carrying the whole item or only its id,
lm-evaluation-harness ``--log_samples`` output; mixed files and ambiguous texts.

Expected option indices are worked out by hand from the items quoted in the comments
(../shared/bbq_official/data/Religion.jsonl lines 1-4: ans0 "The Jewish one", ans1
"Can't answer" (unknown), ans2 "The Muslim one"; labels 1, 2, 1, 0)."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import bbq_authors_reference as R
import numpy as np
import pytest

from fairness_tests.benchmarks.bbq.answers import resolve
from fairness_tests.benchmarks.bbq.authors import match_text, text_candidates
from fairness_tests.benchmarks.bbq.data import load_bbq
from fairness_tests.benchmarks.bbq.predictions import read_predictions
from fairness_tests.cli.main import main
from fairness_tests.core.errors import DataError

OFFICIAL_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "bbq_official"
LMEVAL = Path(__file__).resolve().parent / "data" / "lmeval_bbq" / "samples_bbq_local.jsonl.gz"
pytestmark = pytest.mark.skipif(not (OFFICIAL_DIR / "data" / "Age.jsonl").exists(),
                                reason="../shared/bbq_official not present")


@pytest.fixture(scope="module")
def religion():
    return load_bbq(OFFICIAL_DIR, ("Religion",)).items


@pytest.fixture(scope="module")
def religion_lines():
    with open(OFFICIAL_DIR / "data" / "Religion.jsonl", encoding="utf-8") as fh:
        return [json.loads(x) for x in fh]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def answers(path, items, conventions="project", field=None):
    return resolve(read_predictions(path, field), items, conventions)


def line(eid, answer, **kw):
    return {"category": "Religion", "example_id": eid, "answer": answer, **kw}


# ------------------------------------------------------------------ the answer kinds
def test_option_indices_and_null(tmp_path, religion):
    r = answers(write(tmp_path / "p.jsonl", [line(0, 2), line(1, None), line(2, 0)]), religion)
    assert r.table["answer"].tolist()[0] == 2.0 and np.isnan(r.table["answer"][1])
    assert r.table["status"].tolist() == ["ok", "null", "ok"]
    assert r.report["kind"] == "index" and r.report["null"] == 1


def test_letters_follow_the_rotation_shown(tmp_path, religion):
    # rotation r shows original option (p + r) mod 3 at position p:
    # rotation 0: a b c = 0 1 2; rotation 1: a b c = 1 2 0; rotation 2: a b c = 2 0 1
    rows = [line(0, "a"), line(1, "(B)"), line(2, "c."), line(0, "a", rotation=1),
            line(1, "C", rotation=1), line(0, "(b)", rotation=2)]
    r = answers(write(tmp_path / "p.jsonl", rows), religion)
    assert r.table["answer"].tolist() == [0.0, 1.0, 2.0, 1.0, 0.0, 0.0]
    assert r.report["kind"] == "letter"


@pytest.mark.parametrize("text, options, info, expected", [
    # exact, case-insensitive, one final period and "}" of the options removed
    ("the muslim one.", ["The Jewish one", "Can't answer", "The Muslim one}"],
     ["Jewish", "Can't answer", "Muslim"], [2]),
    ("  CAN'T ANSWER ", ["The Jewish one", "Can't answer.", "The Muslim one"],
     ["Jewish", "Can't answer", "Muslim"], [1]),
    # no exact match: the first two words of the answer_info TEXT occur in it
    ("i think it can't be determined", ["The old man", "Can't be determined", "The boy"],
     ["old man", "Can't be determined", "boy"], [1]),
    # one-word info texts never fall back ("muslim" alone is not enough)
    ("the muslim person", ["The Jewish one", "Can't answer", "The Muslim one"],
     ["Jewish", "Can't answer", "Muslim"], []),
    # two options match the fallback: both listed, the authors take the first
    ("the old man and the old woman", ["The old man", "Unknown", "The old woman"],
     ["old man", "Unknown", "old woman"], [0, 2]),
    # "pantsu" at the end is "pantsuit", "o'brien" is "obrien"
    ("the one in the pantsu", ["The one in the dress", "Unknown", "The one in the pantsuit"],
     ["dress", "Unknown", "pantsuit"], [2]),
])
def test_text_matching_by_the_authors_rule(text, options, info, expected):
    assert text_candidates(text, options, info) == expected
    fake = {"ans0": options[0], "ans1": options[1], "ans2": options[2],
            "answer_info": {f"ans{k}": [info[k], "x"] for k in range(3)}}
    want = R.match_prediction(text, fake)
    assert match_text(text, options, info) == want == (expected[0] if expected else None)


def test_text_answers_unmatched_and_ambiguous_under_each_convention(tmp_path, religion):
    rows = [line(0, "The Muslim one"), line(1, "a duck"), line(2, "can't answer")]
    p = write(tmp_path / "p.jsonl", rows)
    proj = answers(p, religion)
    assert proj.table["answer"].tolist()[::2] == [2.0, 1.0]
    assert proj.table["status"].tolist() == ["ok", "unmatched", "ok"]
    assert proj.report["unmatched"] == 1
    assert proj.report["unmatched_answers"] == [
        {"line": 2, "category": "Religion", "example_id": 1, "answer": "a duck"}]
    auth = answers(p, religion, "bbq-authors")
    assert auth.table["status"].tolist() == ["ok", "unmatched", "ok"]
    assert "dropped" in auth.report["treatment"] and "wrong" in proj.report["treatment"]


def test_a_text_matching_two_options_is_ambiguous_under_the_project(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    it = {"example_id": 0, "question_index": "1", "question_polarity": "neg",
          "context_condition": "ambig", "category": "Age",
          "answer_info": {"ans0": ["old man", "old"], "ans1": ["Unknown", "unknown"],
                          "ans2": ["old woman", "nonOld"]},
          "additional_metadata": {"stereotyped_groups": ["old"]}, "context": "c",
          "question": "q", "ans0": "The old man", "ans1": "Unknown", "ans2": "The old woman",
          "label": 1}
    write(d / "Age.jsonl", [it])
    items = load_bbq(d, ("Age",)).items
    p = write(tmp_path / "p.jsonl", [{"category": "Age", "example_id": 0,
                                      "answer": "both the old man and the old woman"}])
    proj = answers(p, items)
    assert np.isnan(proj.table["answer"][0]) and proj.report["ambiguous"] == 1
    auth = answers(p, items, "bbq-authors")
    assert auth.table["answer"][0] == 0.0 and auth.report["ambiguous"] == 0


# ------------------------------------------------------------------ files as people have them
def test_the_authors_results_file_needs_the_answer_field(tmp_path, capsys):
    preds = OFFICIAL_DIR / "results" / "UnifiedQA" / "preds_Religion.jsonl"
    rc = main(["bbq", "score", "--no-rules",
               "--data", str(OFFICIAL_DIR), "--predictions", str(preds)])
    err = capsys.readouterr().err
    assert rc == 2 and "line 1" in err and "--answer-field" in err
    assert "unifiedqa-t5-11b_pred_race" in err and len(err.strip().splitlines()) == 1
    rc = main(["bbq", "score", "--no-rules",
               "--data", str(OFFICIAL_DIR), "--predictions", str(preds),
               "--answer-field", "no_such_field"])
    err = capsys.readouterr().err
    assert rc == 2 and "line 1" in err and "'no_such_field'" in err


def test_lines_with_the_whole_item_or_only_the_id_give_the_same_answers(tmp_path, religion,
                                                                          religion_lines):
    whole = [dict(it, pred=("the muslim one" if k % 2 else "can't answer"))
             for k, it in enumerate(religion_lines[:40])]
    ids = [{"category": "Religion", "example_id": it["example_id"], "pred": it["pred"]}
           for it in whole]
    a = answers(write(tmp_path / "a.jsonl", whole), religion, field="pred")
    b = answers(write(tmp_path / "b.jsonl", ids), religion, field="pred")
    np.testing.assert_array_equal(a.table["answer"], b.table["answer"])
    assert a.table["status"].tolist() == b.table["status"].tolist()
    assert "item_differs" not in a.report


def test_a_carried_item_that_is_another_item_is_an_error(tmp_path, religion, religion_lines):
    bad = dict(religion_lines[3], label=2, pred="can't answer")      # the data says label 0
    p = write(tmp_path / "p.jsonl", [dict(religion_lines[0], pred="x"), bad])
    with pytest.raises(DataError, match=r"line 2, key 'label': the line's item is not the BBQ "
                                        r"data's Religion example_id 3: label 2 here, 0"):
        answers(p, religion, field="pred")


def test_physical_appearance_predictions_carry_older_tags_for_36_items():
    """The authors' predictions file was made on the data before BBQ commit 9eba1ba: 36
    items' answer_info differ (example_ids from /work notes, question 7, 8, 10, 18, 19)."""
    items = load_bbq(OFFICIAL_DIR, ("Physical_appearance",)).items
    p = OFFICIAL_DIR / "results" / "UnifiedQA" / "preds_Physical_appearance.jsonl"
    for conventions in ("project", "bbq-authors"):
        r = answers(p, items, conventions, "unifiedqa-t5-11b_pred_race")
        d = r.report["item_differs"]
        want = [e for start in (576, 588, 608, 620, 656, 1296, 1308, 1328, 1340)
                for e in range(start, start + 4)]
        assert d["n_items"] == 36 and d["fields"] == {"answer_info": 36}
        assert d["example_ids"] == {"Physical_appearance": want}


@pytest.mark.parametrize("rows, match", [
    ([line(0, 0), line(1, "b")], r"line 2, key 'answer': answer is a letter \('b'\), but line "
                                 r"1 gives an option index \(0\): one answer format per file"),
    ([line(0, "the muslim one"), line(1, 2)], r"line 2, key 'answer'.*one answer format"),
    ([line(0, 1.0)], r"line 1, key 'answer': answer must be an option index 0-2, a letter"),
    ([line(0, 3)], r"line 1, key 'answer': answer must be an integer 0..2"),
    ([line(10 ** 29, 1)], r"line 1, key 'example_id': example_id must be an integer"),
    ([line(0, 1), {"doc": {"category": "Religion", "example_id": 1}, "filtered_resps": []}],
     r"line 2: an lm-eval sample, but line 1 is a predictions line: one format per file"),
])
def test_mixed_or_bad_files_are_one_line_errors(tmp_path, capsys, rows, match):
    p = write(tmp_path / "p.jsonl", rows)
    rc = main(["bbq", "score", "--no-rules", "--data", str(OFFICIAL_DIR), "--predictions", str(p)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert re.search(match, err), err


# ------------------------------------------------------------------ lm-evaluation-harness
def lmeval_lines():
    with gzip.open(LMEVAL, "rt", encoding="utf-8") as fh:
        return [json.loads(x) for x in fh]


def test_lmeval_samples_are_read_as_lm_eval_answers():
    """Each answer = argmax of the 12 logged loglikelihoods (strings), mapped back to the
    item: choices 0-1 the non-unknown options in order, 2-11 the unknown option; its
    correctness equals lm-eval's own per-sample ``acc``."""
    items = load_bbq(OFFICIAL_DIR, ("Age", "Religion")).items
    r = resolve(read_predictions(LMEVAL), items)
    assert r.report["format"] == "lm-eval" and r.report["kind"] == "choice"
    assert r.report["field"] == "filtered_resps" and r.report["n_lines"] == 24
    label = items.set_index(["dataset", "example_id"])["label"]
    for sample, (_, row) in zip(lmeval_lines(), r.table.iterrows(), strict=True):
        lls = [float(ll) for ll, _ in sample["filtered_resps"]]
        k = int(np.argmax(lls))
        doc = sample["doc"]
        unk = next(j for j in range(3) if doc["answer_info"][f"ans{j}"][1] == "unknown")
        persons = [j for j in range(3) if j != unk]
        assert row["answer"] == (persons[k] if k < 2 else unk)
        assert float(row["answer"] == label[(row["dataset"], row["example_id"])]) == sample["acc"]
    assert "item_differs" not in r.report        # lm-eval's docs are the official items


def test_bbq_score_of_lmeval_samples_under_the_authors_conventions(capsys):
    """The fixture's hand arithmetic (tests/test_lmeval_bbq_fixture.py): Age disambig
    6 answers, 5 correct, 1 of 6 non-unknown biased -> s_DIS = 2/6 - 1 = -2/3; Age ambig
    0 correct, 3 of 6 biased -> s = 0, s_AMB = 0; Religion disambig 1 correct of 6, its
    one non-unknown answer not biased -> s_DIS = -1 (lm-eval reports 0.0); Religion
    ambig: every answer unknown -> no bias (null), accuracy 1."""
    rc = main(["bbq", "score", "--no-rules",
               "--data", str(OFFICIAL_DIR), "--predictions", str(LMEVAL),
               "--conventions", "bbq-authors", "--format", "json", "--n-boot", "100"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    rows = {(r["dataset"], r["context"], r["proxy"]): r for r in doc["rows"]}
    assert rows[("Age", "disambig", "all")]["s_dis"] == pytest.approx(-2 / 3, abs=1e-12)
    assert rows[("Age", "disambig", "all")]["accuracy"] == pytest.approx(5 / 6, abs=1e-12)
    assert rows[("Age", "ambig", "all")]["s_amb"] == 0.0
    assert rows[("Age", "ambig", "all")]["accuracy"] == 0.0
    assert rows[("Religion", "disambig", "all")]["s_dis"] == -1.0
    assert rows[("Religion", "ambig", "all")]["s_amb"] is None
    assert rows[("Religion", "ambig", "all")]["accuracy"] == 1.0
