"""core/io: the one JSONL reader/writer and the one sha256 (issue 21: one of each)."""
from __future__ import annotations

import gzip
import json

import pytest

from fairness_tests.core.errors import DataError
from fairness_tests.core.io import (
    canonical_dumps,
    json_lines,
    read_jsonl,
    sha256_file,
    sha256_text,
    write_jsonl,
)

# FIPS 180-2, appendix B.1: SHA-256("abc")
ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_sha256_of_a_file_and_of_a_text_are_the_published_digest(tmp_path):
    f = tmp_path / "abc.txt"
    f.write_bytes(b"abc")
    assert sha256_file(f) == ABC
    assert sha256_file(f, chunk=1) == ABC           # chunked reads give the same digest
    assert sha256_text("abc") == ABC


@pytest.mark.parametrize("name", ["r.jsonl", "r.jsonl.gz"])
def test_written_lines_read_back_with_their_line_numbers(tmp_path, name):
    recs = [{"b": 1, "a": "é"}, {"x": [1, 2]}]
    path = tmp_path / name
    assert write_jsonl(path, recs) == 2
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if name.endswith(".gz") else raw).decode("utf-8")
    assert text == '{"a":"é","b":1}\n{"x":[1,2]}\n'      # keys sorted, no spaces, UTF-8
    got, lines = json_lines(path)
    assert got == recs and list(lines) == [1, 2]
    assert list(read_jsonl(path)) == [(1, recs[0]), (2, recs[1])]


def test_gzip_output_is_byte_identical_for_the_same_records(tmp_path):
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    write_jsonl(a, [{"k": i} for i in range(3)])
    write_jsonl(b, [{"k": i} for i in range(3)])
    assert a.read_bytes() == b.read_bytes()             # zero mtime in the gzip header
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("reader", [json_lines, lambda p: list(read_jsonl(p))])
def test_both_readers_name_the_bad_line_alike(tmp_path, reader):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"a": 1}\n\n{oops\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl, line 3: invalid JSON"):
        reader(p)
    p.write_text('{"a": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"line 2: expected one JSON object a line"):
        reader(p)


def test_a_truncated_gzip_file_is_a_data_error(tmp_path):
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"a": 1}\n' * 1000)[:40])
    with pytest.raises(DataError, match="cut.jsonl.gz.*cannot read"):
        list(read_jsonl(p))
    with pytest.raises(DataError, match="cannot read"):
        json_lines(p)


def test_canonical_dumps_is_the_store_serialisation():
    assert canonical_dumps({"b": 1, "a": None}) == json.dumps(
        {"a": None, "b": 1}, separators=(",", ":"))
