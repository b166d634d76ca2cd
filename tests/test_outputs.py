"""No data loss through ``--out``: a new directory is created; one this tool wrote (it
holds :data:`~fairness_tests.core.io.OUTPUT_MARKER`) is replaced whole, atomically; a
folder holding anything else, or an existing file, is refused with exit 2 and one line,
before any work; ``--force`` replaces only the tool's own entries.

Helpers of :mod:`fairness_tests.core.io` directly, then every command that writes
``--out``, run as ``python -m fairness_tests`` runs it (``sys.exit(main())``), in this
process: its exit code and what it printed on the file descriptors."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import run_cli

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.io import OUTPUT_MARKER, check_output, foreign_entries, output_dir
from fairness_tests.core.paths import bbq_dir
from fairness_tests.protocols.bbq.data import load_bbq

ROOT = Path(__file__).resolve().parents[1]
SHARED = bbq_dir()
needs_bbq = pytest.mark.skipif(not (SHARED / "Race_x_SES.jsonl").exists(),
                               reason="../shared/bbq not present")


@pytest.fixture
def ft(monkeypatch, capfd):
    """``ft(*args)``: ``fairness-tests ARGS`` in this process (the environment and working
    directory ``python -m fairness_tests`` had here): a
    :class:`subprocess.CompletedProcess` of its exit code and output."""
    for k, v in (("LITELLM_LOCAL_MODEL_COST_MAP", "True"), ("HF_HUB_OFFLINE", "1"),
                 ("FAIRNESS_PROGRESS", "off")):
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(ROOT)

    return lambda *args: run_cli(capfd, *args)


def refused(p: subprocess.CompletedProcess, path: Path) -> None:
    """Exit 2, one line naming the path, no traceback."""
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in p.stderr, p.stderr


def user_folder(tmp_path: Path) -> Path:
    d = tmp_path / "mydocs"
    d.mkdir()
    (d / "notes.txt").write_text("mine\n", encoding="utf-8")
    return d


# ----------------------------------------------------------------------------- core.io

def test_output_dir_new_then_replaced_whole(tmp_path):
    d = tmp_path / "out"
    with output_dir(d) as t:
        (t / "a.txt").write_text("1")
        (t / "stale.txt").write_text("old")
    assert json.loads((d / OUTPUT_MARKER).read_text())["entries"] == ["a.txt", "stale.txt"]
    with output_dir(d) as t:
        (t / "a.txt").write_text("2")
    assert sorted(p.name for p in d.iterdir()) == [OUTPUT_MARKER, "a.txt"]
    assert (d / "a.txt").read_text() == "2"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]          # no temp left beside


def test_output_dir_interrupted_leaves_the_old_output(tmp_path):
    d = tmp_path / "out"
    with output_dir(d) as t:
        (t / "a.txt").write_text("old")
    for exc in (KeyboardInterrupt, RuntimeError):
        with pytest.raises(exc), output_dir(d) as t:
            (t / "a.txt").write_text("new")
            raise exc
        assert (d / "a.txt").read_text() == "old"
        assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_user_files_and_regular_files_are_refused(tmp_path):
    mine = user_folder(tmp_path)
    with pytest.raises(ConfigError, match="notes.txt"):
        check_output(mine)
    with pytest.raises(ConfigError, match="notes.txt"):
        check_output(mine, force=True)                 # no marker: never ours to replace
    f = tmp_path / "file.txt"
    f.write_text("keep")
    with pytest.raises(ConfigError, match="not a directory"):
        check_output(f, force=True)
    assert (mine / "notes.txt").read_text() == "mine\n" and f.read_text() == "keep"
    (tmp_path / "empty").mkdir()
    check_output(tmp_path / "empty")                   # an empty folder is fine


def test_force_replaces_only_the_tools_entries(tmp_path):
    d = tmp_path / "out"
    with output_dir(d) as t:
        (t / "run.json").write_text("old")
        (t / "gone.csv").write_text("old")
    (d / "notes.txt").write_text("mine")               # the user adds a file
    assert foreign_entries(d) == ["notes.txt"]
    with pytest.raises(ConfigError, match="--force"):
        check_output(d)
    with output_dir(d, force=True) as t:
        (t / "run.json").write_text("new")
    assert (d / "notes.txt").read_text() == "mine"
    assert (d / "run.json").read_text() == "new" and not (d / "gone.csv").exists()
    assert foreign_entries(d) == ["notes.txt"]


# ----------------------------------------------------------------------------- commands

@pytest.fixture(scope="module")
def preds(tmp_path_factory) -> Path:
    """Every Race_x_SES item answered with its label."""
    items = load_bbq(SHARED, ("Race_x_SES",)).items
    p = tmp_path_factory.mktemp("p") / "perfect.jsonl"
    p.write_text("".join(json.dumps({"category": x.dataset, "example_id": int(x.example_id),
                                     "answer": int(x.label)}) + "\n"
                         for x in items.itertuples()), encoding="utf-8")
    return p


@needs_bbq
def test_bbq_score_out_keeps_a_users_folder_and_file(preds, tmp_path, ft):
    """Defect (issue 22): bbq score --out mydocs deleted mydocs/notes.txt and exited 0;
    --out naming a file replaced it with a run directory."""
    mine = user_folder(tmp_path)
    refused(ft("bbq", "score", "--predictions", str(preds), "--out", str(mine),
               "--n-boot", "100"), mine)
    refused(ft("bbq", "score", "--predictions", str(preds), "--out", str(mine),
               "--n-boot", "100", "--force"), mine)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    f = tmp_path / "report.txt"
    f.write_text("keep", encoding="utf-8")
    refused(ft("bbq", "score", "--predictions", str(preds), "--out", str(f), "--n-boot", "100"), f)
    assert f.read_text() == "keep"


@needs_bbq
def test_score_runs_replace_their_own_output_and_feed_gate_card_compare(preds, tmp_path, ft):
    run = tmp_path / "run"
    for _ in range(2):                              # the second replaces the first, whole
        p = ft("bbq", "score", "--predictions", str(preds), "--out", str(run), "--n-boot",
               "100", "--model", "m")
        assert p.returncode == 0, p.stderr
    assert (run / OUTPUT_MARKER).exists() and (run / "run.json").exists()
    assert [q.name for q in tmp_path.iterdir()] == ["run"]
    mine = user_folder(tmp_path)
    refused(ft("gate", str(run), str(run), "--out", str(mine)), mine)
    refused(ft("card", "--run", str(run), "--out", str(mine)), mine)
    refused(ft("compare", str(run), str(run), "--names", "a,b", "--out", str(mine)), mine)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    card = tmp_path / "card"
    assert ft("card", "--run", str(run), "--out", str(card)).returncode == 0
    assert (card / OUTPUT_MARKER).exists() and (card / "card.html").exists()


def test_audit_and_generative_out_refuse_a_users_folder_before_any_work(tmp_path, ft):
    """Defect: audit --out D wrote into D/run/ beside the user's files, generative score
    --out deleted them. Refused first: nothing is asked, nothing written."""
    mine = user_folder(tmp_path)
    refused(ft("audit", "--protocols", "bbq", "--limit", "1", "--out", str(mine),
               "--store", str(tmp_path / "s.sqlite")), mine)
    assert not (tmp_path / "s.sqlite").exists()
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text("", encoding="utf-8")
    refused(ft("generative", "score", "--outputs", str(outputs), "--out", str(mine)), mine)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
