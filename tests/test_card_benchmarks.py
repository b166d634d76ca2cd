"""The Fairness Card of a run of CrowS-Pairs, Winogender, WinoBias, KoBBQ and a team's
benchmark file (the replayed ``benchmarks_job``, tests/conftest.py): each benchmark states
its prompt, decoding, invalid answers, scoring and record (``Family.card_protocol``), and
the numbers it discloses are the run's own, recounted here from the run's records and
the data files; each record validates against the schema its benchmark declares
(``Benchmark.card_schema``), and a record no benchmark declares is refused."""
from __future__ import annotations

import copy
import hashlib
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import BESIDE_BBQ, LENDING
from fairness_tests.card.fill import fill_card
from fairness_tests.card.schema import load_card, load_schema, record_schemas, validate_card
from fairness_tests.card.sections import protocol as card_protocol_section
from fairness_tests.card.sections.facts import RunFacts
from fairness_tests.cli.main import main
from fairness_tests.pipeline.benchmark import benchmark, benchmarks
from fairness_tests.run.result import RunResult

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks"


@pytest.fixture(scope="module")
def card_file(benchmarks_job) -> Path:
    return benchmarks_job.parent / "card" / "card.yaml"


@pytest.fixture(scope="module")
def card(card_file) -> dict:
    return load_card(card_file)


