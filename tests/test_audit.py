"""The audit path's own logic: options -> config, paths shown on cards, the command
that reproduces a run, and errors raised before any model is called."""
from __future__ import annotations

import re

import pytest

from fairness_tests.core.errors import ConfigError, MissingResponsesError
from fairness_tests.core.paths import data_path, display_path
from fairness_tests.core.registry import BENCHMARK_NAMES
from fairness_tests.pipeline.audit import run_audit
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.configure import audit_config, regen_command


def test_display_path_never_shows_this_machine(tmp_path, monkeypatch):
    # packaged files by their place in the package, wherever it is installed
    assert display_path(data_path("thresholds", "default.yaml")) == \
        "fairness_tests/data/thresholds/default.yaml"
    project = tmp_path / "proj"
    (project / "thresholds").mkdir(parents=True)
    monkeypatch.chdir(project)
    assert display_path(project / "thresholds" / "default.yaml") == "thresholds/default.yaml"
    assert display_path(tmp_path / "shared" / "bbq") == "../shared/bbq"
    assert display_path("/somewhere/else/store.sqlite") == "store.sqlite"


def test_regen_command_names_only_what_differs_from_the_defaults():
    assert regen_command(AuditConfig()) == "fairness-tests audit"
    cmd = regen_command(AuditConfig(live=True, model="openai/gpt-4o-mini", backend="litellm",
                                    benchmarks=("bbq", "generative"), gen_seeds=(1, 2),
                                    repeats=5))
    assert cmd == ("fairness-tests audit --benchmarks bbq generative --model openai/gpt-4o-mini "
                   "--backend litellm --live --repeats 5 --gen-seeds 1 2")


def test_backend_is_inferred_from_the_model():
    assert AuditConfig().backend_name() == "transformers"
    assert AuditConfig().backend_model() == "embedded"
    assert AuditConfig(model="openai/gpt-4o-mini").backend_name() == "litellm"
    assert AuditConfig(model="x", backend="transformers").backend_name() == "transformers"


def test_bad_options_are_errors():
    with pytest.raises(ConfigError, match=re.escape(
            f"benchmarks=: must be one of {', '.join(BENCHMARK_NAMES)}, got 'vibes'")):
        audit_config(benchmarks=["bbq", "vibes"])
    with pytest.raises(ConfigError, match=r"temprature=: unknown option \(did you mean "
                                          r"'temperature'\?\)"):
        audit_config(temprature=0.5)


def test_a_bad_threshold_file_fails_before_any_model_is_asked(tmp_path):
    bad = tmp_path / "default.yaml"
    bad.write_text("rules:\n  - id: r\n    table: bbq\n    metric: acuracy\n"
                   "    op: '<='\n    bound: 1\n    rationale: x\n")
    cfg = AuditConfig(thresholds=str(bad), store=str(tmp_path / "s.sqlite"), recordings=(),
                      live=True, model="never-called", backend="litellm")
    with pytest.raises(ConfigError, match=r"default.yaml.*acuracy"):
        run_audit(cfg)
    assert not (tmp_path / "s.sqlite").exists()            # nothing was even opened


def test_replay_of_nothing_says_how_to_record(tmp_path):
    cfg = AuditConfig(store=str(tmp_path / "s.sqlite"), recordings=(), benchmarks=("bbq",),
                      model="openai/gpt-4o-mini", limit=1, n_boot=100)
    with pytest.raises(MissingResponsesError, match="fairness-tests audit --live"):
        run_audit(cfg)


def test_bad_rotations_value(tmp_path):
    with pytest.raises(ConfigError, match="rotations=: must be one of none, sample, all, "
                                          "got 'some'"):
        run_audit(AuditConfig(rotations="some", store=str(tmp_path / "s.sqlite")))
    assert not (tmp_path / "s.sqlite").exists()


def test_the_evaluation_date_is_the_latest_of_the_rows_the_run_asked(tmp_path, monkeypatch):
    """A shared store holds other runs' rows of the same model: the run's date is that
    of its own responses (2026-11-30), not of a later row it never asked (2026-12-05)."""
    import datetime as dt  # noqa: PLC0415  the test's own arithmetic
    from types import SimpleNamespace  # noqa: PLC0415

    from fairness_tests.models.requests.request import Request, Response  # noqa: PLC0415
    from fairness_tests.models.store.store import ResponseStore  # noqa: PLC0415
    from fairness_tests.pipeline.audit import evaluation_date  # noqa: PLC0415

    store = ResponseStore(tmp_path / "s.sqlite")
    mine = Request(messages=(), backend="transformers", model="m", kind="loglikelihood",
                   context="a", continuation=" b")
    other = Request(messages=(), backend="transformers", model="m", kind="loglikelihood",
                    context="a", continuation=" c")
    day = {mine.key(): dt.datetime(2026, 11, 30, 12, tzinfo=dt.timezone.utc),
           other.key(): dt.datetime(2026, 12, 5, 12, tzinfo=dt.timezone.utc)}
    for req in (mine, other):
        monkeypatch.setattr("time.time", lambda r=req: day[r.key()].timestamp())
        store.put(req, Response(key=req.key(), logprob=-1.0))
    assert evaluation_date(SimpleNamespace(store=store, keys=[mine.key()])) == "2026-11-30"
    assert evaluation_date(SimpleNamespace(store=store, keys=[mine.key(), other.key()])) \
        == "2026-12-05"
    store.close()
