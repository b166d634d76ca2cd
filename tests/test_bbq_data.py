"""BBQ loader, intersectional filter (counts on ../shared/bbq), consistency sample and
clear errors on corrupt data (temp copies)."""
from __future__ import annotations

import hashlib
import json

import bbq_authors_reference as R
import pandas as pd
import pytest

from fairness_tests.benchmarks.bbq.data import OFFICIAL_SHA256, bbq_dir, load_bbq, load_filtered
from fairness_tests.benchmarks.bbq.filter import (
    filter_counts,
    filter_items,
    parse_tags,
    ses_occupations,
)
from fairness_tests.benchmarks.bbq.sample import consistency_sample, sample_record
from fairness_tests.core.errors import DataError

SHARED = bbq_dir()
pytestmark = pytest.mark.skipif(not (SHARED / "Race_x_SES.jsonl").exists(),
                                reason="../shared/bbq not present")


@pytest.fixture(scope="module")
def data():
    """``load_bbq(SHARED)``, through the parsed-input cache (``load_filtered``, which
    tests/test_core_cache.py checks equals ``load_bbq`` + ``filter_items``)."""
    return load_filtered(SHARED)[0]


@pytest.fixture(scope="module")
def kept():
    """``filter_items(data.items)``, through the same cache."""
    return load_filtered(SHARED)[1]


def test_loads_both_datasets_with_target_loc(data):
    n = data.items.groupby("dataset").size().to_dict()
    assert n == {"Race_x_SES": 11160, "Race_x_gender": 15960}   # README line counts
    # the README: target_loc is empty where no single option matches (blank tags)
    assert data.items["target_loc"].notna().sum() > 0.98 * len(data.items)
    assert data.items["unknown_loc"].notna().all()
    first = data.items.iloc[0]
    # line 1 of Race_x_SES.jsonl: ans2 is "Not enough info" (unknown); metadata target_loc 1
    assert (first.dataset, first.example_id, first.unknown_loc, first.target_loc) == \
        ("Race_x_SES", 0, 2.0, 1.0)


def test_sha256_recorded_and_stand_in_is_not_official(data):
    for name in ("Race_x_SES.jsonl", "Race_x_gender.jsonl", "additional_metadata.csv"):
        assert data.sha256[name] == hashlib.sha256((SHARED / name).read_bytes()).hexdigest()
    assert data.official is False      # the stand-in copy differs from the release
    with pytest.raises(DataError, match="not the official"):
        load_bbq(SHARED, require_official=True)


def test_intersectional_filter_counts(data, kept):
    counts = filter_counts(data.items, kept).set_index(["dataset", "context", "polarity"])
    ses = counts.loc["Race_x_SES"]
    gen = counts.loc["Race_x_gender"]
    assert ses["n_items"].sum() == 2880
    assert gen["n_items"].sum() == 5232
    assert (ses["n_items"] == 720).all()            # every context x polarity cell
    assert (gen["n_items"] == 1308).all()
    assert gen.groupby("context")["n_items"].sum().to_dict() == {"ambig": 2616,
                                                                "disambig": 2616}
    # disambiguated half: 50/50 stereotype-reinforcing vs counter-stereotypical
    for ds, n in (("Race_x_SES", 1440), ("Race_x_gender", 2616)):
        d = kept[(kept.dataset == ds) & (kept.context == "disambig")]
        assert (d["reinforcing"] == 1).sum() == n // 2 == (d["reinforcing"] == 0).sum()
    # every kept item has a group (the stereotyped individual's identity)
    assert kept["group"].notna().all()


def test_no_filter_keeps_all(data):
    assert len(filter_items(data.items, "none")) == 27120


def test_tag_parsing():
    race, var2 = parse_tags("Race_x_gender", pd.Series(["F-Black", "M-African American", "",
                                                        "unknown"]))
    assert race.tolist()[:2] == ["Black", "African American"]
    assert var2.tolist()[:2] == ["F", "M"]
    assert race.isna().tolist()[2:] == [True, True]
    race, var2 = parse_tags("Race_x_SES", pd.Series(["lowSES-Hispanic", "lowSES-F-Black",
                                                     "highSES-M-Native American", "lowSES"]))
    assert race.tolist()[:3] == ["Hispanic", "Black", "Native American"]
    assert var2.tolist()[:3] == ["lowSES", "lowSES", "highSES"]
    assert pd.isna(race.iloc[3])


