"""A benchmark of another distribution, end to end (issue 33): ``tests/data/toy_benchmark``
(a pronoun-preference toy: two loglikelihood requests per occupation, one table, one
rule, one gate part, one property test) is built into a wheel, installed into a fresh
virtual environment beside the tool, and run there through ``audit`` (two tiny real
models), the pytest suite, ``gate``, ``card`` and ``compare``, with no line of this
repository changed for it. Expected values are recomputed from the run's own records
(the share of occupations whose " she" is the more likely, and its Wilson interval)."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.tiny_models import build_tiny_model, build_tiny_tokenizer

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "data" / "toy_benchmark"
WORDS = ("the nurse engineer teacher pilot baker judge doctor secretary farmer dancer chef "
         "lawyer said that he she").split()
MODELS = ("llama", "gemma3")
Z = 1.959963984540054

pytestmark = pytest.mark.skipif(
    shutil.which("python3") is None, reason="needs python3 to build the virtual environment")


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: int = 600):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """The venv, the two tiny models, and both audited runs (one store)."""
    pytest.importorskip("transformers")
    base = tmp_path_factory.mktemp("outside")
    src = base / "src"
    shutil.copytree(TOY, src)                      # never build inside the repository
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                  "--no-build-isolation", "-w", str(base / "dist"), str(src)], base,
                 dict(os.environ))
    assert built.returncode == 0, built.stderr[-2000:]
    venv = base / "venv"
    made = _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], base,
                dict(os.environ))
    assert made.returncode == 0, made.stderr[-2000:]
    py = str(venv / "bin" / "python")
    wheel = next((base / "dist").glob("toybench-*.whl"))
    inst = _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                base, dict(os.environ))
    assert inst.returncode == 0, inst.stderr[-2000:]
    for kind in MODELS:
        build_tiny_model(kind, base / kind, build_tiny_tokenizer(base / kind, WORDS))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    runs = {}
    for kind in MODELS:
        out = _run([py, "-m", "fairness_tests.cli.main", "audit", "--live", "--benchmarks",
                    "toybench", "--model", str(base / kind), "--store",
                    str(base / "store.sqlite"), "--out", str(base / f"run-{kind}")], base, env)
        assert out.returncode in (0, 1), out.stderr[-3000:]
        runs[kind] = base / f"run-{kind}" / "run"
    return {"base": base, "py": py, "env": env, "runs": runs}


def _cli(world: dict, *args: str):
    return _run([world["py"], "-m", "fairness_tests.cli.main", *args], world["base"],
                world["env"])


def test_the_venv_sees_it_and_this_checkout_does_not(world):
    code = "from fairness_tests.core.registry import REGISTRY; print(list(REGISTRY))"
    inside = _run([world["py"], "-c", code], world["base"], world["env"])
    assert inside.stdout.strip().endswith("'toybench']")
    outside = _run([sys.executable, "-c", code], world["base"], world["env"])
    assert "toybench" not in outside.stdout


def test_the_audit_writes_its_records_table_verdict_and_metadata(world):
    for run in world["runs"].values():
        rec = pd.read_csv(run / "records" / "toyrec.csv.gz")
        assert len(rec) == 12
        assert (rec["picks_she"] == (rec["ll_she"] > rec["ll_he"]).astype(int)).all()
        t = pd.read_csv(run / "tables" / "toy_table.csv")
        k, n = int(rec["picks_she"].sum()), len(rec)
        p = k / n
        half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
        lo = (p + Z * Z / (2 * n) - half) / (1 + Z * Z / n)
        assert t["value"].iloc[0] == pytest.approx(p, abs=1e-9)      # the CSV's 10 digits
        assert t["ci_low"].iloc[0] == pytest.approx(lo, abs=1e-9)
        v = pd.read_csv(run / "verdicts.csv")
        row = v[v["rule"] == "toy_she_rate_bound"].iloc[0]
        assert row["status"] == ("pass" if p <= 0.9 else "fail")
        meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
        assert meta["toy"] == {"n_items": 12, "verb": "said"}
        assert any(f.endswith("toybench/rules.yaml") for f in meta["thresholds"])


def test_its_own_option_reaches_it_through_every_source(world):
    """Its option group (``Benchmark.option_group``) is an audit option of the venv's
    tool (command line and pytest), unknown to this checkout's; it reaches the family (the
    run records the verb, and its log-likelihoods differ: other contexts); given to a run
    that does not ask the toy benchmark it is refused in one line."""
    assert "--toy-verb {said,thought}" in _cli(world, "audit", "--help").stdout
    here = _run([sys.executable, "-m", "fairness_tests.cli.main", "audit", "--help"],
                world["base"], world["env"])
    assert "--toy-verb" not in here.stdout
    pyhelp = _run([world["py"], "-m", "pytest", "--help"], world["base"], world["env"])
    assert "--fairness-toy-verb" in pyhelp.stdout
    base, kind = world["base"], MODELS[0]
    out = _cli(world, "audit", "--live", "--benchmarks", "toybench", "--toy-verb", "thought",
               "--model", str(base / kind), "--store", str(base / "store.sqlite"), "--out",
               str(base / "run-thought"))
    assert out.returncode in (0, 1), out.stderr[-3000:]
    meta = json.loads((base / "run-thought" / "run" / "run.json").read_text(encoding="utf-8"))
    assert meta["toy"] == {"n_items": 12, "verb": "thought"}
    said = pd.read_csv(world["runs"][kind] / "records" / "toyrec.csv.gz")
    thought = pd.read_csv(base / "run-thought" / "run" / "records" / "toyrec.csv.gz")
    assert (said["occupation"] == thought["occupation"]).all()
    assert not (said["ll_he"] == thought["ll_he"]).all()
    bad = _cli(world, "audit", "--benchmarks", "bbq", "--toy-verb", "thought", "--dry-run")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--toy-verb: applies to toybench, which this run does not ask" in bad.stderr


def test_the_card_lists_it(world):
    card = (world["runs"]["llama"].parent / "card" / "card.md").read_text(encoding="utf-8")
    assert "toybench" in card


def test_the_gate_compares_it_item_by_item(world):
    runs = world["runs"]
    out = _cli(world, "gate", str(runs["llama"]), str(runs["gemma3"]), "--out",
               str(world["base"] / "gate"))
    assert out.returncode in (0, 1), out.stderr[-2000:]
    g = pd.read_csv(world["base"] / "gate" / "gate.csv")
    row = g[g["metric"] == "toy_she_rate"].iloc[0]
    rb = pd.read_csv(runs["llama"] / "records" / "toyrec.csv.gz")
    rc = pd.read_csv(runs["gemma3"] / "records" / "toyrec.csv.gz")
    assert row["delta"] == pytest.approx(rc["picks_she"].mean() - rb["picks_she"].mean())
    assert row["rule"] == "toy_she_rate_bound" and row["n"] == 12
    assert "toyfam items" in out.stdout


def test_compare_lays_the_two_models_side_by_side(world):
    runs = world["runs"]
    out = _cli(world, "compare", str(runs["llama"]), str(runs["gemma3"]), "--out",
               str(world["base"] / "compare"))
    assert out.returncode == 0, out.stderr[-2000:]
    text = (world["base"] / "compare" / "compare.md").read_text(encoding="utf-8")
    assert "toy_she_rate" in text


def test_the_suite_runs_its_property_and_drift_tests(world):
    """The suite from a project's own test module (as ``init`` writes it): the toy's
    property test carries its marker; its drift snapshot is written, then holds."""
    proj = world["base"] / "proj"
    proj.mkdir()
    (proj / "test_fairness.py").write_text(
        "from fairness_tests.suite.everything import *  # noqa: F401,F403\n", encoding="utf-8")
    args = [world["py"], "-m", "pytest", "-p", "no:cacheprovider", "test_fairness.py",
            "--fairness-run", str(world["runs"]["llama"]), "-v"]
    first = _run([*args, "--snapshot-update"], proj, world["env"])
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    again = _run([*args, "-m", "toybench or not toybench"], proj, world["env"])
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert "test_toy_she_rate[" in again.stdout and "PASSED" in again.stdout
    assert "test_metric_table_drift[" in again.stdout
    marked = _run([*args, "-m", "toybench"], proj, world["env"])
    assert "1 passed" in marked.stdout and "test_toy_she_rate" in marked.stdout
