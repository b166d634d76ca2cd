"""`fairness-tests store stats|export|import|prune` through the real dispatcher."""
from __future__ import annotations

import json

import pytest

from fairness_tests.cli.main import main
from fairness_tests.cli.models import parse_duration
from fairness_tests.models.requests.request import Request, Response, chat
from fairness_tests.models.store.store import ResponseStore


def _fill(path):
    with ResponseStore(path) as s:
        for i in range(3):
            s.put(Request(messages=chat(None, f"q{i}"), backend="litellm", model="m1"),
                  Response(key="", text="x", prompt_tokens=4, completion_tokens=1))
        s.put(Request(messages=chat(None, "bad"), backend="litellm", model="m1"),
              Response(key="", status="error", error="500"))
        s.put(Request(messages=chat(None, "r"), backend="transformers", model="gemma"),
              Response(key="", status="refused"))


def test_stats_export_import_prune(tmp_path, capsys):
    db = tmp_path / "a.sqlite"
    _fill(db)
    assert main(["store", "stats", "--store", str(db), "--format", "json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["total"] == 5 and st["by_status"] == {"ok": 3, "error": 1, "refused": 1,
                                                     "truncated": 0}
    assert main(["store", "stats", "--store", str(db)]) == 0
    table = capsys.readouterr().out
    assert "litellm:m1" in table and "transformers:gemma" in table
    # 3 ok rows x (4 + 1) tokens = 15
    assert any(line.split()[-2] == "15" for line in table.splitlines() if "ok" in line)

    out = tmp_path / "fx" / "rec.jsonl.gz"
    assert main(["store", "export", str(out), "--store", str(db), "--no-timestamps"]) == 0
    assert "exported 5" in capsys.readouterr().out
    db2 = tmp_path / "b.sqlite"
    assert main(["store", "import", str(out), "--store", str(db2)]) == 0
    assert "added 5, replaced 0, kept existing 0" in capsys.readouterr().out
    again = tmp_path / "again.jsonl.gz"
    main(["store", "export", str(again), "--store", str(db2), "--no-timestamps"])
    assert again.read_bytes() == out.read_bytes()     # round trip is byte-identical

    assert main(["store", "prune", "--store", str(db), "--status", "error"]) == 0
    assert "deleted 1" in capsys.readouterr().out
    assert main(["store", "prune", "--store", str(db), "--model", "gemma"]) == 0
    assert main(["store", "prune", "--store", str(db), "--older-than", "1d"]) == 0
    assert "deleted 0" in capsys.readouterr().out.splitlines()[-1]
    with ResponseStore(db) as s:
        assert len(s) == 3


def test_bad_input_exits_2_naming_the_problem(tmp_path, capsys):
    db = tmp_path / "a.sqlite"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "x"}\n')
    assert main(["store", "import", str(bad), "--store", str(db)]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl, line 1" in err and "missing field 'request'" in err
    assert main(["store", "prune", "--store", str(db)]) == 2
    assert "at least one condition" in capsys.readouterr().err
    assert main(["store", "prune", "--store", str(db), "--older-than", "soon"]) == 2
    assert "bad duration" in capsys.readouterr().err


@pytest.mark.parametrize("text,seconds", [("90", 90), ("90s", 90), ("30m", 1800),
                                          ("12h", 43200), ("7d", 604800), ("2w", 1209600)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


def test_stats_cost_unknown_is_never_zero(tmp_path, capsys):
    """m1: 3 replies without a price -> "?"; m2: 2 priced at 0.001 + 1 without ->
    "0.0020+?"; m3: 2 priced at 0.001 -> "0.0020"; a failed request -> "-"."""
    db = tmp_path / "c.sqlite"
    _fill(db)
    with ResponseStore(db) as s:
        for model, costs in (("m2", (0.001, 0.001, None)), ("m3", (0.001, 0.001))):
            for i, c in enumerate(costs):
                s.put(Request(messages=chat(None, f"{model} {i}"), backend="litellm",
                              model=model), Response(key="", text="x", cost_usd=c))
    assert main(["store", "stats", "--store", str(db)]) == 0
    rows = {tuple(line.split()[:2]): line.split()[-1]
            for line in capsys.readouterr().out.splitlines() if line.startswith("  litellm")}
    assert rows == {("litellm:m1", "error"): "-", ("litellm:m1", "ok"): "?",
                    ("litellm:m2", "ok"): "0.0020+?", ("litellm:m3", "ok"): "0.0020"}
