"""The judge scorer against a real OpenAI-compatible server on 127.0.0.1 that judges by
a rule this test knows (tests/fault_server.py), so every expected rate is counted by hand.

The rule: refusal iff the response starts with "I can't"; deflection iff it contains
"it depends"; stereotype iff it contains "submissive"; demeaning iff it contains "lazy".
A response containing GARBLE gets a malformed JSON answer; [[refusal]] makes the server
refuse to judge; [[429,ok]] is rate limited once, then answered.
"""
from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.scoring.judge import (
    JudgeSettings,
    judge_requests,
    judge_scores,
    run_judge,
    self_consistency,
    unjudged_rate,
)
from fairness_tests.scoring.judge_prompt import parse_judgement
from fairness_tests.scoring.judge_rubric import load_judge_rubric, parse_judge_rubric
from fairness_tests.scoring.registry import ScoringContext, score_with
from tests.fault_server import FaultServer

RESPONSE = re.compile(r"<response>\n(.*)\n</response>", re.S)
SECRET = "sk-judge-test-0123456789abcdef"


def rule(prompt: str) -> str:
    text = RESPONSE.search(prompt).group(1)
    if "GARBLE" in text:
        return '{"refusal": false, "stereotype": tru'
    low = text.lower()
    return json.dumps({"refusal": text.startswith("I can't"), "deflection": "it depends" in low,
                       "stereotype": "submissive" in low, "demeaning": "lazy" in low})


TEXTS = ["She is submissive and quiet.", "She is submissive and quiet.",
         "A skilled engineer.", "I can't help with that.", "Well, it depends on the person.",
         "They are lazy.", "GARBLE output", "[[refusal]] a text", "[[429,ok]] so submissive"]


def records(texts=TEXTS) -> pd.DataFrame:
    return pd.DataFrame({"output_text": texts, "status": ["ok"] * len(texts)})


def backend(server: FaultServer, **kw) -> LiteLLMBackend:
    return LiteLLMBackend(model="openai/judge-model", api_base=server.url, api_key=SECRET,
                          timeout_s=5, max_retries=3, backoff_base_s=0.01, seed=1, **kw)


def settings(server: FaultServer, **kw) -> JudgeSettings:
    return JudgeSettings(model="openai/judge-model", backend="litellm", api_base=server.url,
                         **kw)


@pytest.fixture
def store(tmp_path):
    s = ResponseStore(tmp_path / "judge.sqlite")
    yield s
    s.close()


def test_rates_faults_and_a_rerun_that_asks_nothing(store, tmp_path):
    rubric = load_judge_rubric()
    with FaultServer(reply=rule, retry_after="0") as server:
        res = run_judge(records()["output_text"], rubric, settings(server), backend(server), store)
        # 8 distinct texts: 8 requests, one of them rate limited once -> 9 attempts
        assert res.requests == 8 and res.sent == 8
        assert len(server.hits) == 9
        assert res.mode == "json_schema"
        body = server.hits[0].body
        schema = body["response_format"]["json_schema"]["schema"]
        assert schema["required"] == ["refusal", "deflection", "stereotype", "demeaning"]
        assert all(h.headers.get("authorization") == f"Bearer {SECRET}" for h in server.hits)
        scored = judge_scores(records(), res)
        # judged rows: 9 - GARBLE - [[refusal]] = 7; stereotype on rows 0, 1, 8
        judged = scored[scored["judged"] == 1]
        assert len(judged) == 7
        assert unjudged_rate(scored) == pytest.approx(2 / 9)
        assert judged["stereotype"].mean() == pytest.approx(3 / 7)
        assert judged["refusal"].mean() == pytest.approx(1 / 7)
        assert judged["deflection"].mean() == pytest.approx(1 / 7)
        assert judged["demeaning"].mean() == pytest.approx(1 / 7)
        assert judged["pilot_harm"].mean() == pytest.approx(6 / 7)
        assert scored["religion_mention"].isna().all()       # not a judge label
        assert math.isnan(scored.loc[6, "stereotype"])
        # a re-run with a new backend and the same store asks nothing
        again = run_judge(records()["output_text"], rubric, settings(server),
                          backend(server), store)
        assert len(server.hits) == 9 and again.sent == 0
        assert judge_scores(records(), again).equals(scored)
    raw = (tmp_path / "judge.sqlite").read_bytes()
    assert SECRET.encode() not in raw


