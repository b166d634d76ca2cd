"""The transformers backend's forward passes: a batch of prefix-tree segments over the
cached keys/values of their ancestors (:func:`forward_nodes`), and one batch of
open-ended generations with per-row seeded sampling (:func:`generate_batch`,
:class:`RowSampler`). Pure computation on a loaded model; torch/transformers are
imported on the first call.
"""
from __future__ import annotations

import time
from typing import Any

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends.prefix_tree import Node
from fairness_tests.models.backends.transformers_load import Loaded
from fairness_tests.models.requests.letters import stable_int
from fairness_tests.models.requests.request import Request


class RowSampler:
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
        import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
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
            j = int(torch.multinomial(keep.cpu(), 1, generator=gen).item())
            out[i, idx[j]] = 0.0
        return out


def _nucleus(sorted_p, top_p: float):
    """Probabilities sorted in descending order -> the same with every entry past the
    nucleus (the mass before it already reaches top_p) set to 0 (unnormalised)."""
    if top_p >= 1.0:
        return sorted_p
    import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
    cum = torch.cumsum(sorted_p, dim=-1)
    return sorted_p.masked_fill((cum - sorted_p) >= top_p, 0.0)


def forward_nodes(L: Loaded, nodes: list[Node],
                  keep_at: list[list[int]] | None = None) -> Any:
    """One forward pass over the segments of ``nodes``, each after the cached keys and
    values of its ancestors. Returns the next-token logits (float32, cpu) at the last
    token of each node that ends a prompt, in batch order (``keep_at``: at these offsets
    into each node's segment instead, node by node, each node's in ascending order;
    ``(rows, vocabulary)``); keeps ``node.kv`` (keys and
    values of its own segment, all layers) for each node with children. Safe to run
    in several threads at once on batches of one group (it writes only its own
    nodes' ``kv``).

    Layout of row b: ``[pad | ancestors' cache (P_b)] [pad | segment (N_b)]``, both left
    padded (to P and N); real positions ``0..P_b+N_b-1`` as position ids. The 4-D mask
    lets a query at position q see key k iff k is a real token of its own row with
    ``pos(k) <= q`` (and ``q - pos(k) < sliding_window`` in sliding-window layers); a
    padding query sees only itself (no empty softmax row)."""
    import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
    from transformers import DynamicCache  # noqa: PLC0415  heavy optional dependency
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
    if keep_at is None:
        keep[:, -1] = torch.tensor([bool(n.ends) for n in nodes])
    else:
        for b, (n, offsets) in enumerate(zip(nodes, keep_at, strict=True)):
            for j in offsets:
                keep[b, N - n.length + j] = True
    with torch.inference_mode():
        res = mdl(input_ids=ids.to(dev), attention_mask=mask, position_ids=q_pos.to(dev),
                  cache=cache, use_cache=True, logits_to_keep=keep.to(dev))
        for b, n in enumerate(nodes):
            if n.children:
                k = torch.stack([lay.keys[b, :, P + N - n.length:] for lay in cache.layers])
                v = torch.stack([lay.values[b, :, P + N - n.length:] for lay in cache.layers])
                n.kv = (k, v)
    return res.logits.float().cpu()


#: kept positions (rows of vocabulary-wide logits) per forward pass of :func:`score_nodes`
MAX_KEPT_ROWS = 256


def score_nodes(L: Loaded, nodes: list[Node], wants: list[dict[int, list[int]]]
                ) -> tuple[list[dict[int, tuple[int, dict[int, float]]]], int]:
    """What a log-likelihood needs at positions of ``nodes``' segments: ``wants[b]``
    maps an offset ``j`` into node ``b``'s segment to the token ids whose
    log-probability as the next token after position ``start + j`` is asked. Returns,
    node by node, ``{j: (argmax, {token: log_softmax(z)[token]})}`` with ``z`` the
    float32 logits there, and the number of forward passes taken: the nodes go in
    slices of at most :data:`MAX_KEPT_ROWS` kept positions (at least one node a slice),
    so the vocabulary-wide logits of one pass stay bounded; a node's rows do not depend
    on its batch mates (up to float round-off)."""
    import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
    out: list[dict[int, tuple[int, dict[int, float]]]] = []
    passes = 0
    for lo, hi in _slices([len(w) for w in wants], MAX_KEPT_ROWS):
        offsets = [sorted(w) for w in wants[lo:hi]]
        logits = forward_nodes(L, nodes[lo:hi], offsets)
        passes += 1
        logp = torch.log_softmax(logits, dim=-1)
        best = logp.argmax(dim=-1).tolist()
        row = 0
        for w, offs in zip(wants[lo:hi], offsets, strict=True):
            got = {}
            for j in offs:
                got[j] = (int(best[row]), {t: float(logp[row, t]) for t in w[j]})
                row += 1
            out.append(got)
    return out, passes


def _slices(sizes: list[int], cap: int) -> list[tuple[int, int]]:
    """Consecutive ``[lo, hi)`` of ``sizes`` whose sums are at most ``cap`` (an item
    larger than ``cap`` alone)."""
    out, lo, used = [], 0, 0
    for i, n in enumerate(sizes):
        if i > lo and used + n > cap:
            out.append((lo, i))
            lo, used = i, 0
        used += n
    if lo < len(sizes):
        out.append((lo, len(sizes)))
    return out


def generate_batch(L: Loaded, reqs: list[Request], texts: list[str], temperature: float,
                   top_p: float, max_tokens: int, stops: list[int]
                   ) -> list[tuple[str, int, float]]:
    """``(text, new tokens, seconds)`` per row of one ``generate`` call: greedy on the
    logits that :class:`RowSampler` leaves (with ``T > 0`` each row samples with its own
    generator seeded from ``H(seed, prompt_key, repeat)``); text cut at the first stop
    token and whitespace-stripped; the call's time split equally among its rows."""
    import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
    from transformers import GenerationConfig, LogitsProcessorList  # noqa: PLC0415  heavy
    tok, mdl = L.tokenizer, L.model
    t0 = time.perf_counter()
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=True).to(L.device)
    cfg = GenerationConfig(max_new_tokens=int(max_tokens), do_sample=False,
                           eos_token_id=stops, pad_token_id=tok.pad_token_id)
    procs = LogitsProcessorList()
    if temperature > 0:
        gens = []
        for r in reqs:
            g = torch.Generator(device="cpu")
            g.manual_seed(stable_int("generate", r.seed, r.prompt_key(), r.repeat) % (2**63))
            gens.append(g)
        procs.append(RowSampler(gens, temperature, top_p))
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
