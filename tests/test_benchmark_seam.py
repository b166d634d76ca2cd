"""Where the benchmarks are named (issue 33, "a benchmark is one folder"): a module
outside a benchmark's own folder that names a benchmark, or one of its tables or
metrics, by string is a place that must change when a benchmark is added.

The names are read from the registries (the benchmark registry and the table-schema
registry, filled by every registered benchmark), never typed here; docstrings do not
count. No shared module names one (35 did at the start of this check; the last were the
card's sections, which now ask each family through ``Family.card_protocol`` and
``Family.protocol_view``).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

import fairness_tests
from fairness_tests.core.paths import data_path
from fairness_tests.core.registry import BENCHMARK_NAMES
from fairness_tests.metrics.schema import registered
from fairness_tests.rules.rule_files import benchmark_rule_files
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.scoring.lexical import COUNT_METRICS, FLAG_METRICS

PKG = Path(fairness_tests.__file__).parent
#: the benchmarks' own folders (relative to the package), and the fairness suite
OWN = ("benchmarks/", "suite/")
#: metric names shared by every benchmark (not one benchmark's): the generic ones, and
#: the scorers' output columns (the scoring layer's own vocabulary, read from it: every
#: benchmark that scores generations shares them, the generative audit and a team's
#: ``generate`` outcome alike; a provider's ``refusal`` field is not a benchmark's either)
GENERIC = frozenset({"accuracy", "invalid_rate", "error", "word_len",
                     *FLAG_METRICS, *COUNT_METRICS})
#: a string that is a dotted or slashed path of names (its parts are names too)
PATH = re.compile(r"[\w-]+(?:[./][\w-]+)+")
#: table names the card and run metadata use for a benchmark besides its registry name
ALIASES = frozenset({"counterfactual"})



def _words() -> frozenset[str]:
    tables = registered()
    metrics = {m for t in tables.values() for m in (getattr(t, "metrics", ()) or ())}
    return frozenset(set(BENCHMARK_NAMES) | ALIASES | set(tables) | (metrics - GENERIC))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _named(node: ast.AST, docs: set[int]) -> set[str]:
    """What ``node`` names: a string constant (not a docstring) whole, and each part of
    one that is a dotted or slashed path (``evaluation_protocol.bbq.filter``); an
    attribute's name (``meta.bbq``)."""
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
        parts = set(re.split(r"[./]", node.value)) if PATH.fullmatch(node.value) else set()
        return {node.value} | parts
    return set()


def naming_modules() -> dict[str, list[str]]:
    """``{module path: the benchmark words it holds as string constants}`` outside
    :data:`OWN`."""
    words, out = _words(), {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).as_posix()
        if rel.startswith(OWN):
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        found = sorted({w for n in ast.walk(tree) for w in _named(n, docs) if w in words})
        if found:
            out[rel] = found
    return out


def test_the_words_come_from_the_registries():
    words = _words()
    assert {"bbq", "consistency", "generative", "probe"} <= words
    assert {"bbq_groups", "s_dis", "mfaa_mean", "generative_by_slice", "refusal_gap"} <= words
    assert "stereotype" not in words and "refusal" not in words      # the scorers' columns
    assert not GENERIC & words


def test_no_shared_module_names_a_benchmark():
    found = naming_modules()
    assert not found, ("these shared modules name a benchmark, its tables or metrics: ask the "
                       f"benchmark instead: {found}")


def test_the_packaged_thresholds_file_names_no_benchmark():
    """A benchmark's default rules and drift tolerances live in its folder
    (``Benchmark.rules``); the shared thresholds file (the packaged one, which ``init``
    copies into a project) declares none of a benchmark's tables or metrics."""
    doc = yaml.safe_load(data_path("thresholds", "default.yaml").read_text(encoding="utf-8"))
    words = _words()
    tables = {r.get("table") for r in doc.get("rules") or []}
    drift = set(doc.get("drift") or {})
    assert not (tables | drift) & words, (tables | drift) & words


def test_bbq_and_the_generative_audit_bring_their_rules_from_their_folders(tmp_path):
    """The rules in force: each benchmark's file (BBQ's and consistency's one file read
    once), then the project's, which changes a benchmark's rule by its id, key by key."""
    own = benchmark_rule_files()
    assert len(own) == len(set(own))
    rules = load_rules(data_path("thresholds"))
    src = {r.id: r.source.rsplit(":", 1)[0] for r in rules.rules}
    bbq_file = str(PKG / "benchmarks" / "bbq" / "rules.yaml")
    gen_file = str(PKG / "benchmarks" / "generative" / "rules.yaml")
    assert src["accuracy_floor_disambig"] == src["gtc_floor"] == bbq_file
    assert src["worst_slice_stereotype_per_family"] == gen_file
    assert rules.tolerance("s_dis").within_ci and rules.tolerance("refusal").within_ci
    project = tmp_path / "thresholds"
    project.mkdir()
    (project / "default.yaml").write_text(
        "version: 1\nrules:\n  - id: sdis_bound\n    bound: 0.5\n")
    mine = load_rules(project)
    before, after = rules.get("sdis_bound"), mine.get("sdis_bound")
    assert (before.bound, after.bound) == (0.10, 0.5)
    assert (after.table, after.metric, after.op) == (before.table, before.metric, before.op)
    assert after.source.startswith(str(project / "default.yaml") + ":")
