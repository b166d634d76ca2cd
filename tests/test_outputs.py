"""No data loss through ``--out``: a new directory is created; one this tool wrote (it
holds :data:`~fairness_tests.core.io.OUTPUT_MARKER`) is replaced whole, atomically; a
folder holding anything else, or an existing file, is refused with exit 2 and one line,
before any work; ``--force`` replaces only the tool's own entries.

Helpers of :mod:`fairness_tests.core.io` directly, then every command that writes
``--out``, run as ``python -m fairness_tests`` runs it (``sys.exit(main())``), in this
process: its exit code and what it printed on the file descriptors."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import run_cli

from fairness_tests.benchmarks.bbq.data import bbq_dir, load_bbq
from fairness_tests.cli.main import build_parser
from fairness_tests.core.errors import ConfigError
from fairness_tests.core.io import OUTPUT_MARKER, check_output, foreign_entries, output_dir
from fairness_tests.core.options import specs

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
    refused(ft("audit", "--benchmarks", "bbq", "--limit", "1", "--out", str(mine),
               "--store", str(tmp_path / "s.sqlite")), mine)
    assert not (tmp_path / "s.sqlite").exists()
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text("", encoding="utf-8")
    refused(ft("generative", "score", "--outputs", str(outputs), "--out", str(mine)), mine)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


# ----------------------------------------------------------------------------- outputs apart
# (issue 32) No output may be, hold or sit inside an input of the same command; every
# output-path failure is exit 2 and one line, before any work.

def tree_digest(root: Path) -> str:
    """sha256 over every entry under ``root``: its relative path, its kind and its bytes
    (a link: its target), so any change to the tree changes the digest."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        kind = "l" if p.is_symlink() else "d" if p.is_dir() else "f"
        h.update(f"{p.relative_to(root).as_posix()}\0{kind}\0".encode())
        h.update(os.readlink(p).encode() if kind == "l" else p.read_bytes() if kind == "f"
                 else b"")
    return h.hexdigest()


def mark(folder: Path) -> Path:
    """Make ``folder`` look like this tool's output (its marker lists every entry): the
    case today's marker rule lets an output replace whole."""
    entries = sorted(p.name for p in folder.iterdir() if p.name != OUTPUT_MARKER)
    (folder / OUTPUT_MARKER).write_text(json.dumps({"tool": "fairness-tests",
                                                    "entries": entries}), encoding="utf-8")
    return folder


#: every command that takes both an input path and an output path: its arguments ({in}:
#: the input, {out}: the output, {other}: another existing folder, {tmp}: scratch), the
#: input's kind, and how the output and the input options are spelt in the message
OVERLAP = {
    "audit": ("audit --recordings --store {tmp}/s.sqlite --bbq-dir {in} --out {out}", "dir",
              "--out", "--bbq-dir"),
    "bbq score": ("bbq score --n-boot 100 --predictions {in} --out {out}", "file", "--out",
                  "--predictions"),
    "generative score": ("generative score --n-boot 100 --outputs {in} --out {out}", "file",
                         "--out", "--outputs"),
    "kobbq score": ("kobbq score --n-boot 100 {in} --out {out}", "file", "--out", "FILE"),
    "gate": ("gate {in} {other} --out {out}", "dir", "--out", "BASELINE_RUN"),
    "card": ("card --run {in} --out {out}", "dir", "--out", "--run"),
    "card render": ("card render {in} --out {out}", "file", "--out", "CARD"),
    "compare": ("compare {other} {in} --out {out}", "dir", "--out", "RUN_DIR"),
    "view": ("view {other} {in} --out {out}", "dir", "--out", "RUN_DIR"),
    "data fetch": ("data fetch --from {in} --categories Age --dest {out}", "dir", "--dest",
                   "--from"),
    "store export": ("store export {out} --store {in}", "file", "PATH", "--store"),
    "store import": ("store import {in} --store {out}", "file", "--store", "PATH"),
    "store merge": ("store merge {in} --into {out}", "file", "--into", "STORE"),
}
#: where the output is put: the input itself, inside it, or the (tool's) folder holding it
RELATIONS = {"is": "{in}", "is inside": "{in}/sub", "holds": "{holder}"}


def commands_with_inputs_and_outputs() -> set[str]:
    """Every subcommand (by enumeration of the parser) whose options name an output path
    and at least one other path."""
    found: set[str] = set()

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*words, name])
        cls = parser.get_default("config_class")
        if cls is None:
            return
        roles = [s.option.path_role() for s in specs(cls).values() if s.option.cli]
        roles = [r for r in roles if r]
        if len(roles) >= 2 and {"output_dir", "output_file", "inout"} & set(roles):
            found.add(" ".join(words))
    walk(build_parser(), [])
    return found


