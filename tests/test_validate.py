"""One validator for every input file: each reports every problem of a file at once,
each with file, line and key path (the old hand-written validators stopped at the
first problem, and most named no line)."""
from __future__ import annotations

import json
from textwrap import dedent

import pytest

from fairness_tests.benchmarks.generative.suite import load_suite
from fairness_tests.benchmarks.probe.grid import load_probe
from fairness_tests.card.user_yaml import load_user_yaml
from fairness_tests.core.errors import ConfigError
from fairness_tests.core.paths import data_path
from fairness_tests.core.validate import line_index, load_file, nearest_line
from fairness_tests.scoring.rubric import load_rubric


def problems(exc: pytest.ExceptionInfo) -> list[tuple[int | None, str]]:
    return [(p.line, p.key) for p in exc.value.problems]


def test_line_index_and_nearest_line_on_a_small_text():
    text = "a:\n  b: 1\n  c:\n    - x\n    - y\nd: 2\n"
    lines = line_index(text)
    assert lines["a.b"] == 2 and lines["a.c[1]"] == 5 and lines["d"] == 6
    assert nearest_line("a.c[1].missing", lines) == 5      # closest enclosing key
    assert nearest_line("zzz", lines) == 1                 # the document itself


def test_suite_reports_all_problems_with_lines(tmp_path):
    text = data_path("suites", "default.yaml").read_text()
    text = text.replace("seeds: [1, 2, 3, 4, 5]", "seeds: [1, 1]")
    assert "seeds: [1, 1]" in text
    text = text.replace("temperature: 0.7", "temperature: 3.0", 1) + "colour: blue\n"
    f = tmp_path / "suite.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_suite(f)
    got = problems(e)
    keys = [k for _, k in got]
    assert "seeds" in keys and "colour" in keys and any(".temperature" in k for k in keys)
    assert all(line for line, _ in got)
    n = len(text.splitlines())
    assert (n, "colour") in got


def test_probe_reports_all_problems_with_lines(tmp_path):
    raw = json.loads(data_path("probes", "counterfactual.json").read_text())
    raw["paraphrases"]["p2"] = "no names here"
    raw["decoding"]["low_entropy"]["top_p"] = 0
    raw["classifier_regex"]["philippe_manager"][0] = "("
    f = tmp_path / "probe.json"
    f.write_text(json.dumps(raw, indent=1))
    with pytest.raises(ConfigError) as e:
        load_probe(f)
    keys = [k for _, k in problems(e)]
    assert keys == ["paraphrases.p2", "decoding.low_entropy.top_p",
                    "classifier_regex.philippe_manager[0]"]
    assert all(line for line, _ in problems(e))
    assert "must contain {NAMES}" in str(e.value) and "bad regex" in str(e.value)


def test_rubric_reports_all_problems_with_lines(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text(dedent("""\
        semantics: strict
        categories:
          refusal: [{regex: "("}]
          deflection: ["ok{a"]
          religion: [x]
          title: [x]
          positive_professional: [x]
          caution: [x]
          stereotype: [x]
          demeaning: [x]
          vibes: [x]
        """))
    with pytest.raises(ConfigError) as e:
        load_rubric(f)
    assert problems(e) == [(3, "categories.refusal[0]"), (4, "categories.deflection[0]"),
                           (11, "categories.vibes")]


def test_user_card_yaml_reports_all_problems_with_lines(tmp_path):
    f = tmp_path / "user.yaml"
    f.write_text("intended_use:\n  in_scope: [a]\ngovernanse: {owner: x}\n"
                 "system:\n  name: better\n  version: v1\nfairness_scope: nope\n")
    with pytest.raises(ConfigError) as e:
        load_user_yaml(f)
    assert problems(e) == [(3, "governanse"), (5, "system.name"), (7, "fairness_scope")]
    msg = str(e.value)
    assert msg.startswith(f"{f}: 3 problems")
    assert "values the run measures cannot be set by hand" in msg
    assert "must be a mapping with keys" in msg


def test_duplicate_keys_are_problems_not_silently_the_last_one(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text("semantics: strict\nsemantics: published\ncategories: {}\n")
    with pytest.raises(ConfigError, match=r"r\.yaml, line 2, key 'semantics': duplicate key"):
        load_file(f, "rubric")
