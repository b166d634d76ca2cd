"""All eleven BBQ categories, both directory layouts, target_loc from the official
metadata or derived by the BBQ authors' rule (checked against the independent reference
tests/bbq_authors_reference.py on every item), the filter and the SF/DF groups of
single-attribute categories."""
from __future__ import annotations

import csv
import hashlib
import json
import os
from pathlib import Path

import bbq_authors_reference as R
import numpy as np
import pandas as pd
import pytest

from fairness_tests.benchmarks.bbq import authors
from fairness_tests.benchmarks.bbq.data import load_bbq
from fairness_tests.benchmarks.bbq.filter import filter_items
from fairness_tests.benchmarks.bbq.official import CATEGORIES, resolve_categories
from fairness_tests.core.errors import ConfigError, DataError

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
OFFICIAL_DIR = SHARED / "bbq_official"
STAND_IN = SHARED / "bbq"
SIX = ("Age", "Disability_status", "Nationality", "Physical_appearance", "Religion",
       "Sexual_orientation")
LINES = {"Age": 3680, "Disability_status": 1556, "Nationality": 3080,
         "Physical_appearance": 1576, "Religion": 1200, "Sexual_orientation": 864}  # README
pytestmark = pytest.mark.skipif(not (OFFICIAL_DIR / "data" / "Age.jsonl").exists()
                                or not (STAND_IN / "Race_x_SES.jsonl").exists(),
                                reason="../shared/bbq_official or ../shared/bbq not present")


@pytest.fixture(scope="module")
def six():
    return load_bbq(OFFICIAL_DIR, SIX)


def test_the_six_official_categories_load_from_the_repository_layout(six):
    assert six.items.groupby("dataset").size().to_dict() == LINES
    assert six.categories == SIX
    assert six.official is True                       # git blob ids and sha256 all match
    assert six.target_loc == dict.fromkeys(SIX, "derived")
    assert six.items["label_type"].eq("label").all()  # every question_index <= 25


