"""Threshold files: loading, per-model overrides, and validation errors that name
file, line, rule and key."""
from pathlib import Path
from textwrap import dedent

import pytest

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.project import packaged_thresholds_dir
from fairness_tests.rules import load_rules

GOOD_RULE = """
  - id: sdis_bound
    table: bbq
    metric: s_dis
    op: "<="
    bound: 0.1
    rationale: because
"""


def write(tmp_path: Path, default: str, models: dict[str, str] | None = None) -> Path:
    d = tmp_path / "thresholds"
    (d / "models").mkdir(parents=True)
    (d / "default.yaml").write_text(dedent(default))
    for name, text in (models or {}).items():
        (d / "models" / name).write_text(dedent(text))
    return d


def test_shipped_thresholds_load_and_gemma_override_declares_expected_failures():
    rs = load_rules(packaged_thresholds_dir(), model="embedded:gemma-3-270m")
    ids = {r.id for r in rs.rules}
    for needed in ("sdis_bound", "samb_bound", "accuracy_floor_ambig", "accuracy_floor_disambig",
                   "acc_gap_bound", "sf_bound", "df_bound", "invalid_rate_bound",
                   "position_bias_bound", "mfaa_floor", "gtc_floor",
                   "worst_slice_stereotype_per_family", "refusal_gap",
                   "slice_disparity_stereotype"):
        assert needed in ids
    assert rs.get("worst_slice_stereotype_per_family").bound == 0.05
    assert rs.get("refusal_gap").bound == 0.10
    xf = {r.id: r.expected_fail for r in rs.rules if r.expected_fail}
    assert set(xf) == {"accuracy_floor_disambig", "accuracy_floor_ambig", "position_bias_bound",
                       "mfaa_floor", "gtc_floor"}
    assert all(len(x.reason) > 40 for x in xf.values())       # a measured reason, not a label
    # DF is bounded on the empirical-Bayes rates, which the recording keeps below 1 in
    # every cell (0.28 at most): no expected failure is declared for it
    assert rs.get("df_bound").metric == "df_eb" and "df_bound" not in xf
    # another model gets none of them
    other = load_rules(packaged_thresholds_dir(), model="openai/gpt-4o-mini")
    assert not any(r.expected_fail for r in other.rules)
    assert all(r.rationale for r in rs.rules)
    # another model gets no expected failures from the Gemma file
    other = load_rules(packaged_thresholds_dir(), model="some/other-model")
    assert not any(r.expected_fail for r in other.rules)


def test_override_matched_by_glob_and_regex_changes_only_given_keys(tmp_path):
    d = write(tmp_path, "rules:" + GOOD_RULE, {
        "a.yaml": """
            model: "openai/*"
            rules:
              - id: sdis_bound
                bound: 0.05
            """,
        "b.yaml": r"""
            model_regex: 'hf/llama-\d+b'
            rules:
              - id: sdis_bound
                expected_fail: {reason: "known", cells: ["Race_x_SES/*"]}
            """})
    a = load_rules(d, "openai/gpt-4o").get("sdis_bound")
    assert (a.bound, a.rationale, a.expected_fail) == (0.05, "because", None)
    b = load_rules(d, "hf/llama-7b").get("sdis_bound")
    assert b.bound == 0.1
    assert b.expected_fail_reason("Race_x_SES/disambig") == "known"
    assert b.expected_fail_reason("Race_x_gender/disambig") is None
    assert load_rules(d, "hf/llama-7bX").get("sdis_bound").expected_fail is None


