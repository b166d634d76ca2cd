"""``fairness-tests data fetch``: the official BBQ files, from a local copy (``--from``,
no network) or downloaded from a real HTTP server on 127.0.0.1 serving the BBQ
repository's layout; every file verified by git blob id (and sha256 where known).

Expected digests come from ``git hash-object`` semantics computed here by hand
(``sha1(b"blob <size>\\0" + bytes)``) and from ../shared/bbq_official/README.md."""
from __future__ import annotations

import functools
import hashlib
import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

from fairness_tests.benchmarks.bbq.data import load_bbq
from fairness_tests.benchmarks.bbq.fetch import fetch
from fairness_tests.benchmarks.bbq.official import (
    NOT_OFFICIAL,
    OFFICIAL,
    OFFICIAL_RELEASE,
    digests,
    release_status,
)
from fairness_tests.cli.main import main
from fairness_tests.core.errors import DataError

OFFICIAL_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "bbq_official"
SIX = ("Age", "Disability_status", "Nationality", "Physical_appearance", "Religion",
       "Sexual_orientation")
SMALL = ("Religion", "Sexual_orientation")      # the two smallest files: quick copies
pytestmark = pytest.mark.skipif(not (OFFICIAL_DIR / "data" / "Age.jsonl").exists(),
                                reason="../shared/bbq_official not present")


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_the_blob_ids_and_sha256_are_the_readmes_and_the_files():
    readme = (OFFICIAL_DIR / "README.md").read_text(encoding="utf-8")
    for ref in OFFICIAL.values():
        assert f"| {ref.path} | {ref.blob} |" in readme
    for cat in SIX:
        data = (OFFICIAL_DIR / "data" / f"{cat}.jsonl").read_bytes()
        ref = OFFICIAL[f"{cat}.jsonl"]
        assert git_blob(data) == ref.blob
        assert hashlib.sha256(data).hexdigest() == ref.sha256
        assert digests(OFFICIAL_DIR / "data" / f"{cat}.jsonl") == (ref.sha256, ref.blob)


def test_from_a_local_copy_installs_the_repository_layout(tmp_path):
    dest = tmp_path / "bbq"
    logs = []
    got = fetch(dest, categories=SIX, source=OFFICIAL_DIR, log=logs.append)
    assert set(got) == {f"{c}.jsonl" for c in SIX}         # no metadata file in the copy
    for c in SIX:
        assert (dest / "data" / f"{c}.jsonl").read_bytes() == \
            (OFFICIAL_DIR / "data" / f"{c}.jsonl").read_bytes()
        assert got[f"{c}.jsonl"].how == "copied"
    assert any("additional_metadata.csv: not in" in m and "derived" in m for m in logs)
    assert not list(dest.rglob("*.part"))
    data = load_bbq(dest, SIX)
    assert data.official and data.derived == list(SIX)
    # again: every file is present and verified, nothing copied
    again = fetch(dest, categories=SIX, source=OFFICIAL_DIR)
    assert {f.how for f in again.values()} == {"present"}


def test_a_changed_local_copy_is_installed_and_labelled_not_the_release(tmp_path):
    """Issue 32: a local copy is the user's own data (a regenerated stand-in, a fix): it
    is installed and each file labelled, never refused; only a download must verify. One
    changed byte makes Sexual_orientation.jsonl not the release, the other stays it."""
    src = tmp_path / "copy"
    (src / "data").mkdir(parents=True)
    for c in SMALL:
        shutil.copy(OFFICIAL_DIR / "data" / f"{c}.jsonl", src / "data" / f"{c}.jsonl")
    bad = src / "data" / "Sexual_orientation.jsonl"
    bad.write_bytes(bad.read_bytes().replace(b"gay", b"gai", 1))
    dest = tmp_path / "dest"
    got = fetch(dest, categories=SMALL, source=src)
    status = {n: release_status(n, f.sha256, f.blob).status for n, f in got.items()}
    assert status["Sexual_orientation.jsonl"] == NOT_OFFICIAL
    assert {status[f"{c}.jsonl"] for c in SMALL if c != "Sexual_orientation"} == {
        OFFICIAL_RELEASE}
    assert (dest / "data" / "Sexual_orientation.jsonl").read_bytes() == bad.read_bytes()
    assert not list(dest.rglob("*.part"))
    assert not load_bbq(dest, SMALL).official


def test_a_copy_missing_a_category_names_it(tmp_path):
    with pytest.raises(DataError, match=r"--from: no Race_x_SES\.jsonl"):
        fetch(tmp_path / "d", categories=("Race_x_SES",), source=OFFICIAL_DIR)


