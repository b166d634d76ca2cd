"""Prefix sharing on small random models built here (no download, seconds on a CPU):
a Gemma 3 whose sliding window (8 tokens) is shorter than the prompts, so the
sliding-window masks of shared segments matter, and a Llama (full attention only: the
plain 4-D mask path). The shared computation must equal a plain forward pass of each
whole prompt (no cache, no padding)."""
from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import numpy as np
import pytest

from fairness_tests.models.backends import transformers_backend as tb
from fairness_tests.models.requests.request import Decoding, Request, chat
from tests.tiny_models import build_tiny_model

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "transformers")),
    reason="needs torch and transformers (the [local] extra)")
#: imported when the module's first test runs, not at collection (about a second in
#: every xdist worker that collects this file)
torch: Any = None
transformers: Any = None


@pytest.fixture(scope="module", autouse=True)
def _torch_and_transformers() -> None:
    global torch, transformers
    torch = importlib.import_module("torch")
    transformers = importlib.import_module("transformers")

WORDS = ("the nurse and the engineer met at a cafe one of them was late who was late "
         "who was on time a b c answer with one letter and nothing else can not be "
         "determined").split()


def tokenizer(path):
    """A word-level tokenizer (words, punctuation, the Gemma turn markers), BOS added."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors  # noqa: PLC0415  [local]
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415  heavy: not at collection
    special = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    vocab = {w: i for i, w in enumerate(special + sorted(set(WORDS) | {"Answer", ":", "(",
                                                                        ")", ".", ",", "?",
                                                                        "user", "model"}))}
    t = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[
        ("<bos>", vocab["<bos>"])])
    fast = PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<bos>", eos_token="<eos>",
                                   unk_token="<unk>", pad_token="<pad>",
                                   additional_special_tokens=special[4:])
    fast.save_pretrained(path)
    return len(vocab)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """``model_dir(kind)``: the model of that kind, built once for the module (and so
    loaded once: the backend keeps a loaded checkpoint per path, dtype and device)."""
    built = {}

    def get(kind: str):
        if kind not in built:
            built[kind] = tmp_path_factory.mktemp(kind)
            build_tiny_model(kind, built[kind], tokenizer(built[kind]))
        return built[kind]
    return get


def requests():
    """Prompts sharing a system prompt, a context, and questions, as BBQ prompts do."""
    ctx = "the nurse and the engineer met at a cafe . one of them was late ."
    out = []
    for extra in ("", " the nurse was on time ."):
        for q in ("who was late ?", "who was on time ?"):
            for opts in ("a the nurse b the engineer c can not be determined",
                         "a the engineer b can not be determined c the nurse"):
                msgs = chat("answer with one letter and nothing else .",
                            f"{ctx}{extra} {q} {opts}")
                out.append(Request(messages=msgs, decoding=Decoding(temperature=1.0),
                                   backend="transformers", model="tiny", kind="choice",
                                   choices=("a", "b", "c")))
    return out


@pytest.mark.parametrize("kind", ["gemma3", "llama"])
@pytest.mark.parametrize("batch_size", [1, 3, 16])
@pytest.mark.parametrize("workers", [1, 2])
def test_shared_prefixes_equal_plain_forward_passes(kind, batch_size, workers, model_dir):
    """Also with two workers computing the batches of a level side by side (each batch
    after the batches holding its ancestors), and with the workers' linear layers in
    numpy's BLAS where numpy has OpenBLAS: the reference pass below runs outside the
    workers, on torch's own kernels."""
    be = tb.TransformersBackend(str(model_dir(kind)), batch_size=batch_size, dtype="float64",
                                threads=workers, workers=workers)
    reqs = requests()
    out = be.answer(reqs)
    L = be.loaded()
    ids = [L.tokenizer(be.prompt_text(q))["input_ids"] for q in reqs]
    assert min(map(len, ids)) > 8 * 3                     # prompts well past the window
    assert be.computed_tokens < 0.7 * be.prompt_tokens     # the shared parts once
    for q, r, x in zip(reqs, out, ids, strict=True):
        assert r.status == "ok", r.error
        with torch.inference_mode():
            z = L.model(input_ids=torch.tensor([x]), use_cache=False).logits[0, -1]
        p = torch.softmax(z, dim=-1)[be.letter_ids(q.choices)]
        assert abs(float(p.sum()) - r.letter_mass) < 1e-7     # float32 norms inside
        np.testing.assert_allclose(r.letter_probs, (p / p.sum()).tolist(), rtol=0, atol=1e-7)


def test_a_wrong_sliding_mask_would_be_caught(model_dir, monkeypatch):
    """The comparison above is sensitive to the masks: with the window ignored, the
    Gemma 3 distributions differ from the plain forward passes."""
    be = tb.TransformersBackend(str(model_dir("gemma3")), batch_size=4, dtype="float64",
                                threads=1)
    cfg = be.loaded().model.config
    monkeypatch.setattr(cfg, "sliding_window", 10_000)   # only the shared path reads it here
    reqs = requests()
    out = be.answer(reqs)
    monkeypatch.undo()
    L = be.loaded()
    x = L.tokenizer(be.prompt_text(reqs[-1]))["input_ids"]
    with torch.inference_mode():
        z = L.model(input_ids=torch.tensor([x]), use_cache=False).logits[0, -1]
    p = torch.softmax(z, dim=-1)[be.letter_ids(reqs[-1].choices)]
    assert np.abs(np.array(out[-1].letter_probs) - (p / p.sum()).numpy()).max() > 1e-4