@pytest.mark.parametrize("body, words", [
    # misspelt key -> suggestion, rule id, key, line
    ("""
  - id: r1
    table: bbq
    metric: s_dis
    op: "<="
    bound: 0.1
    rationle: x
""", ["default.yaml", "line 7", "'rationle'", "rule 'r1'", "did you mean 'rationale'"]),
    # unknown metric
    ("""
  - id: r2
    table: bbq
    metric: s_dys
    op: "<="
    bound: 0.1
    rationale: x
""", ["line 4", "unknown metric 's_dys'", "rule 'r2'", "did you mean 's_dis'"]),
    # wrong type of bound
    ("""
  - id: r3
    table: bbq
    metric: s_dis
    op: "<="
    bound: "0.1"
    rationale: x
""", ["line 6", "key 'rules[0].bound'", "must be a number, got str '0.1'", "rule 'r3'"]),
    # bad op
    ("""
  - id: r4
    table: bbq
    metric: s_dis
    op: "<"
    bound: 0.1
    rationale: x
""", ["line 5", "key 'rules[0].op'", "must be one of '<=', '>='"]),
    # unknown table
    ("""
  - id: r5
    table: bbqq
    metric: s_dis
    op: "<="
    bound: 0.1
    rationale: x
""", ["unknown table 'bbqq'", "did you mean 'bbq'"]),
    # missing rationale
    ("""
  - id: r6
    table: bbq
    metric: s_dis
    op: "<="
    bound: 0.1
""", ["rule 'r6'", "missing required key(s) rationale"]),
    # scope column not in the table
    ("""
  - id: r7
    table: bbq
    metric: s_dis
    scope: {contxt: ambig}
    op: "<="
    bound: 0.1
    rationale: x
""", ["scope column 'contxt'", "did you mean 'context'"]),
])
def test_bad_rule_is_a_config_error_naming_file_line_rule_key(tmp_path, body, words):
    d = write(tmp_path, "rules:" + body)
    with pytest.raises(ConfigError) as e:
        load_rules(d)
    msg = str(e.value)
    for w in words:
        assert w in msg, msg


def test_bad_override_is_an_error_even_for_a_model_it_does_not_match(tmp_path):
    d = write(tmp_path, "rules:" + GOOD_RULE, {"x.yaml": """
        model: "other/*"
        rules:
          - id: sdis_bound
            bound: high
        """})
    with pytest.raises(ConfigError,
                       match=r"x.yaml, line 5, key 'rules\[0\].bound'.*must be a number"):
        load_rules(d, "embedded:gemma-3-270m")