def test_a_server_without_structured_output_falls_back_to_prompt_and_parse(store):
    rubric = load_judge_rubric()
    texts = ["They are lazy.", "A skilled engineer."]
    with FaultServer(reply=rule, structured_support=False) as server:
        res = run_judge(texts, rubric, settings(server), backend(server), store)
        assert res.mode == "prompt" and res.notes
        # 2 rejected with response_format, 2 answered without it
        assert [("response_format" in h.body) for h in server.hits] == [True, True, False, False]
        assert res.labels_of(0)["They are lazy."]["demeaning"] is True
        assert res.labels_of(0)["A skilled engineer."] == {
            "refusal": False, "deflection": False, "stereotype": False, "demeaning": False}
        # the store remembers the server's refusal: a re-run asks nothing, in prompt mode
        again = run_judge(texts, rubric, settings(server), backend(server), store)
        assert again.mode == "prompt" and again.sent == 0 and len(server.hits) == 4


def test_self_consistency_over_repeats(store):
    rubric = load_judge_rubric()
    flips = {"n": 0}

    def noisy(prompt: str) -> str:
        # the 2nd answer about "odd" says stereotype=true, every other answer false
        text = RESPONSE.search(prompt).group(1)
        flips["n"] += text == "odd"
        out = {k: False for k in rubric.labels}
        out["stereotype"] = text == "odd" and flips["n"] == 2
        return json.dumps(out)

    with FaultServer(reply=noisy) as server:
        res = run_judge(["odd", "even"], rubric, settings(server, repeats=3, temperature=0.7),
                        backend(server, max_concurrency=1), store)
    sc = self_consistency(res)
    # "odd": F,T,F -> not unanimous, 1 agreeing pair of 3; "even": unanimous, 3 of 3
    assert sc["stereotype"] == {"n_texts": 2, "unanimous": 0.5, "pairwise": 4 / 6}
    assert sc["refusal"] == {"n_texts": 2, "unanimous": 1.0, "pairwise": 1.0}


def test_the_key_holds_model_rubric_template_and_decoding_not_the_server():
    rubric = load_judge_rubric()
    s = JudgeSettings(model="openai/m", api_base="http://127.0.0.1:1/v1")
    key = judge_requests(["x"], rubric, s, "json_schema")[0].key()
    assert key == judge_requests(["x"], rubric, JudgeSettings(model="openai/m"),
                                 "json_schema")[0].key()
    other_rubric = parse_judge_rubric({"labels": {**rubric.labels, "refusal": "declines"}})
    for changed in (judge_requests(["x"], rubric, JudgeSettings(model="openai/n"), "json_schema"),
                    judge_requests(["x"], other_rubric, s, "json_schema"),
                    judge_requests(["x"], rubric, JudgeSettings(model="openai/m", temperature=0.5),
                                   "json_schema"),
                    judge_requests(["x"], rubric, s, "prompt")):
        assert changed[0].key() != key


@pytest.mark.parametrize("text, expected", [
    ('{"a": true, "b": false}', {"a": True, "b": False}),
    ('```json\n{"a": false, "b": true}\n```', {"a": False, "b": True}),
    ('Sure! {"a": true, "b": true, "c": 1} done', {"a": True, "b": True}),
    ('{"a": "true", "b": false}', None),        # a string is not a boolean
    ('{"a": true}', None),                      # a label missing
    ('{"a": true, "b": tru', None),             # malformed
    ("I will not judge this.", None),
    ("", None),
])
def test_parse_judgement(text, expected):
    assert parse_judgement(text, ("a", "b")) == expected


def test_a_bad_judge_rubric_is_one_line_naming_file_and_key(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("name: mine\nlabels:\n  Refusal: declines\n  stereotype: ''\n")
    with pytest.raises(ConfigError) as e:
        load_judge_rubric(p)
    msg = str(e.value)
    assert "r.yaml" in msg and "labels.stereotype" in msg and "Refusal" in msg
    p.write_text("labels: {}\n")
    with pytest.raises(ConfigError, match=r"r\.yaml.*labels.*must not be empty"):
        load_judge_rubric(p)


def test_error_rows_are_not_judged_and_score_nan(store):
    recs = pd.DataFrame({"output_text": ["They are lazy.", None, "A skilled engineer."],
                         "status": ["ok", "error", "ok"]})
    with FaultServer(reply=rule) as server:
        ctx = ScoringContext(judge=settings(server), judge_rubric=load_judge_rubric(),
                             judge_backend=backend(server), store=store)
        s = score_with(("judge",), recs, ctx)["judge"].scored
        assert len(server.hits) == 2                     # the error row's "" is not asked
    assert s["demeaning"].tolist()[0] == 1.0 and math.isnan(s.loc[1, "demeaning"])
    assert math.isnan(s.loc[1, "judged"]) and s["judged"].sum() == 2
