"""Loading the pytest plugin imports no pandas, numpy, litellm, torch or scipy, and a
session that names no fairness option, ini key or fixture builds nothing (the time it
costs is measured in bench/bench_plugin_cost.py, not here)."""
from __future__ import annotations

import json
import subprocess
import sys

pytest_plugins = ["pytester"]

HEAVY = ("pandas", "numpy", "litellm", "torch", "scipy", "jsonschema", "transformers")


def test_loading_the_plugin_imports_nothing_heavy():
    code = ("import sys, json, fairness_tests.plugin.plugin as p; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert json.loads(out.stdout) == []


def test_an_unrelated_session_builds_no_settings(pytester):
    pytester.makepyfile(test_x="def test_one():\n    assert True\n")
    pytester.makeconftest(
        "import sys\n"
        "def pytest_sessionfinish(session):\n"
        "    fs = session.config.stash[__import__('fairness_tests.plugin.plugin', "
        "fromlist=['_KEY'])._KEY]\n"
        "    heavy = [m for m in ('pandas', 'numpy') if m in sys.modules]\n"
        "    print('BUILT', fs.built, 'HEAVY', heavy)\n")
    r = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    assert "BUILT False HEAVY []" in r.stdout.str()
