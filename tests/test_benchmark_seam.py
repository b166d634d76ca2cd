"""Where the benchmarks are named (issue 33, "a benchmark is one folder"): a module
outside a benchmark's own folder that names a benchmark, or one of its tables or
metrics, by string is a place that must change when a benchmark is added.

The names are read from the registries (the benchmark registry and the table-schema
registry :data:`fairness_tests.metrics.schema.TABLES`), never typed here; docstrings do
not count. :data:`STILL_NAMING` lists the shared modules that still name one, and only
shrinks: a module not in it that starts naming a benchmark fails, and so does a module in
it that no longer does (take it off the list). The goal is an empty list.
"""
from __future__ import annotations

import ast
from pathlib import Path

import fairness_tests
from fairness_tests.core.registry import BENCHMARK_NAMES
from fairness_tests.metrics.schema import TABLES
from fairness_tests.scoring.lexical import COUNT_METRICS, FLAG_METRICS

PKG = Path(fairness_tests.__file__).parent
#: the benchmarks' own folders (relative to the package), and the fairness suite
OWN = ("protocols/bbq/", "protocols/generative/", "benchmarks/", "suite/")
#: metric names shared by every benchmark (not one benchmark's): the generic ones, and
#: the scorers' output columns (the scoring layer's own vocabulary, read from it: every
#: benchmark that scores generations shares them, the generative audit and a team's
#: ``generate`` outcome alike; a provider's ``refusal`` field is not a benchmark's either)
GENERIC = frozenset({"accuracy", "invalid_rate", "error", "word_len",
                     *FLAG_METRICS, *COUNT_METRICS})
#: table names the card and run metadata use for a benchmark besides its registry name
ALIASES = frozenset({"counterfactual"})

STILL_NAMING = frozenset({
    "card/layout.py",
    "card/sections/attributes.py",
})


def _words() -> frozenset[str]:
    metrics = {m for t in TABLES.values() for m in (getattr(t, "metrics", ()) or ())}
    return frozenset(set(BENCHMARK_NAMES) | ALIASES | set(TABLES) | (metrics - GENERIC))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


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
        found = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                        and isinstance(n.value, str) and id(n) not in docs
                        and n.value in words})
        if found:
            out[rel] = found
    return out


def test_the_words_come_from_the_registries():
    words = _words()
    assert {"bbq", "consistency", "generative", "probe"} <= words
    assert {"bbq_groups", "s_dis", "mfaa_mean", "generative_by_slice", "refusal_gap"} <= words
    assert "stereotype" not in words and "refusal" not in words      # the scorers' columns
    assert not GENERIC & words


def test_no_new_shared_module_names_a_benchmark():
    new = {m: w for m, w in naming_modules().items() if m not in STILL_NAMING}
    assert not new, ("these shared modules name a benchmark, its tables or metrics: ask the "
                     f"benchmark instead: {new}")


def test_the_list_of_modules_still_naming_one_only_shrinks():
    gone = sorted(STILL_NAMING - set(naming_modules()))
    assert not gone, f"these modules no longer name a benchmark: take them off STILL_NAMING: {gone}"
