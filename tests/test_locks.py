"""The inter-process lock (filelock): exclusion, release by a process that dies, a
timeout that names the file; and two GGUF conversions at once on an empty cache (a tiny
real Gemma 3 GGUF written at test time, converted on the embedded model's code path):
one converts, the other waits and reuses it.

The old session lock had an untested O_EXCL fallback that a killed process left
locked for ever, and two processes on an empty cache both converted the GGUF."""
from __future__ import annotations

import json
import os
import signal
import string
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import finish

from fairness_tests.core.locks import exclusive
from fairness_tests.models.backends.embedded import MARKER, conversion_info, convert_gguf

ROOT = Path(__file__).resolve().parent.parent


def _spawn(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


HOLDER = """
    import sys, time
    from fairness_tests.core.locks import exclusive
    with exclusive(sys.argv[1]):
        t0 = time.time()
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
        print(t0, time.time(), flush=True)
"""


def test_two_processes_never_hold_the_lock_at_once(tmp_path):
    lock = tmp_path / "sub" / "x.lock"              # parents are created
    procs = [_spawn(HOLDER, str(lock), "0.6") for _ in range(2)]
    spans = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        spans.append(tuple(map(float, out.split("\n")[1].split())))
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0, f"overlap: {spans}"


def test_a_killed_holder_releases_the_lock(tmp_path):
    lock = tmp_path / "x.lock"
    holder = _spawn(HOLDER, str(lock), "600")
    assert holder.stdout.readline().strip() == "locked"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    assert lock.exists()                            # the file stays; the lock does not
    t0 = time.perf_counter()
    with exclusive(lock, timeout_s=10):
        waited = time.perf_counter() - t0
    assert waited < 5


def test_waiting_past_the_timeout_names_the_lock_file(tmp_path):
    lock = tmp_path / "x.lock"
    holder = _spawn(HOLDER, str(lock), "30")
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(TimeoutError, match=r"x\.lock held by another process"):
            with exclusive(lock, timeout_s=0.3):
                pass
    finally:
        holder.kill()
        holder.wait(timeout=30)


CONVERT = """
    import json, os, sys, time
    from pathlib import Path
    from fairness_tests.models.backends.embedded import convert_gguf
    t0 = time.time()
    out = convert_gguf(Path(sys.argv[1]), cache=Path(sys.argv[2]))
    print(json.dumps({"pid": os.getpid(), "path": str(out), "start": t0, "end": time.time(),
                      "loaded_transformers": "transformers" in sys.modules}))
"""


def write_tiny_gemma3_gguf(path: Path) -> Path:
    """A real GGUF of a tiny Gemma 3 (the embedded model's architecture, metadata keys,
    sentencepiece vocabulary kind and quantised tensor layout, at width 64, one block and
    128 tokens), written with the ``gguf`` package: :func:`convert_gguf` converts it on
    the same code path as the embedded GGUF (transformers dequantises and saves it), in
    a fraction of a second instead of ~45 s, so the lock is what this test times."""
    gguf = pytest.importorskip("gguf")
    vocab, width, ff, heads, head_dim = 128, 64, 128, 2, 32
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\u2581"]
    tokens += list(string.ascii_letters + string.digits + string.punctuation)
    tokens += ["\u2581" + c for c in string.ascii_lowercase]
    types = [3, 3, 3, 2, 3, 3] + [1] * (len(tokens) - 6)     # control, unknown, normal
    tokens += [f"<unused{i}>" for i in range(vocab - len(tokens))]
    types += [4] * (vocab - len(types))                       # user-defined
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_name("tiny gemma3")
    w.add_context_length(128)
    w.add_embedding_length(width)
    w.add_block_count(1)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(1)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_sliding_window(64)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    rng = np.random.default_rng(0)
    q8 = gguf.GGMLQuantizationType.Q8_0

    def matrix(name: str, rows: int, cols: int) -> None:        # quantised, as in the real one
        x = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
        w.add_tensor(name, gguf.quants.quantize(x, q8), raw_dtype=q8)

    def norm(name: str, n: int) -> None:
        w.add_tensor(name, np.ones(n, np.float32))

    matrix("token_embd.weight", vocab, width)
    norm("output_norm.weight", width)
    matrix("blk.0.attn_q.weight", heads * head_dim, width)
    matrix("blk.0.attn_k.weight", head_dim, width)
    matrix("blk.0.attn_v.weight", head_dim, width)
    matrix("blk.0.attn_output.weight", width, heads * head_dim)
    matrix("blk.0.ffn_gate.weight", ff, width)
    matrix("blk.0.ffn_up.weight", ff, width)
    matrix("blk.0.ffn_down.weight", width, ff)
    for n in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
        norm(f"blk.0.{n}.weight", width)
    norm("blk.0.attn_q_norm.weight", head_dim)
    norm("blk.0.attn_k_norm.weight", head_dim)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.slow       # two processes, the converting one imports torch and transformers
@pytest.mark.timeout(660)   # the conversions' bound (600 s) and the rest
def test_two_conversions_at_once_convert_once_and_share_the_result(tmp_path):
    pytest.importorskip("transformers")

    gguf = write_tiny_gemma3_gguf(tmp_path / "tiny-gemma3-q8_0.gguf")
    procs = [_spawn(CONVERT, str(gguf), str(tmp_path / "cache")) for _ in range(2)]
    results = []
    for p, (out, err) in zip(procs, finish(procs, 600), strict=True):
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    paths = {r["path"] for r in results}
    assert len(paths) == 1
    converted = Path(paths.pop())
    assert (converted / MARKER).exists()
    assert (converted / "model.safetensors").exists() and (converted / "tokenizer.json").exists()
    assert "quantization_config" not in json.loads((converted / "config.json").read_text())
    converter = conversion_info(converted)["pid"]
    assert sorted(r["pid"] == converter for r in results) == [False, True]
    waiter = next(r for r in results if r["pid"] != converter)
    first = next(r for r in results if r["pid"] == converter)
    # the other process asked while the conversion was under way (the conversion imports
    # torch and transformers under the lock: seconds), and returned only after it ended
    assert waiter["start"] < first["end"], results
    assert waiter["end"] >= first["end"] - 1.0     # it waited for the conversion to finish
    # and converted nothing itself: a conversion imports transformers, the reuse does not
    assert (first["loaded_transformers"], waiter["loaded_transformers"]) == (True, False)
    leftovers = [p.name for p in converted.parent.iterdir() if ".tmp-" in p.name]
    assert leftovers == []


@pytest.mark.slow       # imports torch and transformers
def test_a_conversion_parses_the_gguf_once_and_writes_what_transformers_loads(
        tmp_path, monkeypatch):
    """transformers reads a GGUF several times (tokenizer, config, weights); the conversion
    parses it once (issue 24: the vocabulary's parse was most of `model prepare`), and the weights
    it writes are those transformers loads from the GGUF on its own."""
    pytest.importorskip("transformers")
    import gguf  # noqa: PLC0415  heavy: only in this test (collection stays light)
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    parses: list[str] = []
    real_init = gguf.GGUFReader.__init__

    def counting(self, path, mode="r"):
        parses.append(os.fspath(path))
        real_init(self, path, mode)

    monkeypatch.setattr(gguf.GGUFReader, "__init__", counting)
    g = write_tiny_gemma3_gguf(tmp_path / "tiny-gemma3-q8_0.gguf")
    out = convert_gguf(g, tmp_path / "cache")
    assert len(parses) == 1, parses
    assert gguf.GGUFReader.__name__ == "GGUFReader"          # put back after the conversion
    converted = AutoModelForCausalLM.from_pretrained(str(out)).state_dict()
    direct = AutoModelForCausalLM.from_pretrained(str(g.parent), gguf_file=g.name).state_dict()
    assert len(parses) - 1 >= 2     # on its own transformers parses it for config and weights
    assert converted.keys() == direct.keys()
    assert all(torch.equal(converted[k], direct[k]) for k in direct)
