"""``fairness-tests init``: what it writes into a repository, and that the suite then
runs there (pytest -n 2 in an empty directory, replaying the embedded recordings)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from helpers import finish

from fairness_tests.benchmarks.bbq.data import bbq_dir
from fairness_tests.cli.init import init_project
from fairness_tests.cli.main import main
from fairness_tests.core.paths import data_path
from fairness_tests.core.project import find_project
from fairness_tests.rules import load_rules

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
OLD_OPTIONS = ("--live", "--replay", "--backend", "--repeats", "--protocol", "--thresholds",
               "--baseline-model")


def test_init_writes_a_project_that_overrides_the_packaged_defaults(tmp_path, monkeypatch):
    res = init_project(tmp_path)
    names = {p.relative_to(tmp_path).as_posix() for p in res.written}
    assert {"thresholds/default.yaml", "thresholds/models/embedded-gemma-3-270m.yaml",
            "tests/test_fairness.py", "pyproject.toml", ".github/workflows/fairness-gate.yml",
            ".gitignore"} <= names
    snaps = {n for n in names if n.startswith("tests/__snapshots__/test_fairness/")}
    # every reviewed snapshot of the package (the default run's and each benchmark's)
    packaged = ROOT / "fairness_tests" / "suite" / "__snapshots__" / "test_drift"
    assert snaps == {f"tests/__snapshots__/test_fairness/{p.name}"
                     for p in packaged.glob("*.txt")} and len(snaps) > 6
    # copies, comments included
    assert (tmp_path / "thresholds" / "default.yaml").read_bytes() == \
        data_path("thresholds", "default.yaml").read_bytes()
    text = (tmp_path / "thresholds" / "default.yaml").read_text()
    assert "# The project's decision rules" in text
    monkeypatch.chdir(tmp_path)
    assert find_project().root == tmp_path
    rs = load_rules(model="embedded:gemma-3-270m")
    assert rs.thresholds_files[0] == str(tmp_path / "thresholds" / "default.yaml")
    assert rs.get("mfaa_floor").expected_fail is not None     # the model's override came along


def test_init_uses_only_the_namespaced_pytest_options_and_ini_keys(tmp_path):
    init_project(tmp_path)
    pp = (tmp_path / "pyproject.toml").read_text()
    ini = tomllib.loads(pp)["tool"]["pytest"]["ini_options"]
    assert ini["fairness_model"] == "embedded:gemma-3-270m"
    assert ini["fairness_thresholds"] == "thresholds"
    assert ini["fairness_on_missing"] == "fail"
    assert all(k.startswith("fairness_") for k in ini)
    wf_text = (tmp_path / ".github" / "workflows" / "fairness-gate.yml").read_text()
    wf = yaml.safe_load(wf_text)
    run = "\n".join(s.get("run", "") for s in wf["jobs"]["fairness"]["steps"])
    for opt in ("--fairness-model", "--fairness-baseline-model", "--fairness-live",
                "--fairness-report"):
        assert opt in run
    for old in OLD_OPTIONS:
        assert f"{old} " not in run and f"{old}\n" not in run, old
    assert '"fairness-tests>=0.' in run                  # a range, not a pin
    assert "fairness_tests.suite.everything import *" in \
        (tmp_path / "tests" / "test_fairness.py").read_text()


def test_init_for_another_model_writes_its_override_manifest_and_card(tmp_path):
    init_project(tmp_path / "a", model="acme/chat-1")
    a = tmp_path / "a"
    assert (a / "thresholds" / "models" / "acme-chat-1.yaml").exists()
    assert not (a / "tests" / "__snapshots__").exists()  # nothing recorded, nothing reviewed
    assert yaml.safe_load((a / "fixtures" / "recordings" / "manifest.yaml").read_text()) == \
        {"recordings": []}
    assert (a / "fixtures" / "cards" / "acme-chat-1.yaml").exists()
    rs = load_rules(a / "thresholds", model="acme/chat-1")
    assert rs.files[-1].endswith("acme-chat-1.yaml")      # the empty override applies
    # a model matched by a packaged override gets that override's content
    init_project(tmp_path / "b", model="openai/gpt-4o-mini")
    assert (tmp_path / "b" / "thresholds" / "models" / "openai-gpt-4o-mini.yaml").read_bytes() \
        == data_path("thresholds", "models", "example-openai.yaml").read_bytes()


def test_init_keeps_existing_files_and_a_users_pytest_table(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-q"\n')
    (tmp_path / "thresholds").mkdir()
    (tmp_path / "thresholds" / "default.yaml").write_text("rules: []\n")
    assert main(["init", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "kept  thresholds/default.yaml" in out
    assert (tmp_path / "thresholds" / "default.yaml").read_text() == "rules: []\n"
    assert (tmp_path / "pyproject.toml").read_text() == (
        '[tool.pytest.ini_options]\naddopts = "-q"\n')
    assert 'fairness_model = "embedded:gemma-3-270m"' in out      # told what to add
    assert main(["init", "--dir", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "thresholds" / "default.yaml").read_bytes() == \
        data_path("thresholds", "default.yaml").read_bytes()


@pytest.mark.slow   # one inner xdist session over the whole suite (~1.5 min on 2 shared cores)
@pytest.mark.timeout(660)
def test_pytest_in_an_initialised_empty_directory_replays_and_passes(tmp_path, capsys):
    """The newcomer's path (issue 32), with no ../shared beside the repository: init
    says to get the data first; pytest without it stops at once with the way to get it;
    ``data fetch --from`` a copy of the stand-in installs it into ``.fairness/bbq``, each
    file labelled not the official release; with FAIRNESS_BBQ_DIR set as ``init`` says,
    the suite passes and its summary says the data is not the official release."""
    repo = tmp_path / "repo"
    repo.mkdir()
    assert main(["init", "--dir", str(repo)]) == 0
    assert "fairness-tests data fetch --dest .fairness/bbq" in capsys.readouterr().out
    copy = tmp_path / "bbqcopy"
    shutil.copytree(bbq_dir(), copy)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("FAIRNESS_PYTEST_SESSION", "PYTEST_XDIST_WORKER", "FAIRNESS_BBQ_DIR"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q",
                           "-p", "no:cacheprovider"], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    error = proc.stderr[proc.stderr.index("ERROR: "):].splitlines()[0]
    assert "--dest .fairness/bbq" in error and "--fairness-bbq-dir" in error
    assert "snapshot" not in proc.stdout + proc.stderr
    fetch = subprocess.run([sys.executable, "-m", "fairness_tests", "data", "fetch", "--dest",
                            ".fairness/bbq", "--from", str(copy)], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=600)
    assert fetch.returncode == 0, fetch.stderr
    labels = [ln for ln in fetch.stderr.splitlines() if ln.startswith("BBQ data: ")]
    assert len(labels) == 3 and all("not the official release" in ln for ln in labels)
    assert (repo / ".fairness" / "bbq" / "data" / "Race_x_SES.jsonl").is_file()
    env["FAIRNESS_BBQ_DIR"] = str(repo / ".fairness" / "bbq")    # export ...=$PWD/.fairness/bbq
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider",
                           "-rfE"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "Unknown config option" not in out, "the ini keys init writes are not the plugin's"
    # the summary line ("== 12 passed, 3 xfailed in 9.1s =="); plugins may print after it
    tail = [ln for ln in proc.stdout.splitlines() if ln.startswith("=") and " in " in ln][-1]
    assert " passed" in tail and "xfailed" in tail and "failed," not in tail.replace("xfailed", "")
    assert "6 snapshots passed" in out                    # the copied drift snapshots match
    assert (repo / ".fairness" / "store.sqlite").exists()  # replayed into the project's store
    # the main job's run was made once for the session: one worker audited, the other read it
    made = [ln for ln in proc.stdout.splitlines()
            if ln.startswith("embedded:gemma-3-270m: ") and " once (" in ln]
    assert len(made) == 1 and "audited once (" in made[0], out[-3000:]
    assert "Race_x_SES.jsonl: not the official release" in proc.stdout
    assert re.search(r"; [1-9]\d* other process(es)? read it$", made[0])   # read, not re-made


def _outcomes(junit: Path) -> dict[str, str]:
    """{test id: passed | failure | error | skipped (xfail included)} from a JUnit file."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    return out


