"""Every BBQ file a run reads is said to be the official release or not (issue 32, item 6),
on every path: ``data fetch --from``, ``audit --bbq-dir``, ``$FAIRNESS_BBQ_DIR``, ``bbq
score --data``, the pytest plugin's ``--fairness-bbq-dir``; the run (run.json) and the
card (yaml, md, html) record it; ``--require-official`` refuses what is not.

Expected digests are computed here with hashlib (sha256 of the bytes) and read from the
data's own READMEs (../shared/bbq/README.md lists the official sha256 of the stand-in's
files, ../shared/bbq_official/README.md those of the official files): never copied from
the program."""
from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from fairness_tests.benchmarks.bbq.data import load_bbq
from fairness_tests.benchmarks.bbq.official import NOT_OFFICIAL, UNKNOWN_FILE, release_status

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from fault_server import FaultServer  # noqa: E402
from helpers import run_cli  # noqa: E402

SHARED = ROOT.parent / "shared"
STAND_IN = SHARED / "bbq"
OFFICIAL_DIR = SHARED / "bbq_official"
CAT = "Religion"                                  # the smallest official file with predictions
FILE = f"{CAT}.jsonl"
PREDS = OFFICIAL_DIR / "results" / "UnifiedQA" / f"preds_{CAT}.jsonl"
FIELD = "unifiedqa-t5-11b_pred_race"
pytestmark = pytest.mark.skipif(not (OFFICIAL_DIR / "data" / FILE).exists()
                                or not (STAND_IN / "Race_x_SES.jsonl").exists(),
                                reason="../shared/bbq or ../shared/bbq_official not present")
