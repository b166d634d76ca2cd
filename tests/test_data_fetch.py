"""``fairness-tests data fetch --benchmark NAME``: every registered benchmark that declares
its data source, downloaded from a real HTTP server on 127.0.0.1 (a mirror of the authors'
repository at the recorded commit: each file under its path in the repository) or copied
from a local copy (``--from``), each file verified by sha256.

The benchmarks are read from the registry, never typed. Expected digests come from
hashlib over the bytes served and from ../shared/benchmarks/README.md (the authors' files'
sha256, listed by whoever put them there), not from the code under test."""
from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairness_tests.benchmarks.bbq.official import BENCHMARK as BBQ_BENCHMARK
from fairness_tests.cli.main import main
from fairness_tests.core.errors import DataError
from fairness_tests.core.paths import shared_dir
from fairness_tests.core.registry import BENCHMARK_NAMES, data_sources, load
from fairness_tests.core.sources import DataSource
from fairness_tests.pipeline.config_data import FETCHABLE
from fairness_tests.pipeline.data_fetch import NOT_OFFICIAL, OFFICIAL, fetch_source

SOURCES: dict[str, DataSource] = {n: load(t) for n, t in data_sources().items()}
SHARED = shared_dir() / "benchmarks"
README = SHARED / "README.md"
HEX64 = re.compile(r"[0-9a-f]{64}")


def shared(name: str) -> Path:
    """The benchmark's copy in ../shared/benchmarks (the authors' files, byte for byte)."""
    return SHARED / SOURCES[name].dest


#: the benchmarks whose shared copy is here (the download and --from tests need it)
PRESENT = [n for n in SOURCES if shared(n).is_dir()]
needs_copy = pytest.mark.skipif(not PRESENT, reason="no ../shared/benchmarks copies")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def readme_digests() -> dict[str, str]:
    """``{"<dest>/<file>": sha256}`` from the README's ``sha256  path`` lines."""
    text = README.read_text(encoding="utf-8")
    return {m.group(2): m.group(1)
            for m in re.finditer(r"^([0-9a-f]{64})  (\S+)$", text, re.MULTILINE)}


# ------------------------------------------------------------------ the declarations
def test_the_registry_has_sources():
    assert len(SOURCES) >= 2
    assert all(isinstance(s, DataSource) for s in SOURCES.values())


@pytest.mark.parametrize("name", list(SOURCES))
def test_every_source_records_sha256_and_the_shared_copy_matches(name):
    """64 hex digits for every file, a 40-hex commit; the local names are distinct; where
    ../shared/benchmarks/<dest> exists, each file's bytes hash to the recorded sha256 and
    the README lists the same digest."""
    src = SOURCES[name]
    assert re.fullmatch(r"[0-9a-f]{40}", src.commit), src.commit
    assert src.files and all(HEX64.fullmatch(h) for h in src.files.values()), src.files
    names = [src.local_name(p) for p in src.files]
    assert len(set(names)) == len(names)
    if not shared(name).is_dir():
        pytest.skip(f"no {shared(name)}")
    listed = readme_digests()
    for path, digest in src.files.items():
        f = shared(name) / src.local_name(path)
        assert f.is_file(), f"{path} ({f.name}) is not in the shared copy {shared(name)}"
        assert sha(f.read_bytes()) == digest, f
        assert listed.get(f"{src.dest}/{f.name}") == digest, f"{f.name}: not in {README}"


# ------------------------------------------------------------------ a real mirror
class _Handler(http.server.SimpleHTTPRequestHandler):
    asked: list[str]

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.asked.append(self.path)
        super().do_GET()


def mirror_tree(name: str, root: Path) -> Path:
    """The benchmark's shared files laid out as the authors' repository holds them."""
    src = SOURCES[name]
    for path in src.files:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared(name) / src.local_name(path), root / path)
    return root


@pytest.fixture
def serve() -> Iterator:
    """``serve(root)`` -> (URL, paths asked): a real HTTP server on 127.0.0.1 serving
    ``root``; every server stopped at the end."""
    servers = []

    def start(root: Path) -> tuple[str, list[str]]:
        asked: list[str] = []
        handler = functools.partial(type("H", (_Handler,), {"asked": asked}),
                                    directory=str(root))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", asked

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def run(capsys, *argv: str) -> tuple[int, dict | None, str]:
    rc = main(["data", "fetch", *argv])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else None), err


def leftovers(where: Path) -> list[Path]:
    return [p for p in where.rglob("*") if ".fairness-tests-fetch-" in p.name
            or p.name.endswith(".part")]