def test_flat_copies_are_read_too(tmp_path):
    src = tmp_path / "flat"
    src.mkdir()
    shutil.copy(OFFICIAL_DIR / "data" / "Religion.jsonl", src / "Religion.jsonl")
    got = fetch(tmp_path / "d", categories=("Religion",), source=src)
    assert got["Religion.jsonl"].path == "data/Religion.jsonl"


# ---------------------------------------------------------------- download
class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def mirror(tmp_path):
    """A real HTTP server on 127.0.0.1 serving <root>/data/<Category>.jsonl."""
    root = tmp_path / "mirror"
    (root / "data").mkdir(parents=True)
    for c in SMALL:
        shutil.copy(OFFICIAL_DIR / "data" / f"{c}.jsonl", root / "data" / f"{c}.jsonl")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()
    server.server_close()


def test_download_verifies_every_file(mirror, tmp_path):
    url, root = mirror
    dest = tmp_path / "dest"
    logs = []
    got = fetch(dest, categories=SMALL, base_url=url, log=logs.append)
    for c in SMALL:
        f = got[f"{c}.jsonl"]
        assert f.how == "downloaded"
        assert (dest / f.path).read_bytes() == (root / "data" / f"{c}.jsonl").read_bytes()
        assert f.blob == git_blob((root / "data" / f"{c}.jsonl").read_bytes())
    # the mirror has no metadata file: HTTP 404 -> not installed, said so
    assert "additional_metadata.csv" not in got
    assert any("HTTP 404" in m and "derived" in m for m in logs)
    # a second run finds the files in place and verified: no server needed
    again = fetch(dest, categories=SMALL, base_url="http://127.0.0.1:9")
    assert {f.how for f in again.values()} == {"present"}


def test_download_of_a_wrong_file_saves_nothing(mirror, tmp_path):
    url, root = mirror
    f = root / "data" / "Religion.jsonl"
    f.write_bytes(f.read_bytes()[:-10])
    dest = tmp_path / "dest"
    with pytest.raises(DataError) as e:
        fetch(dest, categories=("Religion",), base_url=url)
    assert f"{url}/data/Religion.jsonl" in str(e.value) and "file not saved" in str(e.value)
    assert not (dest / "data" / "Religion.jsonl").exists() and not list(dest.rglob("*.part"))


def test_download_http_error_names_the_url(mirror, tmp_path):
    url, _ = mirror
    with pytest.raises(DataError) as e:
        fetch(tmp_path / "d", categories=("Age",), base_url=url)
    assert f"{url}/data/Age.jsonl" in str(e.value) and "HTTP 404" in str(e.value)


# ---------------------------------------------------------------- the command
def test_cli_from_then_score_reads_it(tmp_path, capsys, monkeypatch):
    dest = tmp_path / "bbq"
    rc = main(["data", "fetch", "--categories", *SMALL, "--from", str(OFFICIAL_DIR),
               "--dest", str(dest)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    assert set(doc["files"]) == {f"{c}.jsonl" for c in SMALL}
    assert doc["files"]["Religion.jsonl"]["git_blob"] == OFFICIAL["Religion.jsonl"].blob
    assert "FAIRNESS_BBQ_DIR" in err                   # dest is not where BBQ is looked for
    monkeypatch.setenv("FAIRNESS_BBQ_DIR", str(dest))
    rc = main(["bbq", "filter", "--categories", *SMALL, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["totals"]["Religion"]["loaded"] == 1200
    assert doc["data"]["official"] is True


def test_cli_a_local_copy_that_is_not_the_release_is_labelled(tmp_path, capsys):
    src = tmp_path / "copy" / "data"
    src.mkdir(parents=True)
    (src / "Religion.jsonl").write_text("{}\n")
    rc = main(["data", "fetch", "--categories", "Religion", "--from", str(src.parent),
               "--dest", str(tmp_path / "d")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert json.loads(out)["files"]["Religion.jsonl"]["release"] == NOT_OFFICIAL
    said = [x for x in err.splitlines() if x.startswith("BBQ data: Religion.jsonl: ")]
    assert len(said) == 1 and NOT_OFFICIAL in said[0], err


def test_data_not_found_messages_are_one_line_naming_fetch_and_the_variable(tmp_path, capsys):
    for argv in (["bbq", "filter", "--data", str(tmp_path / "nowhere")],
                 ["bbq", "filter", "--data", str(tmp_path), "--categories", "Age"]):
        rc = main(argv)
        err = capsys.readouterr().err.strip()
        assert rc == 2
        assert len(err.splitlines()) == 1, err
        assert "BBQ data not found" in err and "fairness-tests data fetch" in err
        assert "FAIRNESS_BBQ_DIR" in err
