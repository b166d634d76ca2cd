"""Generative protocol: the default suite, suite hash, validation errors, the
published grid (row for row), requests and records, JSONL outputs."""
import copy
import csv
import json

import pandas as pd
import pytest
import yaml

from fairness_tests.benchmarks.generative.grid import GRID_COLUMNS, RAW_OUTPUT_FIELDS, grid_hash
from fairness_tests.benchmarks.generative.outputs import read_outputs, write_outputs
from fairness_tests.benchmarks.generative.published import (
    PUBLISHED_SYSTEM_PROMPT,
    load_published_grid,
    published_grid_path,
)
from fairness_tests.benchmarks.generative.requests import grid_requests, records
from fairness_tests.benchmarks.generative.suite import DEFAULT_SUITE, load_suite, parse_suite
from fairness_tests.core.errors import ConfigError, DataError
from fairness_tests.models.requests.request import Response


@pytest.fixture(scope="module")
def suite():
    return load_suite()


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load(DEFAULT_SUITE.read_text())


def test_default_suite_has_3200_generations(suite):
    g = suite.grid()
    # 4 families x 5 paraphrases x 4 occupations x 4 slices x 2 regimes x 5 seeds
    assert len(g) == 4 * 5 * 4 * 4 * 2 * 5 == 3200
    assert list(g.columns) == GRID_COLUMNS
    assert g["prompt_text"].nunique() == 4 * 5 * 4 * 4 == 320
    assert set(g["full_slice_id"]) == {"man_Christian", "man_Muslim", "woman_Christian",
                                       "woman_Muslim"}
    assert set(g["occupation"]) == {"CEO", "nurse", "engineer", "teacher"}
    assert set(zip(g["temperature"], g["top_p"], strict=True)) == {(0.2, 0.9), (0.7, 0.95)}
    assert set(g["seed"]) == {1, 2, 3, 4, 5} and set(g["max_new_tokens"]) == {160}
    assert suite.system_prompt == "You are a helpful assistant."
    assert g["row_id"].tolist() == list(range(1, 3201))


def test_default_suite_is_ours_not_the_published_wording(suite):
    pub = set(load_published_grid()["prompt_text"])
    assert not pub & set(suite.grid()["prompt_text"])


def test_slice_insertion(suite):
    g = suite.grid()
    row = g[(g.slice_gender == "woman") & (g.slice_religion == "Muslim")].iloc[0]
    assert "a woman who is Muslim" in row.prompt_text
    assert "{" not in "".join(g["prompt_text"])


def test_suite_hash_changes_with_what_changes_a_prompt_only(raw):
    base = parse_suite(raw).hash()
    assert parse_suite(copy.deepcopy(raw)).hash() == base
    renamed = copy.deepcopy(raw)
    renamed["families"][0]["name"] = "another name"
    renamed["name"] = "renamed"
    assert parse_suite(renamed).hash() == base
    for change in (
        lambda r: r.__setitem__("system_prompt", "You are terse."),
        lambda r: r["seeds"].append(6),
        lambda r: r.__setitem__("max_new_tokens", 200),
        lambda r: r["decoding"][0].__setitem__("temperature", 0.3),
        lambda r: r["slices"].__setitem__("insertion", "a {religion} {gender}"),
        lambda r: r["families"][1]["paraphrases"].__setitem__(0, "Tell of {A}, a {OCC}."),
    ):
        r = copy.deepcopy(raw)
        change(r)
        assert parse_suite(r).hash() != base


@pytest.mark.parametrize("mutate, key", [
    (lambda r: r.pop("occupations"), "occupations"),
    (lambda r: r["families"][0]["paraphrases"].__setitem__(0, "no placeholders"),
     "families[0].paraphrases[0]"),
    (lambda r: r["families"][2]["paraphrases"].__setitem__(1, "{A} as {JOB}"),
     "families[2].paraphrases[1]"),
    (lambda r: r["slices"].__setitem__("insertion", "a {gender} who is {faith}"),
     "slices.insertion"),
    (lambda r: r["decoding"][1].__setitem__("top_p", 1.5), "decoding[1].top_p"),
    (lambda r: r["decoding"][0].__setitem__("temperature", "hot"), "decoding[0].temperature"),
    (lambda r: r.__setitem__("seeds", [1, 1]), "seeds"),
    (lambda r: r.__setitem__("colour", "blue"), "colour"),
])
def test_bad_protocol_names_file_and_key(raw, mutate, key):
    r = copy.deepcopy(raw)
    mutate(r)
    with pytest.raises(ConfigError) as exc:
        parse_suite(r, "my_protocol.yaml")
    assert "my_protocol.yaml" in str(exc.value) and repr(key) in str(exc.value)


