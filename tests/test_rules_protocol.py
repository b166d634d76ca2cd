"""Protocol sensitivity through the one rule engine: the threshold rules evaluated per
protocol cell, dependence only beyond noise, seeds as a spread (not protocol cells)."""

from functools import partial

import pandas as pd
from helpers import rule as make_rule

from fairness_tests.benchmarks.generative.cells import CELLS
from fairness_tests.rules.apply import apply_rules
from fairness_tests.rules.protocol import ProtocolCells, protocol_dependence, protocol_rules
from fairness_tests.rules.thresholds import Rule, RuleSet

NAN = float("nan")


rule = partial(make_rule, id="worst_slice_stereotype_per_family",
               table="generative_by_slice_family", metric="stereotype", op="<=", bound=0.05,
               rationale="r", across="slice", reduce="max")


def cells(values):
    """generative_cells with one slice per cell: {(kind, cell): (value, lo, hi)}."""
    rows = [{"cell_kind": k, "cell": c, "slice": "man_Muslim", "metric": "stereotype",
             "value": v, "ci_low": lo, "ci_high": hi, "n": 100, "note": ""}
            for (k, c), (v, lo, hi) in values.items()]
    return pd.DataFrame(rows)


def test_rules_equal_but_for_their_table_are_one_protocol_rule():
    rs = [rule(), rule(id="worst_slice_stereotype_per_decoding",
                       table="generative_by_slice_decoding"),
          rule(id="refusal_gap", table="generative_by_slice", metric="refusal", reduce="range",
               bound=0.1),
          Rule(id="acc", table="bbq", metric="accuracy", op=">=", bound=0.6, rationale="r")]
    pr = protocol_rules(rs, CELLS)
    assert [r.id for r in pr] == ["worst_slice_stereotype", "refusal_gap"]
    assert {r.table for r in pr} == {"generative_cells"} and all(r.scope == () for r in pr)


def test_disagreement_beyond_noise_is_protocol_dependent():
    # F1 passes with its whole CI below 0.05; F2 fails with its whole CI above it
    t = cells({("overall", "all"): (0.04, 0.03, 0.06), ("family", "F1"): (0.01, 0.0, 0.03),
               ("family", "F2"): (0.09, 0.07, 0.12)})
    out = apply_rules({"generative_cells": t}, RuleSet(rules=[rule()]))
    v = out.tables["protocol_verdicts"]
    assert dict(zip(v["cell"], v["status"], strict=True)) == {
        "overall": "pass", "family/F1": "pass", "family/F2": "fail"}
    dep = out.tables["protocol_sensitivity"].iloc[0]
    assert dep["protocol_dependent"] and dep["disagreement"] == "beyond_noise"
    assert dep["disagreeing"] == "family/F2=fail"


def test_disagreement_within_noise_is_not_resolved():
    # statuses differ (0.04 pass, 0.06 fail) but both intervals straddle 0.05
    t = cells({("overall", "all"): (0.05, 0.03, 0.07), ("family", "F1"): (0.04, 0.02, 0.07),
               ("family", "F2"): (0.06, 0.04, 0.09)})
    dep = apply_rules({"generative_cells": t}, RuleSet(rules=[rule()])).tables[
        "protocol_sensitivity"].iloc[0]
    assert not dep["protocol_dependent"] and dep["disagreement"] == "within_noise"
    assert dep["n_pass"] == 2 and dep["n_fail"] == 1


def test_range_rules_without_interval_are_never_beyond_noise():
    v = pd.DataFrame([{"rule": "gap", "cell": "overall", "status": "pass", "value": 0.02,
                       "ci_low": NAN, "ci_high": NAN, "op": "<=", "bound": 0.1},
                      {"rule": "gap", "cell": "family/F1", "status": "fail", "value": 0.3,
                       "ci_low": NAN, "ci_high": NAN, "op": "<=", "bound": 0.1}])
    assert protocol_dependence(v).iloc[0]["disagreement"] == "within_noise"


def test_custom_bound_changes_the_protocol_verdict():
    t = cells({("overall", "all"): (0.04, 0.03, 0.06), ("family", "F1"): (0.01, 0.0, 0.03)})
    strict = apply_rules({"generative_cells": t}, RuleSet(rules=[rule(bound=0.02)]))
    v = strict.tables["protocol_verdicts"]
    assert dict(zip(v["cell"], v["status"], strict=True)) == {"overall": "fail",
                                                              "family/F1": "pass"}


def test_seeds_are_a_spread_not_protocol_cells():
    t = cells({("overall", "all"): (0.04, 0.03, 0.06)})
    s = cells({("seed", "1"): (0.094, 0.05, 0.14), ("seed", "2"): (0.125, 0.08, 0.17)})
    out = apply_rules({"generative_cells": t, "generative_seed_cells": s},
                      RuleSet(rules=[rule(bound=0.2)]))
    assert not out.tables["protocol_verdicts"]["cell"].str.startswith("seed").any()
    sp = out.tables["seed_spread"].iloc[0]
    assert (sp["value_min"], sp["value_max"], sp["n_seeds"]) == (0.094, 0.125, 2)


def test_the_protocol_cells_are_what_a_benchmark_declares():
    """The rule engine names no table: the cells a benchmark declares are the ones it
    evaluates (here a made-up benchmark's), and with none declared it adds nothing."""
    toy = ProtocolCells(table="toy_cells", sources=("toy_by_slice",), id_suffixes=("_per_x",))
    t = cells({("overall", "all"): (0.01, 0.0, 0.03), ("x", "a"): (0.09, 0.07, 0.12)})
    r = rule(id="worst_stereotype_per_x", table="toy_by_slice")
    out = apply_rules({"toy_cells": t}, RuleSet(rules=[r]), cells=[toy])
    v = out.tables["protocol_verdicts"]
    assert set(v["rule"]) == {"worst_stereotype"}
    assert dict(zip(v["cell"], v["status"], strict=True)) == {"overall": "pass", "x/a": "fail"}
    assert out.tables["protocol_sensitivity"].iloc[0]["protocol_dependent"]
    # no declaration: no protocol tables; the generative audit's does not take this rule
    assert "protocol_verdicts" not in apply_rules({"toy_cells": t}, RuleSet(rules=[r]),
                                                  cells=[]).tables
    assert protocol_rules([r], CELLS) == []
    assert [x.table for x in protocol_rules([r], toy)] == ["toy_cells"]