@needs_copy
@pytest.mark.parametrize("name", PRESENT)
def test_download_through_a_mirror_verifies_every_file(name, serve, tmp_path, capsys):
    src = SOURCES[name]
    url, asked = serve(mirror_tree(name, tmp_path / "mirror"))
    dest = tmp_path / "data"
    rc, doc, err = run(capsys, "--benchmark", name, "--base-url", url, "--dest", str(dest),
                       "--timeout", "10")
    assert rc == 0, err
    assert sorted(asked) == sorted(f"/{p}" for p in src.files)     # the repository layout
    assert doc["benchmark"] == name and doc["commit"] == src.commit
    assert len(doc["files"]) == len(src.files)
    for path, digest in src.files.items():
        local = src.local_name(path)
        f = doc["files"][local]
        assert (f["how"], f["release"], f["sha256"], f["repo_path"]) == \
            ("downloaded", OFFICIAL, digest, path)
        assert (dest / local).read_bytes() == (shared(name) / local).read_bytes()
        assert f"{name} data: {local}: official (sha256 {digest})" in err
    assert f"export FAIRNESS_{name.upper()}_DIR=" in err
    assert not leftovers(tmp_path)
    # again, with no server: every file is present and verified, none asked for
    rc, doc, err = run(capsys, "--benchmark", name, "--base-url", "http://127.0.0.1:9",
                       "--dest", str(dest), "--timeout", "5")
    assert rc == 0, err
    assert {f["how"] for f in doc["files"].values()} == {"present"}


@needs_copy
def test_a_mirror_serving_one_corrupted_file_installs_nothing(serve, tmp_path, capsys):
    name = PRESENT[0]
    src = SOURCES[name]
    root = mirror_tree(name, tmp_path / "mirror")
    path = list(src.files)[-1]                      # the last: every other one downloaded
    bad = root / path
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0x01                    # one bit of one byte
    bad.write_bytes(bytes(data))
    url, _ = serve(root)
    dest = tmp_path / "data"
    rc, _, err = run(capsys, "--benchmark", name, "--base-url", url, "--dest", str(dest),
                     "--timeout", "10")
    line = err.strip()
    assert rc == 2 and len(line.splitlines()) == 1 + len(src.files) - 1, err
    last = line.splitlines()[-1]
    assert src.local_name(path) in last and "refused" in last
    assert f"expected {src.files[path]}" in last and f"sha256 {sha(bytes(data))}" in last
    assert not dest.exists() and not leftovers(tmp_path)


@needs_copy
def test_a_download_failure_names_the_url_and_installs_nothing(serve, tmp_path, capsys):
    name = PRESENT[0]
    src = SOURCES[name]
    root = mirror_tree(name, tmp_path / "mirror")
    gone = list(src.files)[0]
    (root / gone).unlink()
    url, _ = serve(root)
    rc, _, err = run(capsys, "--benchmark", name, "--base-url", url, "--dest",
                     str(tmp_path / "d"), "--timeout", "10")
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{url}/{gone}" in err and "HTTP 404" in err and "--from DIR" in err
    assert not (tmp_path / "d").exists() and not leftovers(tmp_path)


# ------------------------------------------------------------------ --from
@needs_copy
@pytest.mark.parametrize("name", PRESENT)
def test_from_the_shared_copy_installs_it_labelled_official(name, tmp_path, capsys):
    src = SOURCES[name]
    dest = tmp_path / "d"
    rc, doc, err = run(capsys, "--benchmark", name, "--from", str(shared(name)), "--dest",
                       str(dest))
    assert rc == 0, err
    assert {(f["how"], f["release"]) for f in doc["files"].values()} == {("copied", OFFICIAL)}
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        src.local_name(p) for p in src.files)


@needs_copy
def test_from_a_copy_in_the_repository_layout(tmp_path):
    """Files are found by their path in the repository too (a checkout)."""
    name = PRESENT[0]
    src = SOURCES[name]
    got = fetch_source(src, tmp_path / "d", from_dir=mirror_tree(name, tmp_path / "checkout"))
    assert [f.repo_path for f in got.values()] == list(src.files)
    assert {f.release for f in got.values()} == {OFFICIAL}


@needs_copy
def test_from_a_copy_with_one_byte_changed_labels_that_file(tmp_path, capsys):
    """The user's copy installs as it is; the changed file is not the release, with both
    digests on its line; the others stay official."""
    name = PRESENT[0]
    src = SOURCES[name]
    copy = tmp_path / "copy"
    shutil.copytree(shared(name), copy)
    changed = src.local_name(list(src.files)[0])
    f = copy / changed
    f.chmod(0o644)
    data = bytearray(f.read_bytes())
    data[0] = ord("#") if data[0] != ord("#") else ord("%")
    f.write_bytes(bytes(data))
    dest = tmp_path / "d"
    rc, doc, err = run(capsys, "--benchmark", name, "--from", str(copy), "--dest", str(dest))
    assert rc == 0, err
    release = {n: v["release"] for n, v in doc["files"].items()}
    assert release.pop(changed) == NOT_OFFICIAL
    assert set(release.values()) == {OFFICIAL}
    assert (dest / changed).read_bytes() == bytes(data)
    said = [x for x in err.splitlines() if x.startswith(f"{name} data: {changed}: ")]
    official = src.files[list(src.files)[0]]
    assert len(said) == 1 and NOT_OFFICIAL in said[0] and sha(bytes(data)) in said[0] \
        and official in said[0], err