def records(run: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(run / "records" / f"{name}.csv.gz")


def distinct_prompts(run: Path, name: str) -> int:
    """The distinct prompts a benchmark asked, recounted from its records (context x
    continuation for a log-likelihood; the prompt for a choice)."""
    r = records(run, name)
    if name == "crows_pairs":          # each sentence alone: a request per distinct key
        return len(set(r["key_more"]) | set(r["key_less"]))
    if name == "winogender":
        return len(set(zip(r["prompt"], r["occupation"], strict=True))
                   | set(zip(r["prompt"], r["participant"], strict=True)))
    if name == "winobias":
        return len(set(zip(r["context"], r["first"], strict=True))
                   | set(zip(r["context"], r["second"], strict=True)))
    if name == "kobbq":                # one prompt per sample x order (none failed)
        return len(r[["context", "question", "shown_a", "shown_b", "shown_c"]]
                   .drop_duplicates())
    assert name == "templates"         # yes/no: four continuations per distinct text
    return 4 * r["text"].nunique()


def test_the_card_validates_and_states_every_prompt(card_file, card):
    assert main(["card", "validate", str(card_file)]) == 0
    report = validate_card(card)
    assert report.valid, report.summary()
    assert "prompt_suite.total_prompts" not in report.missing
    assert not [m for m in report.missing
                if m.split(".")[0] in ("prompt_suite", "decoding", "evaluation_protocol")]
    ep = card["evaluation_protocol"]
    for name in BESIDE_BBQ:
        assert name in ep, name
        assert any(r["protocol"] == name for r in card["decoding"]["regimes"]), name
    assert card["refusal_handling"]["refusal_definition"] != "No protocol was run."
    for what in ("CrowS-Pairs", "Winogender", "WinoBias", "KoBBQ", "lending-decisions"):
        assert what in card["refusal_handling"]["refusal_definition"]
        assert what in card["scorer"]["notes"]


@pytest.mark.parametrize("name", BESIDE_BBQ)
def test_the_prompts_disclosed_are_the_runs(name, benchmarks_job, card):
    assert card["evaluation_protocol"][name]["n_prompts"] == distinct_prompts(benchmarks_job,
                                                                              name)


def test_total_prompts_is_the_sum_of_the_benchmarks_distinct_prompts(benchmarks_job, card):
    assert card["prompt_suite"]["total_prompts"] == sum(
        distinct_prompts(benchmarks_job, n) for n in BESIDE_BBQ)


@pytest.mark.parametrize("name", ["crows_pairs", "winogender", "winobias", "kobbq"])
def test_the_data_hashes_disclosed_are_the_files(name, card):
    sha = card["evaluation_protocol"][name]["data_sha256"]
    assert sha
    for file, digest in sha.items():
        assert digest == hashlib.sha256((SHARED / name / file).read_bytes()).hexdigest(), file


def test_the_benchmark_file_and_its_templates_are_disclosed(card):
    rec = card["evaluation_protocol"]["templates"]
    assert rec["sha256"] == hashlib.sha256(LENDING.read_bytes()).hexdigest()
    spec = yaml.safe_load(LENDING.read_text(encoding="utf-8"))
    fams = [f for f in card["prompt_suite"]["families"]
            if f["id"].startswith(f"{spec['name']}/")]
    assert [f["id"].split("/", 1)[1] for f in fams] == [t["id"] for t in spec["templates"]]
    for f, t in zip(fams, spec["templates"], strict=True):
        assert f["template"].startswith(t["text"].strip())      # then the question's ending
    assert rec["n_templates"] == len(spec["templates"])
    counts = [len(v) for v in spec["attributes"].values()]
    assert rec["n_items"] == len(spec["templates"]) * counts[0] * counts[1] * counts[2]


def test_the_templates_are_the_prompts_as_asked(benchmarks_job, card):
    fams = {f["id"]: f for f in card["prompt_suite"]["families"]}
    wg = records(benchmarks_job, "winogender").iloc[0]
    ctx = fams[card["evaluation_protocol"]["winogender"]["prompt_id"]]["template"]
    ctx = ctx[:ctx.index(" {occupation")]
    assert ctx.format(sentence=wg["sentence"], Pronoun=wg["pronoun"].capitalize()) == wg["prompt"]
    wb = records(benchmarks_job, "winobias").iloc[0]
    ctx = fams[card["evaluation_protocol"]["winobias"]["prompt_id"]]["template"]
    ctx = ctx[:ctx.index(" {first")]
    assert ctx.format(sentence=wb["sentence"], Pronoun=wb["pronoun"].capitalize()) == \
        wb["context"]
    prompts = pd.read_csv(SHARED / "kobbq" / "0_evaluation_prompts.tsv", sep="\t")
    row = prompts[prompts["prompt_id"] == 1].iloc[0]
    ko = fams["kobbq-prompt-1"]["template"]
    assert card["evaluation_protocol"]["kobbq"]["prompt_id"] == 1
    assert ko.startswith(row["instruction"]) and ko.endswith(row["answer"])
    assert fams["crows_pairs"]["template"] == "{sentence}"
    assert "empty context" in fams["crows_pairs"]["description"]


def test_every_benchmark_brings_the_schema_of_its_record():
    ep = load_schema("fairness_tests")["properties"]["evaluation_protocol"]
    assert ep["additionalProperties"] is False
    declared = {b.family.metadata_key for b in benchmarks() if b.card_schema}
    assert set(BESIDE_BBQ) | {"bbq", "generative", "counterfactual"} <= declared
    assert set(record_schemas()) == declared
    for b in benchmarks():
        if b.card_schema:
            here = Path(sys.modules[b.__module__].__file__).parent / b.card_schema
            assert ep["properties"][b.family.metadata_key] == \
                yaml.safe_load(here.read_text(encoding="utf-8"))


def test_a_record_no_benchmark_declares_is_refused(card):
    bad = copy.deepcopy(card)
    bad["evaluation_protocol"]["my_benchmark"] = {"n_prompts": 3}
    report = validate_card(bad)
    assert not report.valid
    assert any("my_benchmark" in str(p) for p in report.errors), report.summary()


def test_a_record_is_checked_against_its_benchmarks_schema(card):
    bad = copy.deepcopy(card)
    bad["evaluation_protocol"]["winobias"]["data_sha256"]["male_occupations.txt"] = "abc"
    assert not validate_card(bad).valid
    bad = copy.deepcopy(card)
    bad["evaluation_protocol"]["kobbq"]["an_undisclosed_choice"] = 1
    assert not validate_card(bad).valid
    bad = copy.deepcopy(card)
    del bad["evaluation_protocol"]["crows_pairs"]["data_sha256"]
    assert not validate_card(bad).valid


def test_a_family_recording_without_a_declared_schema_is_an_error(benchmarks_job, monkeypatch):
    declared = dict(record_schemas())
    del declared["winogender"]
    monkeypatch.setattr(card_protocol_section, "record_schemas", lambda: declared)
    with pytest.raises(LookupError, match=r"'winogender' records evaluation_protocol\."
                                          r"winogender.*card_schema"):
        card_protocol_section.protocol_parts(RunFacts.of(RunResult.load(benchmarks_job)))


@pytest.mark.parametrize("name", BESIDE_BBQ)
def test_a_run_without_its_prompt_count_lists_it_missing(name, benchmarks_job):
    run = RunResult.load(benchmarks_job)
    run.metadata.infos[name].n_prompts = None
    card = fill_card(run)
    assert "prompt_suite.total_prompts" in [m["field"] for m in card["missing_fields"]]
    assert validate_card(card).valid
    assert "n_prompts" not in card["evaluation_protocol"][name]


def test_the_benchmarks_declare_their_schema_beside_their_module():
    for name in BESIDE_BBQ:
        cls = benchmark(name)
        assert cls.card_schema == "card_schema.yaml"