@pytest.mark.slow   # two inner sessions on a smoke run
@pytest.mark.timeout(660)
def test_xdist_workers_make_the_run_once_with_the_outcomes_of_one_process(tmp_path, warm_store):
    """Issue 24: ``pytest -n 2`` in an initialised repository makes the run once (one
    worker audits, the other reads what it saved: the summary says which), and every
    test has the outcome it has in one process (``-n 0``)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    assert main(["init", "--dir", str(repo)]) == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAIRNESS_BBQ_DIR": str(
        bbq_dir().resolve())}
    for k in ("FAIRNESS_PYTEST_SESSION", "PYTEST_XDIST_WORKER", "FAIRNESS_PROGRESS"):
        env.pop(k, None)
    # a smoke run that replays (as tests/test_card_fill.py's small audit): the BBQ and
    # generative protocols, 4 items per BBQ cell without rotations, 64 grid rows
    smoke = ["--fairness-benchmarks", "bbq", "--fairness-benchmarks", "generative",
             "--fairness-limit", "4", "--fairness-rotations", "none",
             "--fairness-gen-limit", "64", "-p", "no:cacheprovider"]
    # the project's store (ini fairness_store), holding the recordings already
    (repo / ".fairness").mkdir(exist_ok=True)
    warm_store.rename(repo / ".fairness" / "store.sqlite")
    # the two sessions run at once, each in its own copy of the repository (its own
    # store and run cache): their start-up overlaps
    shutil.copytree(repo, tmp_path / "repo0")
    procs = {n: subprocess.Popen([sys.executable, "-m", "pytest", "-n", n, *smoke,
                                  f"--junitxml={tmp_path / n}.xml"],
                                 cwd=repo if n == "2" else tmp_path / "repo0", env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in ("2", "0")}
    made, outcomes = {}, {}
    outs = finish(procs.values(), 600)
    for (n, p), (stdout, stderr) in zip(procs.items(), outs, strict=True):
        assert p.returncode in (0, 1), stdout[-3000:] + stderr[-3000:]
        made[n] = [ln for ln in stdout.splitlines()
                   if ln.startswith("embedded:gemma-3-270m: ") and " once (" in ln]
        outcomes[n] = _outcomes(tmp_path / f"{n}.xml")
    assert len(made["2"]) == 1 and "audited once (" in made["2"][0]
    assert re.search(r"; [1-9]\d* other process(es)? read it$", made["2"][0])
    assert len(made["0"]) == 1 and "audited once (main, " in made["0"][0]
    assert made["0"][0].endswith("; 0 other processes read it")
    assert len(outcomes["0"]) > 20 and outcomes["2"] == outcomes["0"]
    assert {"passed", "skipped"} <= set(outcomes["0"].values())


@pytest.mark.parametrize("model, slug", [
    ("my model/../x", "my-model---x"),          # separators and '..' become '-'
    ("../../etc/passwd", "----etc-passwd"),       # ".." "-" ".." "-": 4 dashes
    (".hidden", "hidden"),                       # not a hidden file
    ("gpt-[4]*", "gpt--4--"),                    # glob characters are not a pattern
])
def test_a_model_id_maps_to_one_safe_file_name_init_and_the_loaders_agree(
        tmp_path, capsys, monkeypatch, model, slug):
    """Issue 32: ``init --model "my model/../x"`` wrote ``my-model-..-x.yaml`` silently.
    Now the name has no separator, no '..', no leading dot; init says which file the id
    maps to; load_rules applies that override to that model id (and to no other) and
    the card lookup finds the card YAML init wrote."""
    assert main(["init", "--dir", str(tmp_path), "--model", model]) == 0
    out = capsys.readouterr().out
    assert f"model id {model!r} is written as the file name {slug!r}" in out
    written = {p.name for p in (tmp_path / "thresholds" / "models").iterdir()}
    assert written == {f"{slug}.yaml"}
    assert ".." not in slug and "/" not in slug and not slug.startswith(".")
    rules = load_rules(tmp_path / "thresholds", model=model)
    assert rules.files[-1] == str(tmp_path / "thresholds" / "models" / f"{slug}.yaml")
    other = load_rules(tmp_path / "thresholds", model=model + "2")
    assert len(other.thresholds_files) == 1              # the defaults only
    monkeypatch.chdir(tmp_path)
    assert find_project().card_yaml(model) == tmp_path / "fixtures" / "cards" / f"{slug}.yaml"