def test_filter_rules_on_constructed_items(data):
    base = data.items.iloc[[0]].copy()   # Race_x_SES: "Hispanic professor" vs "bartender"

    def item(t0, t1, x0="White judge", x1="Black cashier", ds="Race_x_SES"):
        d = base.copy()
        d["dataset"] = ds
        d[["info_tag0", "info_tag1", "info_tag2"]] = [t0, t1, "unknown"]
        d[["info_text0", "info_text1", "info_text2"]] = [x0, x1, "Unknown"]
        return d

    cases = [
        (item("highSES-White", "lowSES-Black"), True),          # differ in both, occupations
        (item("highSES-White", "lowSES-White"), False),         # same race
        (item("lowSES-White", "lowSES-Black"), False),          # same SES
        (item("highSES-White", "lowSES-Black", "White rich", "Black on welfare"), False),
        (item("highSES-White", "lowSES-Black", x1="Black person"), False),  # one lacks one
        (item("", "lowSES-Black"), False),                      # empty tag
        (item("F-White", "M-Black", "White woman", "Black man", "Race_x_gender"), True),
        (item("F-White", "F-Black", ds="Race_x_gender"), False),
    ]
    items = pd.concat([c for c, _ in cases], ignore_index=True)
    items["example_id"] = range(len(items))
    kept = filter_items(items)
    assert sorted(kept["example_id"]) == [i for i, (_, k) in enumerate(cases) if k]


def test_packaged_occupations_equal_bbq_vocabulary():
    voc = pd.read_csv(SHARED / "templates" / "vocabulary.csv")
    occ = voc[(voc.Category == "SES") & (voc.SubCat == "Occupation")]["Name"].str.strip()
    assert ses_occupations() == tuple(sorted(occ))


def test_consistency_sample(kept):
    s = consistency_sample(kept, seed=3)
    assert len(s) == 448
    assert s.groupby("dataset").size().tolist() == [224, 224]
    assert (s.groupby(["dataset", "context"]).size() == 112).all()
    assert (s.groupby(["dataset", "context", "polarity"]).size() == 56).all()
    assert not s.duplicated(["dataset", "example_id"]).any()
    again = consistency_sample(kept, seed=3)
    assert s["example_id"].tolist() == again["example_id"].tolist()
    other = consistency_sample(kept, seed=4)
    assert s["example_id"].tolist() != other["example_id"].tolist()
    rec = sample_record(s, seed=3)
    assert rec["n_items"] == 448 and len(rec["example_ids"]["Race_x_SES"]) == 224
    with pytest.raises(DataError, match="fewer than"):
        consistency_sample(kept.head(100))


# ---------------------------------------------------------------- corrupt data
N_SMALL = 40


@pytest.fixture(scope="module")
def small_files() -> dict[str, str]:
    """The files of the small copy: the first 40 items of each file plus their metadata
    rows (name -> text), cut once for the module."""
    files, ids = {}, {}
    for ds in ("Race_x_SES", "Race_x_gender"):
        lines = (SHARED / f"{ds}.jsonl").read_text(encoding="utf-8").splitlines()[:N_SMALL]
        files[f"{ds}.jsonl"] = "\n".join(lines) + "\n"
        ids[ds] = {json.loads(x)["example_id"] for x in lines}
    meta = (SHARED / "additional_metadata.csv").read_text(encoding="utf-8").splitlines()
    keep = [meta[0]] + [row for row in meta[1:]
                        if int(row.split(",")[2]) in ids[row.split(",")[0]]]
    files["additional_metadata.csv"] = "\n".join(keep) + "\n"
    return files


@pytest.fixture
def small(tmp_path, small_files):
    """A valid small copy (yours to change): the first 40 items of each file plus their
    metadata rows."""
    d = tmp_path / "bbq"
    d.mkdir()
    for name, text in small_files.items():
        (d / name).write_text(text, encoding="utf-8")
    return d


def _edit_line(path, lineno, fn):
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[lineno - 1] = fn(lines[lineno - 1])
    path.write_text("\n".join(lines), encoding="utf-8")


def test_small_copy_loads(small):
    assert len(load_bbq(small).items) == 2 * N_SMALL


def test_bad_json_names_file_and_line(small):
    f = small / "Race_x_gender.jsonl"
    _edit_line(f, 7, lambda s: s[:50])
    with pytest.raises(DataError, match=r"Race_x_gender\.jsonl, line 7: invalid JSON"):
        load_bbq(small)


def test_truncated_jsonl_is_not_a_silent_partial_load(small):
    f = small / "Race_x_SES.jsonl"
    lines = f.read_text(encoding="utf-8").splitlines()
    f.write_text("\n".join(lines[:-3]) + "\n", encoding="utf-8")     # whole lines lost
    with pytest.raises(DataError, match=r"additional_metadata\.csv, line \d+: .*missing from "
                                        r"Race_x_SES\.jsonl \(3 metadata rows"):
        load_bbq(small)


