"""The newcomer's path (issue 32): what a new user reads on a fresh machine, from
``--help``, ``init`` and the messages of a missing or unreachable data source, says what
to do next in the words of the context it is read in, and a failed step leaves nothing
behind."""
from __future__ import annotations

import argparse
import re
import shlex
import socket
import sys
from pathlib import Path

import pytest

from fairness_tests.benchmarks.bbq.data import BBQDataNotFound
from fairness_tests.cli.main import build_parser, plain_text
from fairness_tests.plugin.plugin import usage_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import run_cli  # noqa: E402

OFFICIAL_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "bbq_official"
MARKUP = ("``", ":class:", ":func:", ":mod:", ":data:", ":meth:")


def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (bound, then released: a connection to it
    is refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every command path of the parser tree (``()``, ``("data",)``, ``("data", "fetch")``...)."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


ALL_COMMANDS = list(commands(build_parser()))


def test_the_command_tree_is_walked():
    assert len(ALL_COMMANDS) > 20 and ("data", "fetch") in ALL_COMMANDS


@pytest.mark.parametrize("path", ALL_COMMANDS, ids=lambda p: " ".join(p) or "(top)")
def test_every_commands_help_is_plain_text(path, capfd):
    """Defect: ``--help`` showed the docstrings' reStructuredText ("The ``fairness-tests``
    command.", ":class:`fairness_tests.core.exits.ExitCode`")."""
    p = run_cli(capfd, *path, "--help")
    assert p.returncode == 0, p.stderr
    for mark in MARKUP:
        assert mark not in p.stdout, f"{mark!r} in {' '.join(path)} --help:\n{p.stdout}"
    assert "`" not in p.stdout, p.stdout
    assert not re.search(r"^\s*\.\. \w+::", p.stdout, re.MULTILINE), p.stdout   # directives


@pytest.mark.parametrize("rst, plain", [
    ("The ``fairness-tests`` command.", "The fairness-tests command."),
    ("Exit codes (:class:`fairness_tests.core.exits.ExitCode`)", "Exit codes (ExitCode)"),
    (":func:`~a.b.verify` and :mod:`fairness_tests.pipeline.config`", "verify and config"),
    (":data:`the commit <a.COMMIT>`", "the commit"),
    ("combine stores with `fairness-tests store merge`", "combine stores with "
                                                         "fairness-tests store merge"),
    ("layout::\n\n.. note:: x\n    dest/data", "layout:\n\n    dest/data"),
])
def test_plain_text_rules(rst, plain):
    assert plain_text(rst) == plain


def test_init_says_how_to_get_the_bbq_data_before_pytest(tmp_path, capfd):
    """Defect: init ended with "next: python -m pytest -n auto", which stops (exit 4)
    for want of BBQ data."""
    p = run_cli(capfd, "init", "--dir", str(tmp_path / "repo"))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    fetch = out.index("fairness-tests data fetch --dest .fairness/bbq")
    assert "--from DIR" in out[fetch:].splitlines()[0]
    assert fetch < out.index("export FAIRNESS_BBQ_DIR=$PWD/.fairness/bbq") \
        < out.index("python -m pytest")


def test_missing_bbq_data_names_the_options_of_its_context(tmp_path, capfd):
    """Defect: the message suggested ``--dest ../shared/bbq`` (outside the repository)
    and, under pytest too, "(or --data)"."""
    p = run_cli(capfd, "bbq", "filter", "--bbq-dir", str(tmp_path / "none"))
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert "--dest .fairness/bbq" in lines[0] and "../shared" not in lines[0]
    assert "--bbq-dir or FAIRNESS_BBQ_DIR" in lines[0] and "--data" not in lines[0]
    assert "--from DIR" in lines[0]
    exc = BBQDataNotFound(tmp_path / "none", "no such directory", ("Race_x_SES",))
    text = usage_text(exc)
    assert "--fairness-bbq-dir" in text and " --bbq-dir" not in text and "--data" not in text
    assert "FAIRNESS_BBQ_DIR" in text and "--dest .fairness/bbq" in text


def test_missing_data_inside_the_working_directory_is_fetched_where_it_is_looked_for(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = str(BBQDataNotFound(Path("data/bbq"), "no such directory"))
    assert "--dest data/bbq`" in text and "then point" not in text   # found there after
    (tmp_path / "data" / "bbq").mkdir(parents=True)                  # a category missing
    outside = tmp_path.parent / f"{tmp_path.name}-bbq"
    outside.mkdir()
    text = str(BBQDataNotFound(outside, "no Age.jsonl", ("Age",)))
    assert f"--categories Age --dest {outside}`" in text and "then point" not in text


def snapshot(root: Path) -> dict[str, bytes]:
    return {q.relative_to(root).as_posix(): (q.read_bytes() if q.is_file() else b"/")
            for q in root.rglob("*")}


def test_an_offline_fetch_says_so_names_from_and_leaves_nothing(tmp_path, capfd):
    """Defect: "download failed: [Errno -2] Name or service not known", no word of
    ``--from``, and an empty ``dest/data/`` left behind."""
    home = tmp_path / "home"
    (home / "bbq").mkdir(parents=True)
    (home / "bbq" / "mine.txt").write_text("the user's\n")
    before = snapshot(tmp_path)
    port = closed_port()
    for dest in (home / "bbq", home / "new" / "bbq"):
        p = run_cli(capfd, "data", "fetch", "--dest", str(dest), "--timeout", "5",
                    "--base-url", f"http://127.0.0.1:{port}/bbq?token=SECRET")
        assert p.returncode == 2, p.stderr
        lines = p.stderr.splitlines()
        assert len(lines) == 1, p.stderr
        assert "download failed" in lines[0] and f"127.0.0.1:{port}" in lines[0]
        assert "Race_x_SES.jsonl" in lines[0] and "--from DIR" in lines[0]
        assert "SECRET" not in lines[0]
        assert snapshot(tmp_path) == before          # nothing created, nothing removed


@pytest.mark.skipif(not OFFICIAL_DIR.is_dir(), reason="no ../shared/bbq_official")
def test_a_fetch_moves_its_files_in_whole_and_prints_an_absolute_export_line(
        tmp_path, monkeypatch, capfd):
    """Defect: ``--dest /abs/path`` printed ``set FAIRNESS_BBQ_DIR=../fetchtest``."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("FAIRNESS_BBQ_DIR", raising=False)
    dest = tmp_path / "a b" / "bbq"               # two folders to make, a space to quote
    p = run_cli(capfd, "data", "fetch", "--categories", "Religion", "--from",
                str(OFFICIAL_DIR), "--dest", str(dest))
    assert p.returncode == 0, p.stderr
    assert (dest / "data" / "Religion.jsonl").read_bytes() == \
        (OFFICIAL_DIR / "data" / "Religion.jsonl").read_bytes()
    assert [q.name for q in (tmp_path / "a b").iterdir()] == ["bbq"]   # no staging left
    assert f"export FAIRNESS_BBQ_DIR={shlex.quote(str(dest))}" in p.stderr.splitlines()[-2]
    assert "../" not in p.stderr
    # into the existing folder: the file added beside what is there
    p = run_cli(capfd, "data", "fetch", "--categories", "Religion", "Age", "--from",
                str(OFFICIAL_DIR), "--dest", str(dest))
    assert p.returncode == 0, p.stderr
    assert sorted(q.name for q in (dest / "data").iterdir()) == ["Age.jsonl", "Religion.jsonl"]
    assert [q.name for q in (tmp_path / "a b").iterdir()] == ["bbq"]


def test_a_batch_connection_error_names_the_url_without_its_token(tmp_path, capfd,
                                                                   monkeypatch):
    """Defect: "submitting a batch to openai failed: Connection error." named no URL."""
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    bbq = Path(__file__).resolve().parents[1].parent / "shared" / "bbq"
    port = closed_port()
    p = run_cli(capfd, "audit", "--live", "--backend", "litellm", "--model",
                "openai/gpt-4o-mini", "--api-base", f"http://127.0.0.1:{port}/v1?token=SECRET",
                "--store", str(tmp_path / "s.sqlite"), "--benchmarks", "consistency",
                "--categories", "Race_x_SES", "--limit", "1", "--repeats", "5", "--batch",
                "--bbq-dir", str(bbq), "--out", str(tmp_path / "out"), "-q")
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert f"http://127.0.0.1:{port}/v1 failed" in lines[0] and "SECRET" not in lines[0]