pytest_plugins = ["pytester"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def readme_sha256(readme: Path) -> dict[str, str]:
    """{file name: sha256} of the README's table rows ``| dir/NAME | lines | sha256 |``."""
    rows = re.findall(r"^\| (?:data|supplemental)/([\w.]+)[^|]*\|[^|]*\| ([0-9a-f]{64}) \|$",
                      readme.read_text(encoding="utf-8"), re.M)
    return dict(rows)


OFFICIAL_SHA = {**readme_sha256(STAND_IN / "README.md"),
                **readme_sha256(OFFICIAL_DIR / "README.md")} if STAND_IN.exists() else {}


def official_line(name: str) -> str:
    return f"BBQ data: {name}: official release"


def one_byte_changed(tmp_path: Path) -> Path:
    """A copy of the official file with one byte changed (still valid JSON lines)."""
    d = tmp_path / "changed"
    d.mkdir()
    data = (OFFICIAL_DIR / "data" / FILE).read_bytes()
    i = data.index(b"Muslim")
    (d / FILE).write_bytes(data[:i] + b"M" + b"u".upper() + data[i + 2:])
    assert len((d / FILE).read_bytes()) == len(data)
    return d


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    monkeypatch.delenv("FAIRNESS_BBQ_DIR", raising=False)


# ------------------------------------------------------------------ the stand-in
def test_the_readmes_list_the_official_sha256_and_the_stand_in_differs():
    assert set(OFFICIAL_SHA) >= {"Race_x_SES.jsonl", "Race_x_gender.jsonl",
                                 "additional_metadata.csv", FILE}
    for name in ("Race_x_SES.jsonl", "Race_x_gender.jsonl", "additional_metadata.csv"):
        assert sha256(STAND_IN / name) != OFFICIAL_SHA[name]
    assert sha256(OFFICIAL_DIR / "data" / FILE) == OFFICIAL_SHA[FILE]


def test_the_stand_in_files_are_labelled_not_official_with_both_hashes():
    data = load_bbq(STAND_IN)
    release = data.release
    assert set(release) == {"Race_x_SES.jsonl", "Race_x_gender.jsonl", "additional_metadata.csv"}
    for name, st in release.items():
        assert st.status == NOT_OFFICIAL and not st.official
        line = st.line()
        assert line.startswith(f"{name}: not the official release (claims to be ")
        assert f"sha256 {sha256(STAND_IN / name)} vs official {OFFICIAL_SHA[name]}" in line
    assert data.provenance()["release"]["Race_x_SES.jsonl"]["status"] == NOT_OFFICIAL


def test_a_file_the_release_does_not_have_is_an_unknown_file():
    st = release_status("Extra.jsonl", "0" * 64, "0" * 40)
    assert st.status == UNKNOWN_FILE and not st.official
    assert st.line().startswith("Extra.jsonl: unknown file")


# ------------------------------------------------------------------ every path
def test_fetch_from_a_local_copy_says_official_release(tmp_path, capfd):
    r = run_cli(capfd, "data", "fetch", "--categories", CAT, "--from", str(OFFICIAL_DIR),
                "--dest", str(tmp_path / "bbq"))
    assert r.returncode == 0, r.stderr
    assert official_line(FILE) in r.stderr
    doc = json.loads(r.stdout)
    assert doc["files"][FILE]["release"] == "official release"


def score(capfd, *extra: str):
    return run_cli(capfd, "bbq", "score", "--predictions", str(PREDS), "--answer-field", FIELD,
                   "--n-boot", "100", "--no-rules", *extra)


def test_bbq_score_data_and_the_env_var_say_official_release(capfd, monkeypatch):
    r = score(capfd, "--data", str(OFFICIAL_DIR))
    assert r.returncode == 0, r.stderr
    assert official_line(FILE) in r.stdout.splitlines()[-1]
    monkeypatch.setenv("FAIRNESS_BBQ_DIR", str(OFFICIAL_DIR))
    r = score(capfd, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert official_line(FILE) in r.stderr
    doc = json.loads(r.stdout)
    assert doc["data"]["release"][FILE]["status"] == "official release"


def test_one_changed_byte_is_not_the_official_release_and_the_card_says_so(tmp_path, capfd):
    d = one_byte_changed(tmp_path)
    want = (f"BBQ data: {FILE}: not the official release (claims to be data/{FILE} of "
            f"nyu-mll/BBQ@")
    both = f"sha256 {sha256(d / FILE)} vs official {OFFICIAL_SHA[FILE]}"
    r = score(capfd, "--data", str(d), "--out", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith(f"BBQ data: {FILE}"))
    assert line.startswith(want) and both in line
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["bbq"]["release"][FILE]["status"] == "not the official release"
    assert meta["bbq"]["release"][FILE]["official_sha256"] == OFFICIAL_SHA[FILE]
    assert meta["bbq"]["official"] is False
    # the card of that run directory: yaml, md and html carry it
    r = run_cli(capfd, "card", "--run", str(tmp_path / "run"), "--out", str(tmp_path / "card"))
    assert r.returncode == 0, r.stderr
    assert_card_says(tmp_path / "card", {FILE: (sha256(d / FILE), OFFICIAL_SHA[FILE])})
    # --require-official refuses it: exit 2, one line naming the file
    r = score(capfd, "--data", str(d), "--require-official")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and str(d / FILE) in r.stderr
    assert "not the official release" in r.stderr


def assert_card_says(card: Path, not_official: dict[str, tuple[str, str]]) -> None:
    """The card's yaml, md and html: each file's status, and a warning naming the files
    that are not the official release (``{name: (its sha256, official sha256)}``)."""
    doc = yaml.safe_load((card / "card.yaml").read_text(encoding="utf-8"))
    rel = doc["evaluation_protocol"]["bbq"]["data_release"]
    for name, (own, official) in not_official.items():
        assert rel[name]["status"] == "not the official release"
        assert rel[name]["sha256"] == own and rel[name]["official_sha256"] == official
    md = (card / "card.md").read_text(encoding="utf-8")
    html = (card / "card.html").read_text(encoding="utf-8")
    section = md[md.index("### BBQ data and settings"):]
    warning = section.split("\n\n")[1]           # the first block under the heading
    assert warning.startswith("> **Note:** BBQ data is not the official release:")
    for name, (_, official) in not_official.items():
        esc = name.replace("_", "\\_")
        assert esc in warning
        row = next(x for x in section.splitlines() if x.startswith(f"| {esc} |"))
        assert "not the official release" in row and official in row
    warn = re.search(r'<p class="warn">([^<]*)</p>', html)
    assert warn and "BBQ data is not the official release" in warn.group(1)


def test_the_audit_with_bbq_dir_says_official_release_and_its_card_has_no_warning(
        tmp_path, capfd):
    with FaultServer(answers=lambda prompt: {"a": 1.0}) as s:
        r = run_cli(capfd, "audit", "--live", "--backend", "litellm", "--model",
                    "openai/gpt-4o-mini", "--api-base", s.url, "--store",
                    str(tmp_path / "s.sqlite"), "--benchmarks", "bbq", "--rotations", "none",
                    "--categories", CAT, "--bbq-dir", str(OFFICIAL_DIR), "--limit", "1",
                    "--n-boot", "100", "--out", str(tmp_path / "out"))
    assert r.returncode in (0, 1, 5), r.stderr
    assert official_line(FILE) in r.stdout
    meta = json.loads((tmp_path / "out" / "run" / "run.json").read_text())
    assert meta["bbq"]["release"][FILE]["status"] == "official release"
    card = tmp_path / "out" / "card"
    doc = yaml.safe_load((card / "card.yaml").read_text(encoding="utf-8"))
    assert doc["evaluation_protocol"]["bbq"]["data_release"][FILE]["status"] == \
        "official release"
    md = (card / "card.md").read_text(encoding="utf-8")
    assert "not the official release" not in md
    assert f"| {FILE.replace('_', chr(92) + '_')} | {OFFICIAL_SHA[FILE]} | official release |" in md
    assert "not the official release" not in (card / "card.html").read_text(encoding="utf-8")


def test_the_main_jobs_card_says_the_stand_in_is_not_the_official_release(main_job):
    names = ("Race_x_SES.jsonl", "Race_x_gender.jsonl", "additional_metadata.csv")
    assert_card_says(main_job.card, {n: (sha256(STAND_IN / n), OFFICIAL_SHA[n]) for n in names})


@pytest.mark.slow
def test_the_pytest_plugin_says_official_release(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_suite=SUITE)
    args = [f"--rootdir={pytester.path}", "--fairness-live", "--fairness-model",
            "text-completion-openai/base-x", f"--fairness-store={tmp_path / 's.sqlite'}",
            f"--fairness-bbq-dir={OFFICIAL_DIR}", "--fairness-categories", CAT,
            "--fairness-benchmarks", "bbq", "--fairness-limit", "1", "--fairness-rotations",
            "none", "--fairness-n-boot", "100", "-p", "no:cacheprovider", "-p", "no:randomly"]
    with FaultServer(base_model=True, answers=lambda p: {"a": 0.6, "b": 0.3, "c": 0.1}) as s:
        r = pytester.runpytest_subprocess(*args, f"--fairness-api-base={s.url}", timeout=600)
    out = "\n".join(r.outlines)
    assert r.ret in (0, 1), out[-3000:] + "\n".join(r.errlines)[-3000:]
    assert official_line(FILE) in out


SUITE = """
import pytest

@pytest.mark.bbq
@pytest.mark.fairness_rules(metrics="accuracy")
def test_accuracy(fairness_verdict):
    fairness_verdict.check()
"""


def test_the_plugin_says_a_saved_runs_data_is_not_the_official_release(pytester, tmp_path,
                                                                       capfd):
    """``--fairness-run DIR`` of a run on a changed copy: the "fairness runs" lines say it."""
    d = one_byte_changed(tmp_path)
    r = score(capfd, "--data", str(d), "--out", str(tmp_path / "run"), "--model", "m")
    assert r.returncode == 0, r.stderr
    pytester.makepyfile(test_suite=SUITE)
    res = pytester.runpytest("--fairness-model", "m", "--fairness-run", str(tmp_path / "run"),
                             "-p", "no:cacheprovider", "-p", "no:randomly")
    out = "\n".join(res.outlines)
    assert f"BBQ data: {FILE}: not the official release (claims to be data/{FILE}" in out, \
        out[-3000:]
    assert f"sha256 {sha256(d / FILE)} vs official {OFFICIAL_SHA[FILE]}" in out