def test_missing_items_file_is_one_line_naming_fetch_and_the_variable(small):
    (small / "Race_x_SES.jsonl").unlink()
    with pytest.raises(DataError) as e:
        load_bbq(small)
    msg = str(e.value)
    assert "\n" not in msg and "BBQ data not found" in msg and "Race_x_SES.jsonl" in msg
    assert "fairness-tests data fetch --categories Race_x_SES" in msg
    assert "FAIRNESS_BBQ_DIR" in msg


def test_without_metadata_target_loc_is_derived_and_stated(small):
    """No additional_metadata.csv: target_loc by the BBQ authors' rule, stated per
    category; the derived values equal the independent reference's."""
    with_meta = load_bbq(small)
    (small / "additional_metadata.csv").unlink()
    data = load_bbq(small)
    assert data.target_loc == {"Race_x_SES": "derived", "Race_x_gender": "derived"}
    assert with_meta.target_loc == {"Race_x_SES": "metadata", "Race_x_gender": "metadata"}
    assert "target_loc" in data.provenance() and "target_loc" not in with_meta.provenance()
    templates = {}
    for ds in ("Race_x_SES", "Race_x_gender"):
        templates[ds] = R.load_intersectional_templates(
            SHARED / "templates" / f"new_templates - {ds}.csv")
    for ds in ("Race_x_SES", "Race_x_gender"):
        lines = (small / f"{ds}.jsonl").read_text(encoding="utf-8").splitlines()
        got = data.items[data.items.dataset == ds].set_index("example_id")
        for line in lines:
            it = json.loads(line)
            var2, names = templates[ds][str(it["question_index"])]
            want = R.derive_target_loc(it, var2)
            t = got.at[it["example_id"], "target_loc"]
            assert (pd.isna(t) and want is None) or t == want
            assert got.at[it["example_id"], "label_type"] == R.label_type(it, names)


def test_item_without_metadata_row(small):
    m = small / "additional_metadata.csv"
    lines = m.read_text(encoding="utf-8").splitlines()
    m.write_text("\n".join(lines[:5] + lines[6:]) + "\n", encoding="utf-8")   # drop line 6
    with pytest.raises(DataError, match=r"Race_x_SES\.jsonl, line 5: example_id 4 has no row"):
        load_bbq(small)


def test_bad_target_loc_names_csv_line(small):
    _edit_line(small / "additional_metadata.csv", 3,
               lambda s: ",".join(s.split(",")[:3] + ["7"] + s.split(",")[4:]))
    with pytest.raises(DataError,
                       match=r"additional_metadata\.csv, line 3, key 'target_loc': target_loc '7'"):
        load_bbq(small)


def test_mismatched_question_index(small):
    _edit_line(small / "additional_metadata.csv", 4,
               lambda s: ",".join(s.split(",")[:1] + ["99"] + s.split(",")[2:]))
    with pytest.raises(DataError, match=r"additional_metadata\.csv, line 4: .*question_index"):
        load_bbq(small)


@pytest.mark.parametrize("field,value,match", [
    ("label", 3, "label must be 0, 1 or 2"),
    ("category", "Race_x_gender", "category"),
    ("context_condition", "vague", "context_condition"),
    ("example_id", "x", "example_id must be an integer"),
])
def test_bad_fields_name_the_line(small, field, value, match):
    def edit(s):
        r = json.loads(s)
        r[field] = value
        return json.dumps(r)
    _edit_line(small / "Race_x_SES.jsonl", 2, edit)
    with pytest.raises(DataError, match=rf"Race_x_SES\.jsonl, line 2\b.*: .*{match}"):
        load_bbq(small)


def test_duplicate_example_id(small):
    f = small / "Race_x_SES.jsonl"
    lines = f.read_text(encoding="utf-8").splitlines()
    lines[9] = lines[8]
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 10: duplicate example_id 8"):
        load_bbq(small)


def test_missing_directory(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_bbq(tmp_path / "nope")


def test_official_sha_table_matches_readme():
    readme = (SHARED / "README.md").read_text(encoding="utf-8")
    official = SHARED.parent / "bbq_official" / "README.md"
    if official.exists():
        readme += official.read_text(encoding="utf-8")
    for name, digest in OFFICIAL_SHA256.items():
        if official.exists() or name in ("Race_x_SES.jsonl", "Race_x_gender.jsonl",
                                         "additional_metadata.csv"):
            assert digest in readme, name

