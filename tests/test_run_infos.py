"""A run's metadata is open (issue 33): an info type registered under a new key is
written to run.json and read back typed, with no line of run/ changed; a top-level key
that is neither a field nor a registered info is still refused, naming file and key."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fairness_tests.benchmarks.bbq.info import BBQInfo
from fairness_tests.core.errors import DataError
from fairness_tests.run import metadata
from fairness_tests.run.metadata import RunMetadata, register_info
from fairness_tests.run.result import RunResult, expected_parts, missing_parts

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import make_run  # noqa: E402  the card's test data module


@dataclass
class TinyInfo:
    n_items: int
    labels: list[str] = field(default_factory=list)


@pytest.fixture
def tiny():
    register_info("tiny", TinyInfo)
    yield
    metadata._INFOS.pop("tiny")


def test_a_registered_info_round_trips_through_run_json(tmp_path, tiny):
    run = make_run()
    run.metadata.set_info("tiny", TinyInfo(n_items=3, labels=["a", "b"]))
    run.save(tmp_path / "run")
    written = json.loads((tmp_path / "run" / "run.json").read_text())
    assert written["tiny"] == {"n_items": 3, "labels": ["a", "b"]}
    back = RunResult.load(tmp_path / "run", need_records=False)
    assert back.metadata.infos["tiny"] == TinyInfo(n_items=3, labels=["a", "b"])
    assert back.metadata == run.metadata


def test_an_unregistered_key_stays_refused_naming_file_and_key(tmp_path):
    run = make_run()
    run.save(tmp_path / "run")
    path = tmp_path / "run" / "run.json"
    raw = json.loads(path.read_text())
    path.write_text(json.dumps({**raw, "tiny": {"n_items": 3}}))
    with pytest.raises(DataError, match="tiny") as err:
        RunResult.load(tmp_path / "run", need_records=False)
    assert "run.json" in str(err.value)


def test_an_unknown_key_inside_a_registered_info_is_named(tiny):
    d = make_run().metadata.to_dict() | {"tiny": {"n_items": 1, "colour": "red"}}
    with pytest.raises(DataError, match="tiny.colour"):
        RunMetadata.from_dict(d, path="run.json")


def test_setting_an_unregistered_info_is_refused():
    with pytest.raises(ValueError, match="not registered"):
        make_run().metadata.set_info("nowhere", TinyInfo(n_items=1))


def test_a_process_that_never_imported_a_benchmark_reads_its_info_typed(tmp_path):
    """The registry is filled from the installed benchmarks' entry points on first read."""
    make_run().save(tmp_path / "run")
    code = ("import sys; from fairness_tests.run.result import RunResult; "
            "assert 'fairness_tests.benchmarks.bbq' not in sys.modules; "
            f"m = RunResult.load({str(tmp_path / 'run')!r}, need_records=False).metadata; "
            "print(type(m.infos['bbq']).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == BBQInfo.__name__


@pytest.mark.parametrize("name", ["crows_pairs", "winogender", "winobias", "kobbq",
                                  "templates", "bbq", "generative"])
def test_every_family_s_records_are_a_part_of_its_runs(name, tmp_path):
    """A run of any registered family (not only the three run/ once listed) is complete
    only with its records: the gate reads them item by item. A copy without
    ``records/<name>.csv.gz`` is named incomplete (the old fixed list let a CrowS-Pairs
    run without its records load, and the gate then found nothing to compare)."""
    run = make_run()
    run.metadata.infos[name] = TinyInfo(n_items=1)
    assert f"records/{name}.csv.gz" in expected_parts(run.metadata)
    assert f"records/{name}.csv.gz" in missing_parts(tmp_path, run.metadata)
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / f"{name}.csv.gz").write_bytes(b"")
    assert f"records/{name}.csv.gz" not in missing_parts(tmp_path, run.metadata)


def test_a_run_json_of_the_old_option_name_reads_back():
    """Runs written before the option was renamed (``config.protocols``) read back with
    it as ``config.benchmarks``; a run of the new name is unchanged."""
    d = make_run().metadata.to_dict()
    d["config"] = {"protocols": ["bbq", "consistency"], "n_boot": 200}
    back = RunMetadata.from_dict(json.loads(json.dumps(d)))
    assert back.config == {"benchmarks": ["bbq", "consistency"], "n_boot": 200}
    d["config"] = {"benchmarks": ["kobbq"]}
    assert RunMetadata.from_dict(d).config == {"benchmarks": ["kobbq"]}