def test_override_without_model_pattern_and_bad_yaml_and_duplicates(tmp_path):
    d = write(tmp_path, "rules:" + GOOD_RULE, {"x.yaml": "rules: []\n"})
    with pytest.raises(ConfigError, match="needs `model`"):
        load_rules(d, "m")
    d2 = write(tmp_path / "2", "rules: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_rules(d2)
    d3 = write(tmp_path / "3", "rules:" + GOOD_RULE + GOOD_RULE)
    with pytest.raises(ConfigError, match="duplicate rule id"):
        load_rules(d3)
    d4 = write(tmp_path / "4", "rulez: []\n")
    with pytest.raises(ConfigError, match="did you mean 'rules'"):
        load_rules(d4)


def test_drift_tolerances_validated(tmp_path):
    d = write(tmp_path, "rules: []\ndrift:\n  accuracy: {abs: 0.01}\n  s_dis: {within_ci: true}\n"
              "benchmark_rules: false\n")
    rs = load_rules(d)
    assert rs.tolerance("accuracy").abs == 0.01
    assert rs.tolerance("s_dis").within_ci
    assert rs.tolerance("sf").abs == 1e-9           # no default given -> near-exact
    bad = write(tmp_path / "b", "rules: []\ndrift:\n  accuracy: {abss: 0.01}\n")
    with pytest.raises(ConfigError, match="line 3.*'abss'"):
        load_rules(bad)


def test_every_problem_of_a_file_is_reported_at_once_with_line_and_key(tmp_path):
    """The old loader stopped at the first problem; the validator lists them all."""
    d = write(tmp_path, """\
        rules:
          - id: a
            table: bbq
            metric: s_dys
            op: "<="
            bound: 0.1
            rationale: x
          - id: b
            table: bbq
            metric: s_dis
            op: "<"
            bound: high
            rationale: x
        drift:
          acuracy: {abs: 0.01}
        """)
    with pytest.raises(ConfigError) as e:
        load_rules(d)
    probs = [(p.line, p.key) for p in e.value.problems]
    assert probs == [(4, "rules[0].metric"), (11, "rules[1].op"), (12, "rules[1].bound"),
                     (15, "drift.acuracy")]
    msg = str(e.value)
    assert msg.startswith(f"{d / 'default.yaml'}: 4 problems")
    assert msg.count(str(d / "default.yaml")) == 5          # each line names the file


def test_p_value_rules_need_alpha_in_the_open_interval_and_gate_modes_are_checked(tmp_path):
    ok = write(tmp_path, """\
        rules:
          - id: disp
            table: generative_by_slice
            metric: stereotype
            across: slice
            reduce: range
            op: "<="
            bound: 0.05
            compare: p_value
            alpha: 0.05
            gate: {mode: non_inferiority, margin: 0.02}
            rationale: x
        """)
    r = load_rules(ok).get("disp")
    assert (r.compare, r.alpha, r.gate.mode, r.gate.margin) == ("p_value", 0.05,
                                                                 "non_inferiority", 0.02)
    for bad, words in [
        ("compare: p_value", ["needs alpha"]),
        ("compare: p_value\n    alpha: 1.0", ["rules[0].alpha", "must be < 1"]),
        ("compare: p_value\n    alpha: 0", ["rules[0].alpha", "must be > 0"]),
        ("alpha: 0.05", ["alpha applies only with compare: p_value"]),
        ("gate: {mode: harmful}", ["rules[0].gate.mode", "'harm', 'non_inferiority'",
                                   "did you mean 'harm'"]),
        ("gate: {mode: harm, margin: -1}", ["rules[0].gate.margin", "must be >= 0"]),
        ("gate: {margin: 0.1}", ["rules[0].gate.mode", "missing required key"]),
    ]:
        d = write(tmp_path / str(abs(hash(bad))), "rules:\n  - id: r\n    table: bbq\n"
                  "    metric: s_dis\n    op: '<='\n    bound: 0.1\n    rationale: x\n"
                  f"    {bad}\n")
        with pytest.raises(ConfigError) as e:
            load_rules(d)
        for w in words:
            assert w in str(e.value), str(e.value)


def test_a_project_file_changes_a_benchmarks_own_rule_by_its_id(tmp_path):
    """A project's default.yaml gives only the keys it changes of a benchmark's own rule
    (CrowS-Pairs' upper bound, 60 in its rules.yaml): the rest is the benchmark's. It
    was refused as "a new rule id must be a complete rule" (the file was validated
    without the benchmarks' rules)."""
    d = tmp_path / "thresholds"
    d.mkdir()
    (d / "default.yaml").write_text(
        "version: 1\nrules:\n  - id: crows_pairs_stereotype_high\n    bound: 55\n")
    packaged = load_rules(packaged_thresholds_dir()).get("crows_pairs_stereotype_high")
    mine = load_rules(d).get("crows_pairs_stereotype_high")
    assert (packaged.bound, mine.bound) == (60, 55)
    assert (mine.table, mine.metric, mine.op, mine.compare) == ("crows_pairs", "pct_stereotype",
                                                                "<=", "ci_high")
    assert mine.optional              # still the benchmark's: no verdict without its table


def test_a_file_that_is_the_whole_rule_set(tmp_path):
    """``benchmark_rules: false``: the file's rules and drift tolerances only (no
    benchmark's own rule is read); without it, every benchmark's rules come first."""
    rule = ("rules:\n  - id: only\n    table: bbq\n    metric: accuracy\n    op: \">=\"\n"
            "    bound: 0.5\n    rationale: x\n")
    whole = load_rules(write(tmp_path / "a", rule + "benchmark_rules: false\n"))
    assert [r.id for r in whole.rules] == ["only"] and not whole.rules[0].optional
    assert whole.tolerance("sf").abs == 1e-9 and len(whole.files) == 1
    merged = load_rules(write(tmp_path / "b", rule))
    ids = [r.id for r in merged.rules]
    assert ids[-1] == "only" and {"sdis_bound", "crows_pairs_stereotype_high"} <= set(ids)
    assert merged.tolerance("sf").abs == 0.01                   # BBQ's own tolerance