def test_every_command_with_an_input_and_an_output_is_tried():
    assert commands_with_inputs_and_outputs() == set(OVERLAP)


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("command", OVERLAP)
def test_no_output_is_holds_or_sits_inside_an_input(command, relation, tmp_path, ft):
    """Defect (issue 32): `gate gate_base runs/stereo --out gate_base` replaced the
    baseline run given as input with the gate's report (the folder was the tool's, so
    the marker rule allowed it). Now, for every command, an output that is, sits inside
    or holds an input is refused: exit 2, one line naming both options, the input's
    bytes unchanged."""
    argv, kind, out_option, in_option = OVERLAP[command]
    holder = tmp_path / "holder"                  # a folder of the tool's, holding the input
    holder.mkdir()
    inp = holder / ("input" if kind == "dir" else "input.jsonl")
    if kind == "dir":
        inp.mkdir()
        (inp / "run.json").write_text("{}\n", encoding="utf-8")
        mark(inp)
    else:
        inp.write_text('{"a": 1}\n', encoding="utf-8")
    mark(holder)
    other = tmp_path / "other"
    other.mkdir()
    out = RELATIONS[relation].format(**{"in": inp, "holder": holder})
    before = tree_digest(tmp_path)
    words = argv.format(**{"in": inp, "out": out, "other": other, "tmp": tmp_path}).split()
    p = ft(*words)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"{out_option} {out}: {relation} {in_option} {inp}, an input of this command" \
        in lines[0], lines[0]
    assert tree_digest(tmp_path) == before


@needs_bbq
def test_gate_out_the_baseline_run_keeps_it(preds, tmp_path, ft):
    """Defect 1 of issue 32 as the user met it, with real runs: the baseline run kept its
    run.json, records/, tables/ and verdicts.csv (it held gate.* only afterwards)."""
    base, cand = tmp_path / "gate_base", tmp_path / "stereo"
    for run, model in ((base, "a"), (cand, "b")):
        p = ft("bbq", "score", "--predictions", str(preds), "--out", str(run), "--n-boot",
               "100", "--model", model)
        assert p.returncode == 0, p.stderr
    before = tree_digest(base)
    p = ft("gate", str(base), str(cand), "--out", str(base))
    refused(p, base)
    assert "BASELINE_RUN" in p.stderr and "--out" in p.stderr
    assert tree_digest(base) == before
    assert {"run.json", "tables", "verdicts.csv"} <= {q.name for q in base.iterdir()}


@pytest.fixture
def rodir(tmp_path):
    """A folder no one may write in, root included (``chattr +i``: root ignores mode
    bits); skipped where the file system or the user cannot set the flag."""
    d = tmp_path / "rodir"
    d.mkdir()
    if shutil.which("chattr") is None:
        pytest.skip("chattr not installed: no way to make a folder root cannot write")
    made = subprocess.run(["chattr", "+i", str(d)], capture_output=True, text=True,
                          timeout=30)
    if made.returncode != 0:
        pytest.skip(f"chattr +i refused here: {made.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["chattr", "-i", str(d)], check=True, timeout=30)


#: commands writing into ``rodir``: their arguments ({ro}: the folder, {tmp}: scratch) and
#: the option named
READ_ONLY = {
    "bbq score": ("bbq score --n-boot 100 --predictions {preds} --out {ro}/run", "--out"),
    "audit": ("audit --recordings --store {tmp}/s.sqlite --out {ro}/rep", "--out"),
    "audit existing": ("audit --recordings --store {tmp}/s.sqlite --out {ro}", "--out"),
    "data fetch": ("data fetch --categories Age --dest {ro}/bbq", "--dest"),
    "model prepare": ("model prepare --cache {ro}/cache", "--cache"),
    "store export": ("store export {ro}/x.jsonl --store {tmp}/s.sqlite", "PATH"),
    "init": ("init --dir {ro}/repo", "--dir"),
}


@needs_bbq
@pytest.mark.parametrize("command", READ_ONLY)
def test_an_output_in_a_folder_no_one_can_write_is_refused_first(command, rodir, preds,
                                                                  tmp_path, ft):
    """Defect 2 of issue 32: `bbq score ... --out rodir/run` and `audit --out rodir/rep`
    crashed with exit 70 (PermissionError on rodir/.run.tmp-...) after the work. Now:
    exit 2, one line naming the option and the folder, before any work (no store
    made)."""
    argv, option = READ_ONLY[command]
    p = ft(*argv.format(ro=rodir, tmp=tmp_path, preds=preds).split())
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{option} {rodir}" in lines[0], p.stderr
    assert f"cannot write in {rodir}" in lines[0], lines[0]
    assert list(rodir.iterdir()) == [] and not (tmp_path / "s.sqlite").exists()


@needs_bbq
def test_out_a_symbolic_link_says_what_it_is(preds, tmp_path, ft):
    """Defect 4 of issue 32: --out naming a link to a user's folder was refused as "not a
    directory". It is a symbolic link to a folder: refused, the link and the folder
    untouched."""
    mine = user_folder(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(mine, target_is_directory=True)
    before = tree_digest(tmp_path)
    p = ft("bbq", "score", "--predictions", str(preds), "--out", str(link), "--n-boot", "100")
    refused(p, link)
    assert "symbolic link to a folder" in p.stderr and "untouched" in p.stderr, p.stderr
    assert "not a directory" not in p.stderr
    assert tree_digest(tmp_path) == before
    (tmp_path / "link2").symlink_to(mine / "notes.txt")
    with pytest.raises(ConfigError, match="symbolic link to a file"):
        check_output(tmp_path / "link2")