def test_unreadable_and_invalid_yaml(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_suite(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nslices: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml, line \d"):
        load_suite(bad)


def test_published_grid_loads_row_for_row(tmp_path):
    g = load_published_grid()
    assert len(g) == 3200 and list(g.columns) == GRID_COLUMNS
    with published_grid_path().open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3200
    for i in (0, 1, 1234, 3199):
        assert g.loc[i, "prompt_text"] == rows[i]["prompt_text"]
        assert g.loc[i, "row_id"] == int(rows[i]["row_id"])
        assert g.loc[i, "temperature"] == float(rows[i]["temperature"])
    # from any path
    copy_path = tmp_path / "elsewhere.csv"
    copy_path.write_bytes(published_grid_path().read_bytes())
    assert load_published_grid(copy_path).equals(g)
    assert grid_hash(g, PUBLISHED_SYSTEM_PROMPT) == grid_hash(
        load_published_grid(copy_path), PUBLISHED_SYSTEM_PROMPT)


def test_published_grid_errors_name_file_and_line(tmp_path):
    lines = published_grid_path().read_text().splitlines()
    p = tmp_path / "g.csv"
    p.write_text("\n".join([lines[0], lines[1], lines[2].replace(",0.9,", ",abc,", 1)]) + "\n")
    with pytest.raises(DataError, match=r"g\.csv, line 3, key 'top_p'"):
        load_published_grid(p)
    p.write_text(lines[0].replace("seed", "sed") + "\n")
    with pytest.raises(DataError, match=r"line 1.*missing \['seed'\]"):
        load_published_grid(p)
    p.write_text("\n".join([lines[0], lines[1].replace("woman_Muslim", "man_Muslim")]) + "\n")
    with pytest.raises(DataError, match=r"line 2, key 'full_slice_id'"):
        load_published_grid(p)


def test_requests_and_records(suite):
    g = suite.grid().head(3)
    reqs = grid_requests(g, suite.system_prompt, backend="replay", model="m")
    r = reqs[0]
    assert r.kind == "generate" and r.seed == 1
    assert (r.decoding.temperature, r.decoding.top_p, r.decoding.max_tokens) == (0.2, 0.9, 160)
    assert [m.role for m in r.messages] == ["system", "user"]
    assert r.messages[1].content == g.iloc[0]["prompt_text"]
    assert r.meta["row_id"] == 1 and r.meta["full_slice_id"] == "man_Christian"
    assert len({q.key() for q in reqs}) == 3          # seeds differ -> keys differ
    resps = [Response(key=reqs[0].key(), text="  Text one. \n"),
             Response(key=reqs[1].key(), text="", status="error", error="timeout"),
             Response(key=reqs[2].key(), text="Three")]
    rec = records(reqs, resps)
    assert rec["output_text"].tolist() == ["Text one.", "", "Three"]
    assert rec["status"].tolist() == ["ok", "error", "ok"]
    assert set(RAW_OUTPUT_FIELDS) <= set(rec.columns)
    with pytest.raises(ValueError, match="does not match"):
        records(reqs, list(reversed(resps)))


def _rec(**kw):
    base = dict(prompt_family="F1", paraphrase_id="p1", occupation="CEO", slice_gender="man",
                slice_religion="Muslim", temperature=0.2, top_p=0.9, seed=1,
                output_text="x", status="ok")
    base.update(kw)
    return base


def test_outputs_jsonl_roundtrip_and_errors(tmp_path):
    df = pd.DataFrame([_rec(), _rec(status="error", output_text="", seed=2)])
    p = write_outputs(df, tmp_path / "o.jsonl")
    back = read_outputs(p)
    assert back[RAW_OUTPUT_FIELDS].equals(df[RAW_OUTPUT_FIELDS])
    p.write_text(json.dumps(_rec()) + "\n\n{broken\n")
    with pytest.raises(DataError, match=r"o\.jsonl, line 3: invalid JSON"):
        read_outputs(p)
    p.write_text(json.dumps(_rec(status="done")) + "\n")
    with pytest.raises(DataError, match=r"line 1, key 'status'"):
        read_outputs(p)
    bad = _rec()
    del bad["seed"]
    p.write_text(json.dumps(_rec()) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"line 2: missing field\(s\) seed"):
        read_outputs(p)
