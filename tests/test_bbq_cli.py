"""``fairness-tests bbq filter|score`` on the intersectional stand-in (``data fetch``:
tests/test_bbq_fetch.py)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import RAN

from fairness_tests.benchmarks.bbq.data import bbq_dir, derived_target_note, load_bbq
from fairness_tests.benchmarks.bbq.filter import filter_items
from fairness_tests.cli.main import main
from fairness_tests.plugin.session import made_lines

SHARED = bbq_dir()
pytestmark = pytest.mark.skipif(not (SHARED / "Race_x_SES.jsonl").exists(),
                                reason="../shared/bbq not present")


def run(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_filter_json_counts(capsys):
    rc, out, _ = run(["bbq", "filter", "--data", str(SHARED), "--format", "json"], capsys)
    assert rc == 0
    doc = json.loads(out)
    assert doc["totals"]["Race_x_SES"] == {"loaded": 11160, "kept": 2880,
                                           "by_context": {"ambig": 1440, "disambig": 1440}}
    assert doc["totals"]["Race_x_gender"]["kept"] == 5232
    cells = {(r["dataset"], r["context"], r["polarity"]): r["n_items"] for r in doc["rows"]}
    assert cells[("Race_x_gender", "disambig", "nonneg")] == 1308
    assert cells[("Race_x_SES", "ambig", "neg")] == 720
    assert doc["data"]["official"] is False


def test_filter_table_via_subprocess():
    p = subprocess.run([sys.executable, "-m", "fairness_tests.cli.main", "bbq", "filter",
                        "--data", str(SHARED), "--format", "table", "--filter", "none"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Race_x_gender: 15960 of 15960 items kept (none)" in p.stdout


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    """A small valid copy: the first 48 items of each file and every 401st after them
    (so several groups appear), with their metadata rows."""
    d = tmp_path_factory.mktemp("bbq_small")
    ids = {}
    for ds in ("Race_x_SES", "Race_x_gender"):
        every = (SHARED / f"{ds}.jsonl").read_text(encoding="utf-8").splitlines()
        lines = every[:48] + every[401::401]
        (d / f"{ds}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        ids[ds] = {json.loads(x)["example_id"]: json.loads(x) for x in lines}
    meta = (SHARED / "additional_metadata.csv").read_text(encoding="utf-8").splitlines()
    keep = [meta[0]] + [r for r in meta[1:] if int(r.split(",")[2]) in ids[r.split(",")[0]]]
    (d / "additional_metadata.csv").write_text("\n".join(keep) + "\n", encoding="utf-8")
    return d, ids


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_score_json_shape_and_values(small_dir, tmp_path, capsys):
    d, ids = small_dir
    rows = []
    # every item of the files answered correctly, 3 repeats; except Race_x_SES id 0:
    # no answer at all (missing) -- if the filter keeps it
    for ds, items in ids.items():
        for eid, it in items.items():
            if (ds, eid) == ("Race_x_SES", 0):
                continue
            for k in range(3):
                rows.append({"category": ds, "example_id": eid, "repeat": k,
                             "answer": it["label"]})
    f = write_jsonl(tmp_path / "p.jsonl", rows)
    rc, out, err = run(["bbq", "score", "--no-rules", "--data", str(d), "--predictions", str(f),
                        "--format", "json", "--filter", "none", "--n-boot", "200"], capsys)
    assert rc == 0, err
    doc = json.loads(out)
    by = {(r["dataset"], r["context"]): r for r in doc["rows"]}
    assert set(by) == {(ds, c) for ds in ids for c in ("ambig", "disambig")}
    for (_, ctx), r in by.items():
        # all answers are the label: accuracy 1 with a degenerate CI, nothing invalid
        assert r["accuracy"] == 1.0 and r["accuracy_ci"] == [1.0, 1.0]
        assert r["invalid_rate"] == 0.0
        assert ("s_amb" in r) == (ctx == "ambig") and ("s_dis" in r) == (ctx == "disambig")
        assert ("acc_reinf" in r) == (ctx == "disambig")
        for key in ("sf", "df", "df_smoothed", "df_eb"):
            assert key in r
        # every group treated alike (all answers correct): no disparity, whatever the
        # group sizes (the smoothed DF of this cell is a function of its group sizes)
        assert r["df_eb"] == 0.0
    # ambiguous items answered "unknown" -> no non-unknown answer -> s_amb null with reason
    amb = by[("Race_x_gender", "ambig")]
    assert amb["s_amb"] is None and "no non-unknown" in amb["notes"]["s_amb"]
    # disambiguated: every answer non-unknown and correct; s_DIS = 2 * reinforcing share - 1
    n_amb = sum(it["context_condition"] == "ambig" for it in ids["Race_x_SES"].values())
    assert by[("Race_x_SES", "ambig")]["n_items"] == n_amb - 1    # id 0 (ambig) missing
    assert doc["missing"]["n_items"] == 1
    assert doc["missing"]["example_ids"] == {"Race_x_SES": [0]}
    cons = doc["consistency"]
    for r in cons["rows"]:
        assert r["mfaa_mean"] == 100.0 and r["gtc_min"] == 100.0 and r["flagged"] == 0
    assert cons["pooled"]["n_items"] == sum(len(v) for v in ids.values()) - 1
    # SF / DF carry the permutation test and the bias-corrected value; every answer is
    # the label, so no group labelling changes anything: p = 1
    perm = doc["permutation"]
    assert set(perm) == {f"{ds}/{c}" for ds, c in by}
    for cell in perm.values():
        assert set(cell) == {"sf", "df", "df_smoothed", "df_eb"}
        assert cell["sf"]["n_permutations"] == 2000
        assert "within templates" in cell["sf"]["statistic"]
        assert cell["sf"]["p_value"] == 1.0


def test_score_df_unbounded_is_UB(small_dir, tmp_path, capsys):
    d, ids = small_dir
    # Race_x_gender disambiguated items: the unknown option everywhere except one item,
    # which gets the favourable answer -> its group has P(fav) > 0, the others 0.
    items = filter_items(load_bbq(d).items, "none")
    dis = items[(items.dataset == "Race_x_gender") & (items.context == "disambig")
                & items.group.notna()]
    groups = dis.groupby("group")
    assert groups.ngroups >= 2
    fav_item = dis.iloc[0]
    # the favourable answer: non-unknown and not target_loc
    fav_answer = ({0, 1, 2} - {int(fav_item.unknown_loc), int(fav_item.target_loc)}).pop()
    rows = [{"category": "Race_x_gender", "example_id": int(r.example_id),
             "answer": fav_answer if r.example_id == fav_item.example_id
             else int(r.unknown_loc)} for r in dis.itertuples()]
    f = write_jsonl(tmp_path / "p.jsonl", rows)
    rc, out, err = run(["bbq", "score", "--no-rules", "--data", str(d), "--predictions", str(f),
                        "--format", "json", "--filter", "none", "--n-boot", "100"], capsys)
    assert rc == 0, err
    doc = json.loads(out)
    row = [r for r in doc["rows"] if (r["dataset"], r["context"]) ==
           ("Race_x_gender", "disambig")][0]
    # one group has P(fav) > 0, another P(fav) = 0 -> DF unbounded
    assert row["df"] == "UB"
    assert isinstance(row["df_smoothed"], float)
    assert "consistency" not in doc                 # one repeat only


@pytest.mark.parametrize("line,match", [
    ('{"category": "Race_x_SES", "example_id": 1, "answer": 1', "line 2: invalid JSON"),
    ('{"category": "Race_x_SES", "example_id": 1, "answer": 5}', "line 2, key 'answer'"),
    ('{"category": "Race_x_SES", "example_id": 1}', "line 2, key 'answer'"),
    ('{"category": "Race_x_SES", "example_id": 0, "answer": 2}', "line 2: duplicate"),
    ('{"category": "Race_x_SES", "example_id": 999999, "answer": 2}',
     "line 2, key 'example_id': Race_x_SES example_id 999999 is not in the BBQ data"),
])
def test_score_bad_predictions_line(small_dir, tmp_path, capsys, line, match):
    d, _ = small_dir
    f = tmp_path / "bad.jsonl"
    f.write_text('{"category": "Race_x_SES", "example_id": 0, "answer": 1}\n' + line + "\n",
                 encoding="utf-8")
    rc, out, err = run(["bbq", "score", "--no-rules", "--data", str(d), "--predictions",
                        str(f)], capsys)
    assert rc == 2
    assert "bad.jsonl" in err and match in err


def test_score_table_format(small_dir, tmp_path, capsys):
    d, ids = small_dir
    rows = [{"category": ds, "example_id": e, "answer": None}
            for ds, items in ids.items() for e in items]
    f = write_jsonl(tmp_path / "p.jsonl", rows)
    rc, out, _ = run(["bbq", "score", "--no-rules", "--data", str(d), "--predictions", str(f),
                      "--format", "table", "--filter", "none", "--n-boot", "100"], capsys)
    assert rc == 0
    header = out.splitlines()[0].split()
    assert header[:4] == ["dataset", "context", "n_items", "accuracy"]
    assert "invalid_rate" in header


def test_score_misspelt_category_names_the_line_and_the_closest_name(small_dir, tmp_path, capsys):
    """Issue 10, defect 9: an unknown category is an error, not silently ignored."""
    d, ids = small_dir
    eid = next(iter(ids["Race_x_SES"]))
    p = write_jsonl(tmp_path / "p.jsonl", [
        {"category": "Race_x_SES", "example_id": eid, "answer": 1},
        {"category": "Race_x_SESS", "example_id": eid, "answer": 1}])
    assert main(["bbq", "score", "--no-rules", "--data", str(d), "--predictions", str(p)]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "'Race_x_SESS'" in err and "did you mean 'Race_x_SES'" in err


def test_score_empty_predictions_is_an_error(small_dir, tmp_path, capsys):
    d, _ = small_dir
    p = tmp_path / "p.jsonl"
    p.write_text("\n")
    assert main(["bbq", "score", "--no-rules", "--data", str(d), "--predictions", str(p)]) == 2
    assert "no predictions" in capsys.readouterr().err


def test_score_duplicate_names_the_repeat_number(small_dir, tmp_path, capsys):
    d, ids = small_dir
    row = {"category": "Race_x_SES", "example_id": next(iter(ids["Race_x_SES"])),
           "repeat": 3, "answer": 1}
    p = write_jsonl(tmp_path / "p.jsonl", [row, row])
    assert main(["bbq", "score", "--no-rules", "--data", str(d), "--predictions", str(p)]) == 2
    err = capsys.readouterr().err
    assert "repeat 3 rotation 0 (first on line 1)" in err and "bound method" not in err


def test_score_letter_probs_give_exact_expected_consistency(small_dir, tmp_path, capsys):
    d, ids = small_dir
    rows = []
    # every item asked twice under the distribution (0.5, 0.5, 0): the two draws agree
    # with probability 1/2, so E[max count] = 1.5 of 2 -> expected MFAA 75% exactly;
    # expected GTC = 100 * p(label): 50 for labels 0 and 1, 0 for label 2
    gtc = []
    for ds, items in ids.items():
        for eid, it in items.items():
            for k, a in enumerate((0, 1)):
                rows.append({"category": ds, "example_id": eid, "repeat": k, "answer": a,
                             "letter_probs": [0.5, 0.5, 0.0]})
            gtc.append(50.0 if it["label"] in (0, 1) else 0.0)
    f = write_jsonl(tmp_path / "p.jsonl", rows)
    rc, out, err = run(["bbq", "score", "--no-rules", "--data", str(d), "--predictions", str(f),
                        "--format", "json", "--filter", "none", "--n-boot", "100"], capsys)
    assert rc == 0, err
    pooled = json.loads(out)["consistency"]["pooled"]
    assert pooled["mfaa_expected_mean"] == pytest.approx(75.0)
    assert pooled["gtc_expected_mean"] == pytest.approx(sum(gtc) / len(gtc))
    assert 0 < pooled["repeats_fit_p_value"] <= 1
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"category": "Race_x_SES", "example_id": 0,
                                                 "answer": 0, "letter_probs": [0.9, 0.9, 0]}])
    rc, out, err = run(["bbq", "score", "--no-rules", "--data", str(d), "--predictions", str(bad),
                        "--filter", "none"], capsys)
    assert rc == 2 and "line 1" in err and "letter_probs" in err


def test_compare_of_a_run_without_a_model_name_is_one_clean_error(small_dir, tmp_path, capsys):
    """A run scored without --model has no model id: compare without --names must say
    so (exit 2, naming the directory), not fail on ``None.strip()`` (found by mypy)."""
    d, ids = small_dir
    rows = [{"category": ds, "example_id": eid, "answer": it["label"]}
            for ds, items in ids.items() for eid, it in items.items()]
    p = write_jsonl(tmp_path / "p.jsonl", rows)
    for out, model in (("named", ["--model", "named"]), ("anonymous", [])):
        assert main(["bbq", "score", "--data", str(d), "--predictions", str(p), "--out",
                     str(tmp_path / out), "--n-boot", "100", "--format", "json", *model]) in RAN
    capsys.readouterr()
    rc = main(["compare", str(tmp_path / "named"), str(tmp_path / "anonymous"), "--out",
               str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert f"empty model name for run directory {tmp_path / 'anonymous'}" in err


def test_a_derived_target_is_said_on_the_console_card_and_pytest_summary(tmp_path, capsys):
    """Issue 32: without additional_metadata.csv the stereotyped target is derived; the
    JSON and the card said so, the console did not. One stderr line now, the card's own
    text (one function, :func:`derived_target_note`), and the pytest summary line."""
    data = tmp_path / "bbq"
    data.mkdir()
    (data / "Race_x_SES.jsonl").write_bytes((SHARED / "Race_x_SES.jsonl").read_bytes())
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"category": "Race_x_SES", "example_id": 8, "answer": 1})
                     + "\n")
    assert main(["bbq", "score", "--predictions", str(preds), "--data", str(data),
                 "--categories", "Race_x_SES", "--n-boot", "100", "--no-rules"]) == 0
    err = capsys.readouterr().err
    note = derived_target_note({"Race_x_SES": "derived"})
    assert note == ("derived by the BBQ authors' rule (BBQ_results_metadata.R) for "
                    "Race_x_SES: no additional_metadata.csv rows")
    said = [x for x in err.splitlines() if "target_loc" in x]
    assert said == [f"fairness-tests: note: BBQ target_loc {note}"], err
    assert derived_target_note({"Race_x_SES": "metadata"}) is None
    run = tmp_path / "sid" / "m"
    run.mkdir(parents=True)
    (run / "made-by.json").write_text(json.dumps({
        "model": "m", "how": "audited", "by": "main", "seconds": 1.0,
        "notes": [f"note: BBQ target_loc {note}"]}))
    assert made_lines(tmp_path / "sid")[1] == f"m: note: BBQ target_loc {note}"