@needs_copy
def test_from_a_copy_missing_files_names_them(tmp_path, capsys):
    name = PRESENT[0]
    src = SOURCES[name]
    copy = tmp_path / "copy"
    shutil.copytree(shared(name), copy)
    gone = [src.local_name(p) for p in list(src.files)[:2]]
    for g in gone:
        (copy / g).unlink()
    rc, _, err = run(capsys, "--benchmark", name, "--from", str(copy), "--dest",
                     str(tmp_path / "d"))
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert all(g in err for g in gone) and "--from" in err
    assert not (tmp_path / "d").exists()
    with pytest.raises(DataError, match="no such directory"):
        fetch_source(src, tmp_path / "d", from_dir=tmp_path / "nowhere")


# ------------------------------------------------------------------ dest
@needs_copy
def test_dest_keeps_its_other_files_and_its_verified_ones(tmp_path, capsys):
    """A dest holding other files: they stay as they are (bytes, same inode); a file of
    the release already there and verified is kept (same inode); one there with other
    bytes is replaced, and the log says so."""
    name = PRESENT[0]
    src = SOURCES[name]
    dest = tmp_path / "d"
    (dest / "notes").mkdir(parents=True)
    (dest / "notes.txt").write_text("mine\n")
    (dest / "notes" / "n.md").write_text("also mine\n")
    paths = list(src.files)
    kept, stale = src.local_name(paths[0]), src.local_name(paths[1])
    shutil.copyfile(shared(name) / kept, dest / kept)
    (dest / stale).write_text("old\n")
    inode = {p: (dest / p).stat().st_ino for p in ("notes.txt", kept)}
    rc, doc, err = run(capsys, "--benchmark", name, "--from", str(shared(name)), "--dest",
                       str(dest))
    assert rc == 0, err
    assert doc["files"][kept]["how"] == "present" and doc["files"][stale]["how"] == "copied"
    assert {p: (dest / p).stat().st_ino for p in inode} == inode
    assert (dest / "notes.txt").read_text() == "mine\n"
    assert (dest / "notes" / "n.md").read_text() == "also mine\n"
    assert (dest / stale).read_bytes() == (shared(name) / stale).read_bytes()
    old = sha("old\n".encode())
    assert f"{stale}: in {dest} but not the official release (sha256 {old})" in err
    assert not leftovers(tmp_path)


@needs_copy
def test_dest_that_is_or_holds_the_copy_is_refused_before_any_work(tmp_path, capsys):
    name = PRESENT[0]
    copy = tmp_path / "wrap" / "copy"
    shutil.copytree(shared(name), copy)
    before = {p: p.read_bytes() for p in copy.iterdir()}
    for dest in (copy, copy.parent):
        rc, _, err = run(capsys, "--benchmark", name, "--from", str(copy), "--dest", str(dest))
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert "--dest" in err and "--from" in err and "an input of this command" in err
    assert {p: p.read_bytes() for p in copy.iterdir()} == before
    assert sorted(os.listdir(tmp_path / "wrap")) == ["copy"]


def test_a_benchmark_without_a_source_is_not_a_choice(capsys):
    none = [n for n in BENCHMARK_NAMES if n not in FETCHABLE]
    assert none
    rc, _, err = run(capsys, "--benchmark", none[-1])
    assert rc == 2 and "--benchmark" in err and "must be one of" in err
    assert all(n in err for n in SOURCES)


@pytest.mark.skipif(not (shared_dir() / "bbq_official" / "data" / "Religion.jsonl").is_file(),
                    reason="no ../shared/bbq_official")
def test_bbq_keeps_its_own_fetch_with_or_without_benchmark(tmp_path, capsys):
    """BBQ's fetch (files by category, git blob ids) runs with no --benchmark and with
    BBQ's name: the same files, the same summary."""
    copy = shared_dir() / "bbq_official"
    blob = hashlib.sha1(b"blob %d\0" % len((copy / "data" / "Religion.jsonl").read_bytes())
                        + (copy / "data" / "Religion.jsonl").read_bytes()).hexdigest()
    docs = []
    for i, named in enumerate(((), ("--benchmark", BBQ_BENCHMARK))):
        rc, doc, err = run(capsys, *named, "--categories", "Religion", "--from", str(copy),
                           "--dest", str(tmp_path / f"bbq{i}"))
        assert rc == 0, err
        assert doc["files"]["Religion.jsonl"]["git_blob"] == blob
        docs.append(doc["files"])
    assert docs[0] == docs[1]


@needs_copy
def test_the_default_dest_is_where_the_benchmark_looks(tmp_path, capsys, monkeypatch):
    """No --dest: $FAIRNESS_<NAME>_DIR (the loaders' place), so no export line is needed."""
    name = PRESENT[0]
    src = SOURCES[name]
    there = tmp_path / "env-dir"
    monkeypatch.setenv(f"FAIRNESS_{src.dest.upper()}_DIR", str(there))
    rc, doc, err = run(capsys, "--benchmark", name, "--from", str(shared(name)))
    assert rc == 0, err
    assert sorted(p.name for p in there.iterdir()) == sorted(doc["files"])
    assert "export " not in err
