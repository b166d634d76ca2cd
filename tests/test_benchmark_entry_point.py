"""A benchmark declared only through an entry point of another distribution (issue 33):
a throwaway distribution (a ``*.dist-info`` with ``entry_points.txt``, which
importlib.metadata finds on ``sys.path``) registers a tiny benchmark class in group
``fairness_tests.benchmarks``, and every consumer converted to the registry sees it,
without a line of this repository changed: the registry and its families, the default
audit's benchmarks, the configuration's choices, the plugin's markers, the card's
protocols-run lines and schema, ``compare``'s families, the gate's records and the suite's
drift tables. Loading its declarations imports no pandas.

Run in a fresh interpreter so that what is computed when the package is imported (the
default ``--benchmarks``, its choices) sees the distribution as an installed one would.
A benchmark of another distribution asked end to end (audit, pytest, gate, card,
compare): tests/test_outside_benchmark.py. Its compare section and card result view by the
generic layouts: tests/test_benchmark_views.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fairness_tests.core.registry import REGISTRY
from fairness_tests.pipeline.benchmark import families
from fairness_tests.pipeline.config import DEFAULT_BENCHMARKS

ROOT = Path(__file__).resolve().parents[1]

TOY = '''
from fairness_tests.pipeline.benchmark import Benchmark, Family, FamilySpec, Shown


class ToyFamily(Family):
    def results(self, asked):
        raise NotImplementedError


class Toy(Benchmark):
    name = "toybench"
    family = FamilySpec(name="toyfam", impl="toybench:ToyFamily", records="toyrec",
                        metadata_key="toy", gated=True, compared=True)
    default = True
    marker = "toy benchmark properties"
    tables = ("toy_table",)
    drift_tables = ("toy_table",)
    shown = (Shown("toybench", tables, "the toy benchmark was not run"),)

    def requests(self, family):
        return []
'''

PROBE = '''
import json, sys
from types import SimpleNamespace
from fairness_tests.pipeline.benchmark import benchmark, families
from fairness_tests.core.registry import REGISTRY
from fairness_tests.pipeline.config import AuditConfig, DEFAULT_BENCHMARKS
from fairness_tests.plugin.plugin import markers
light = "pandas" not in sys.modules
from fairness_tests.card.schema import protocols_run_enum, validate_card
from fairness_tests.card.sections.protocol import card_lines
from fairness_tests.compare.models import compared_names, families_of
from fairness_tests.pipeline.gate_pairs import gated, shared_families
from fairness_tests.pipeline.benchmark import by_family
from fairness_tests.suite.properties import drift_tables


def run_with(**kw):
    return SimpleNamespace(tables=kw.get("tables", {}), records=kw.get("records", {}))


def protocols_run_errors(names):
    card = {"evaluation_protocol": {"protocols_run": names}}
    return [p.key for p in validate_card(card).errors if "protocols_run" in p.key]


rec = run_with(records={"toyrec": [1, 2]})
print(json.dumps({
    "light": light,
    "registry": list(REGISTRY),
    "class": benchmark("toybench").__name__,
    "families": [f.name for f in families()],
    "family_class": [c.__name__ for c, _ in by_family(["toybench"])],
    "default": list(DEFAULT_BENCHMARKS),
    "config": list(AuditConfig(benchmarks=("toybench",)).benchmarks),
    "markers": markers(),
    "card_lines": [s.what for s in card_lines()],
    "enum": protocols_run_enum(),
    "schema_ok": protocols_run_errors(["toybench"]),
    "schema_bad": protocols_run_errors(["nonesuch"]),
    "compare": compared_names(),
    "compare_of": families_of(run_with(tables={"toy_table": None})),
    "gated": gated(),
    "gate_shared": shared_families(rec, rec, {}),
    "drift": list(drift_tables()),
}))
'''


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> dict:
    """What the consumers report in an interpreter where the toy distribution is
    installed (its dist-info and module on ``sys.path``)."""
    site = tmp_path_factory.mktemp("site")
    (site / "toybench.py").write_text(TOY, encoding="utf-8")
    info = site / "toybench-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toybench\nVersion: 0.1\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[fairness_tests.benchmarks]\ntoybench = toybench:Toy\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_registry_finds_it_after_the_built_in_ones(seen):
    assert seen["registry"] == [*REGISTRY, "toybench"]
    assert seen["class"] == "Toy"
    assert seen["families"] == [*(f.name for f in families()), "toyfam"]
    assert seen["family_class"] == ["ToyFamily"]


def test_its_declarations_are_read_without_pandas(seen):
    assert seen["light"]


def test_the_default_audit_and_the_configuration_take_it(seen):
    assert seen["default"] == [*DEFAULT_BENCHMARKS, "toybench"]
    assert seen["config"] == ["toybench"]


def test_the_plugin_registers_its_marker(seen):
    assert "toybench: toy benchmark properties" in seen["markers"]


def test_the_card_lists_it_and_its_schema_accepts_it(seen):
    assert seen["card_lines"][-1] == "toybench"
    assert seen["enum"] == seen["card_lines"]
    assert seen["schema_ok"] == []
    assert seen["schema_bad"]


def test_compare_gate_and_drift_take_it(seen):
    assert seen["compare"] == [*(f.name for f in families() if f.compared), "toyfam"]
    assert seen["compare_of"] == ["toyfam"]
    assert seen["gated"] == [*(f.records for f in families() if f.gated), "toyrec"]
    assert seen["gate_shared"] == ["toyfam"]
    assert seen["drift"][-1] == "toy_table"
