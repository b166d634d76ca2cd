"""Typed contracts between layers (issue 21): the backend's info and usage are
dataclasses in the run's metadata, and run.json files written before (schema version 2,
dicts) still load."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fairness_tests.card.fill import fill_card
from fairness_tests.core.errors import DataError
from fairness_tests.models.info import BackendInfo, Usage
from fairness_tests.run.metadata import AskingInfo, RunMetadata, Source

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import USER, make_run  # noqa: E402  the card's test data module

#: backend_info and asking.usage as the litellm backend wrote them before they were typed
OLD_LITELLM = {
    "backend": "litellm", "litellm_version": "1.80.0", "model": "openai/gpt-4o-mini",
    "api_base": None, "prompt_format": "auto", "answer_prefix": "Answer: (",
    "prompt_formats": {"openai/gpt-4o-mini": "chat"}, "top_logprobs": 20,
    "min_letter_mass": 0.5}
OLD_USAGE = {"attempts": 5, "retries": 1, "prompt_tokens": 40, "completion_tokens": 8,
             "reasoning_tokens": 0, "cost_usd": None, "cost_known_usd": 0.0,
             "cost_unknown_calls": 4, "calls": 4, "truncated": 0, "letter_prompts": 0,
             "low_mass_prompts": 0, "top_logprobs_returned": 0}


def _meta(**kw) -> dict:
    return {"schema_version": 2, "model": "openai/gpt-4o-mini", "backend": "litellm",
            "mode": "live", "source": {"kind": "audit"}, "fairness_tests_version": "0.1.0",
            **kw}


def test_an_old_run_json_loads_into_the_typed_records():
    meta = RunMetadata.from_dict(_meta(
        backend_info=OLD_LITELLM,
        asking={"repeat_mode": {"requested": "calls"}, "max_tokens": 16, "usage": OLD_USAGE}))
    assert isinstance(meta.backend_info, BackendInfo)
    assert meta.backend_info.version == "1.80.0"          # litellm_version, renamed
    assert meta.backend_info.prompt_formats == {"openai/gpt-4o-mini": "chat"}
    assert isinstance(meta.asking.usage, Usage)
    assert (meta.asking.usage.calls, meta.asking.usage.cost_usd) == (4, None)


def test_the_typed_records_round_trip_through_run_json():
    meta = RunMetadata(model="m", backend="transformers", mode="live",
                       source=Source(kind="audit"), fairness_tests_version="0.1.0",
                       backend_info=BackendInfo(backend="transformers", version="5.0",
                                                device="cpu", dtype="float32"),
                       asking=AskingInfo(repeat_mode={}, max_tokens=16,
                                         usage=Usage(calls=2, prompt_tokens=9)))
    back = RunMetadata.from_dict(json.loads(json.dumps(meta.to_dict())))
    assert back == meta


def test_an_unknown_backend_info_key_is_named():
    with pytest.raises(DataError, match="backend_info.headers"):
        RunMetadata.from_dict(_meta(backend_info={"backend": "litellm", "headers": {}}))


def test_a_live_api_runs_card_names_the_litellm_version():
    """The litellm backend wrote ``litellm_version`` where the card reads ``version``: a
    live API run's card had no ``system.backend_version``."""
    run = make_run()
    old = RunMetadata.from_dict(_meta(backend_info=OLD_LITELLM))
    run.metadata.backend, run.metadata.backend_info = "litellm", old.backend_info
    assert fill_card(run, USER)["system"]["backend_version"] == "1.80.0"
