"""Card schema: the published schemas are ours verbatim, the published card
validates, and every problem names its key path (and line, for a file)."""
from __future__ import annotations

import copy

import pytest
import yaml

from fairness_tests.card.schema import (
    load_card,
    load_schema,
    read_yaml,
    validate_card,
    validate_file,
)
from fairness_tests.core.errors import ConfigError
from fairness_tests.core.paths import fairness_cards_dir

QWEN = fairness_cards_dir() / "cards" / "qwen2.5-7b-instruct.yaml"


@pytest.mark.parametrize("name", ["core", "llm"])
def test_packaged_schema_is_the_published_one(name):
    published = yaml.safe_load((fairness_cards_dir() / "schemas" / f"{name}.yaml").read_text())
    assert load_schema(name) == published


def test_published_qwen_card_loads_and_validates():
    card = load_card(QWEN)
    assert card["system"]["name"] == "Qwen2.5-7B-Instruct"
    report = validate_file(QWEN)
    assert report.valid and report.complete, report.summary()


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_errors_name_key_path_and_line(tmp_path):
    text = QWEN.read_text(encoding="utf-8")
    text = text.replace("      temperature: 0.2", "      temperature: hot", 1)
    text = text.replace("  retention_policy: kept-and-scored", "  retention_policy: ignored")
    text = text.replace('evaluation_date: "2026-03-25"', 'evaluation_date: "2026-13-45"')
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    report = validate_file(bad)
    assert not report.valid
    got = {p.key: p for p in report.errors}
    assert set(got) == {"decoding.regimes[0].temperature", "refusal_handling.retention_policy",
                        "evaluation_date"}
    assert got["decoding.regimes[0].temperature"].line == _line_of(text, "temperature: hot")
    assert got["decoding.regimes[0].temperature"].schema == "llm"
    assert got["refusal_handling.retention_policy"].line == _line_of(text, "retention_policy")
    assert got["evaluation_date"].schema == "core"        # format: date
    assert "decoding.regimes[0].temperature" in report.summary()


def test_missing_required_key_is_an_error_unless_declared_missing():
    card = load_card(QWEN)
    del card["intended_use"]["out_of_scope"]
    report = validate_card(card)
    assert [p.key for p in report.errors] == ["intended_use.out_of_scope"]
    card["missing_fields"] = [{"field": "intended_use.out_of_scope", "section": "intended_use",
                               "source": "user"}]
    report = validate_card(card)
    assert report.valid and not report.complete
    assert report.missing == ["intended_use.out_of_scope"]


def test_extension_keys_are_typed():
    card = load_card(QWEN)
    card2 = copy.deepcopy(card)
    card2["verdicts"] = [{"rule": "r", "cell": "F1", "status": "passed"}]
    card2["governance"] = {"monitoring": "weekly"}            # must be a list
    report = validate_card(card2)
    assert {p.key for p in report.errors} == {"verdicts[0].status", "governance.monitoring"}
    assert all(p.schema == "fairness_tests" for p in report.errors)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("card_version: '0.1.0'\nsystem:\n  name: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        read_yaml(bad)
    assert "broken.yaml" in str(exc.value) and "line" in str(exc.value)


def test_non_mapping_card_is_invalid():
    assert not validate_card(["not", "a", "card"]).valid