def test_derived_target_loc_equals_the_independent_reference_on_every_item(six):
    got = six.items.set_index(["dataset", "example_id"])["target_loc"]
    n = 0
    for cat in SIX:
        with open(OFFICIAL_DIR / "data" / f"{cat}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                it = json.loads(line)
                want = R.derive_target_loc(it)
                t = got[(cat, it["example_id"])]
                assert (want is None and np.isnan(t)) or t == want, (cat, it["example_id"])
                n += 1
    assert n == sum(LINES.values())
    assert got.notna().all()          # the notes: 0 items without target_loc in the six


def test_a_flat_copy_loads_the_same(tmp_path, six):
    for cat in ("Religion", "Sexual_orientation"):
        os.symlink(OFFICIAL_DIR / "data" / f"{cat}.jsonl", tmp_path / f"{cat}.jsonl")
    flat = load_bbq(tmp_path, ("Religion", "Sexual_orientation"))
    rows = six.items[six.items.dataset.isin(["Religion", "Sexual_orientation"])]
    pd.testing.assert_frame_equal(flat.items.reset_index(drop=True),
                                  rows.reset_index(drop=True))


def test_packaged_intersectional_templates_equal_the_official_templates():
    """The packaged extract equals the official template files (whose git blob ids are
    the release's: checked here)."""
    blobs = {"Race_x_SES": "cd3f1224d8d071f4aa0061672dee8ab847394db3",
             "Race_x_gender": "07f9d7333c91fcf7b0913fb8e16e505717799d2f"}
    packaged = authors.intersectional_templates()
    for cat, blob in blobs.items():
        f = STAND_IN / "templates" / f"new_templates - {cat}.csv"
        data = f.read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob
        ref = R.load_intersectional_templates(f)
        mine = {q: v for (c, q), v in packaged.items() if c == cat}
        assert mine == ref


# ------------------------------------------------------------ all eleven categories
def item(category, example_id, qi="1", polarity="neg", context="ambig", groups=("x",),
         info=(("a", "a"), ("b", "b"), ("Unknown", "unknown")), label=2, options=None):
    if options is None:
        options = [t if tag == "unknown" else f"The {t}" for t, tag in info]
    it = {"example_id": example_id, "question_index": qi, "question_polarity": polarity,
          "context_condition": context, "category": category,
          "answer_info": {f"ans{k}": list(info[k]) for k in range(3)},
          "additional_metadata": {"subcategory": "None", "stereotyped_groups": list(groups),
                                  "version": "a", "source": ""},
          "context": "c", "question": "q", "label": label}
    it.update({f"ans{k}": options[k] for k in range(3)})
    return it


#: three categories not in ../shared, written by hand; expected target_loc worked out
#: from the authors' rule in the comments (and checked against the reference)
HAND = {
    "Gender_identity": [
        # KSG "F": tag woman -> F is found -> option 0 (neg); nonneg -> the other (1)
        (item("Gender_identity", 0, groups=("F",), info=(("woman", "woman"), ("man", "man"),
                                                          ("Unknown", "unknown"))), 0),
        (item("Gender_identity", 1, polarity="nonneg", groups=("F",),
              info=(("woman", "woman"), ("man", "man"), ("Unknown", "unknown"))), 1),
        # question 30 (> 25): a name item; KSG "trans" list -> "trans", tag trans_F hits
        (item("Gender_identity", 2, qi="30", groups=("transgender women", "transgender men"),
              info=(("Unknown", "unknown"), ("Mary", "nonTrans_F"), ("Jo", "trans_F"))), 2),
    ],
    "Race_ethnicity": [
        # "F-Black" -> "Black" found in "black, african american" -> option 1
        (item("Race_ethnicity", 0, qi="40", groups=("Black", "African American"),
              info=(("Emily", "F-White"), ("Keisha", "F-Black"), ("Unknown", "unknown"))), 1),
        # "African": found, but the rule sets it back to 0 -> Black (option 0) is the target
        (item("Race_ethnicity", 1, groups=("Black", "African American"),
              info=(("Black", "Black"), ("African", "African"), ("Unknown", "unknown"))), 0),
    ],
    "SES": [
        # "low SES" -> "lowSES"; tag lowSES found (highSES not) -> option 1
        (item("SES", 0, qi="8", groups=("low SES",),
              info=(("lawyer", "highSES"), ("cashier", "lowSES"), ("Unknown", "unknown"))), 1),
        # both tags found (regex "SES" in lowSES?) no: tags "lowSES"/"highSES" vs "lowses":
        # only lowSES -> option 0; nonneg -> the other non-unknown option, 2
        (item("SES", 1, polarity="nonneg", groups=("low SES",),
              info=(("janitor", "lowSES"), ("Unknown", "unknown"), ("doctor", "highSES"))), 2),
    ],
}


@pytest.fixture(scope="module")
def eleven(tmp_path_factory):
    """All eleven categories in one flat directory: the six official files and the two
    intersectional stand-ins (with their metadata file) linked, three written by hand."""
    d = tmp_path_factory.mktemp("eleven")
    for cat in SIX:
        os.symlink(OFFICIAL_DIR / "data" / f"{cat}.jsonl", d / f"{cat}.jsonl")
    for name in ("Race_x_SES.jsonl", "Race_x_gender.jsonl", "additional_metadata.csv"):
        os.symlink(STAND_IN / name, d / name)
    for cat, rows in HAND.items():
        (d / f"{cat}.jsonl").write_text("".join(json.dumps(it) + "\n" for it, _ in rows),
                                        encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def eleven_all(eleven):
    """``load_bbq(eleven, ("all",))``, loaded once for the module (read-only)."""
    return load_bbq(eleven, ("all",))


def test_hand_items_follow_the_rule_and_the_reference():
    for rows in HAND.values():
        for it, want in rows:
            assert authors.target_loc(it) == want == R.derive_target_loc(it)


def test_all_eleven_categories(eleven_all):
    data = eleven_all
    assert data.categories == CATEGORIES
    assert len(CATEGORIES) == 11
    assert data.target_loc["Race_x_SES"] == "metadata"       # the metadata file has them
    assert data.target_loc["Age"] == data.target_loc["SES"] == "derived"
    got = data.items.set_index(["dataset", "example_id"])
    for cat, rows in HAND.items():
        for it, want in rows:
            assert got.at[(cat, it["example_id"]), "target_loc"] == want
    assert got.at[("Gender_identity", 2), "label_type"] == "name"
    assert got.at[("SES", 0), "label_type"] == "label"       # question 8: by number


def test_filter_applies_to_the_intersectional_categories_only(eleven, eleven_all):
    data = eleven_all
    kept = filter_items(data.items, "intersectional")
    n = kept.groupby("dataset").size()
    assert n["Race_x_SES"] == 2880 and n["Race_x_gender"] == 5232    # docs/bbq.md counts
    for cat in (*SIX, *HAND):
        assert n[cat] == (data.items.dataset == cat).sum()
    both = filter_items(load_bbq(eleven).items, "intersectional")
    assert both.equals(kept[kept.dataset.isin(["Race_x_SES", "Race_x_gender"])]
                       .reset_index(drop=True)[both.columns])


def test_single_attribute_groups_come_from_the_tags(six, eleven):
    kept = filter_items(six.items, "intersectional")
    age = kept[kept.dataset == "Age"].set_index("example_id")
    # Age 0: neg, KSG old, target 0 ("grandfather", old): the stereotyped person is old
    # Age 2: nonneg, same options: target 1 (grandson), the stereotyped person is still 0
    assert age.at[0, "group"] == "old" and age.at[2, "group"] == "old"
    assert set(age["group"]) == {"old", "nonOld"}
    hand = filter_items(load_bbq(eleven, ("Race_ethnicity", "Gender_identity")).items, "none")
    g = hand.set_index(["dataset", "example_id"])["group"]
    assert g[("Race_ethnicity", 0)] == "Black"          # "F-Black": one attribute, race
    assert g[("Gender_identity", 0)] == "F"             # "woman" -> F


def test_categories_option_values():
    assert resolve_categories(None) == ("Race_x_SES", "Race_x_gender")
    assert resolve_categories(("all",)) == CATEGORIES
    assert resolve_categories(("Religion", "Age", "Age")) == ("Age", "Religion")
    with pytest.raises(ConfigError, match="unknown BBQ category 'Agee' .did you mean 'Age'"):
        resolve_categories(("Agee",))


def test_metadata_rows_repeated_for_one_item(tmp_path):
    """Rows repeated with the same target_loc are one; rows that disagree: the first
    is used and a note says how many items (the official file's Gender_identity Q12)."""
    for name in ("Race_x_SES.jsonl",):
        lines = (STAND_IN / name).read_text(encoding="utf-8").splitlines()[:8]
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    meta = list(csv.reader((STAND_IN / "additional_metadata.csv").open(encoding="utf-8")))
    rows = [meta[0]] + [r for r in meta[1:] if r[0] == "Race_x_SES" and int(r[2]) < 8]
    same = list(rows[1])
    other = list(rows[2])
    other[3] = "0" if other[3] != "0" else "1"
    with open(tmp_path / "additional_metadata.csv", "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows + [same, other])
    data = load_bbq(tmp_path, ("Race_x_SES",))
    assert len(data.items) == 8
    assert data.items.set_index("example_id").at[int(rows[2][2]), "target_loc"] == \
        float(rows[2][3])
    assert len(data.notes) == 1 and "1 example_id(s)" in data.notes[0]


def test_a_category_missing_from_the_directory(tmp_path):
    with pytest.raises(DataError, match=r"BBQ data not found: no Age\.jsonl .nor data/Age"):
        load_bbq(tmp_path, ("Age",))
