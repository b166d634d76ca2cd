"""The transformers backend's log-likelihood requests (a mixin of
:class:`~.transformers_backend.TransformersBackend`).

Log-likelihood (``kind="loglikelihood"``, lm-evaluation-harness's convention, 0.4.x
``TemplateLM._encode_pair`` / ``loglikelihood``; :meth:`TransformersBackend.loglik_tokens`):
the context's trailing whitespace moves to the front of the continuation; the context
and context + continuation are tokenised with the tokenizer's own special tokens (none
added to a text that already starts with the BOS token); the continuation's tokens are
those of the whole past the context's. An empty context scores the continuation
(tokenised without special tokens) after the BOS token (the EOS token without one),
unless the continuation's own first token is it. The input ``context + continuation[:-1]``
of every distinct (context, continuation) goes into one prefix tree, like the choice
prompts: a shared context is computed once for all its continuations, and one
continuation that begins another shares its positions. With ``z_p`` the logits at
position ``p`` and ``c_1..c_k`` the continuation's tokens at positions ``q..q+k-1``:

- ``logprob = sum_i log_softmax(z_{q+i-1})[c_i]`` (float32 logits, T = 1);
- ``is_greedy = all_i argmax(z_{q+i-1}) == c_i``; ``continuation_tokens = k``.

Only the scored positions' logits are kept, at most
:data:`~.transformers_compute.MAX_KEPT_ROWS` in one pass.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends.prefix_tree import Node, PrefixTree
from fairness_tests.models.backends.transformers_compute import score_nodes
from fairness_tests.models.backends.workers import Workers
from fairness_tests.models.requests.kinds import split_pair
from fairness_tests.models.requests.request import Request, Response

T = TypeVar("T")

if TYPE_CHECKING:
    from fairness_tests.models.backends.transformers_load import Loaded



def by_prompt(requests: list[Request], idxs: list[int], done: Callable[[int, Response], None],
              prepare: Callable[[Request], T]) -> Iterator[tuple[str, list[int], T]]:
    """The requests ``idxs`` grouped by prompt (repeats of one prompt share one answer):
    ``(prompt key, member indexes, prepare(first member))`` per group; a group whose
    ``prepare`` raises gets its error row for every member (through ``done``) instead."""
    groups: dict[str, list[int]] = {}
    for i in idxs:
        groups.setdefault(requests[i].prompt_key(), []).append(i)
    for k, members in groups.items():
        try:
            prepared = prepare(requests[members[0]])
        except Exception as exc:  # noqa: BLE001 - a request's failure is its error row
            msg = str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
            for i in members:
                done(i, Response(key=requests[i].key(), status="error", error=msg))
            continue
        yield k, members, prepared


def fail_unanswered(requests: list[Request], members: list[list[int]], answered: list[bool],
                    exc: Exception, done: Callable[[int, Response], None]) -> None:
    """An error row (``exc``) for every member of every group not answered yet: a
    computation that failed part-way loses none of what it had answered."""
    for g, ok in enumerate(answered):
        if not ok:
            for i in members[g]:
                done(i, Response(key=requests[i].key(), status="error",
                                 error=f"{type(exc).__name__}: {exc}"))

@dataclass
class _LoglikPlan:
    """The distinct (context, continuation) pairs of a loglikelihood call: prompt key,
    request indices, and token ids (context, continuation) of each; the prefix tree over
    the inputs ``context + continuation[:-1]``; for each pair the (node, offset into its
    segment, token) of every continuation token, and for each node the tokens asked at
    each offset."""
    keys: list[str] = field(default_factory=list)
    members: list[list[int]] = field(default_factory=list)
    contexts: list[list[int]] = field(default_factory=list)
    conts: list[list[int]] = field(default_factory=list)
    tree: PrefixTree = field(init=False)
    where: list[list[tuple[Node, int, int]]] = field(default_factory=list)
    wants: dict[int, dict[int, list[int]]] = field(default_factory=dict)   # id(node) -> ...



class LoglikMixin:
    """The loglikelihood requests of :class:`~.transformers_backend.TransformersBackend`
    (its state is the backend's: model, batch size, counters)."""

    batch_size: int
    forward_passes: int
    computed_tokens: int
    padded_tokens: int

    if TYPE_CHECKING:  # provided by TransformersBackend
        def loaded(self) -> Loaded: ...

        def _chunk_tokens(self) -> int: ...

    def loglik_tokens(self, req: Request) -> tuple[list[int], list[int]]:
        """``(context tokens, continuation tokens)`` of a loglikelihood request, as
        lm-evaluation-harness 0.4.x splits them (see the module docstring); the context
        has at least one token (the BOS token for an empty context)."""
        tok = self.loaded().tokenizer
        ctx, cont = split_pair(str(req.context), str(req.continuation))
        ctx_ids = self._encode(ctx) if ctx else []
        if not ctx_ids:
            cont_ids = list(tok(cont, add_special_tokens=False)["input_ids"])
            first = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
            if first is None:
                raise ConfigError("an empty context is scored after the BOS (or EOS) token; "
                                  "this tokenizer has neither", key="context")
            if cont_ids and cont_ids[0] == first:
                return cont_ids[:1], cont_ids[1:]
            return [int(first)], cont_ids
        whole = self._encode(ctx + cont)
        return ctx_ids, whole[len(ctx_ids):]

    def _encode(self, text: str) -> list[int]:
        """Token ids of ``text`` with the tokenizer's own special tokens, none added to a
        text that already starts with the BOS token (lm-eval's ``tok_encode``)."""
        tok = self.loaded().tokenizer
        bos = getattr(tok, "bos_token", None)
        special = not (bos and text.startswith(bos))
        return list(tok(text, add_special_tokens=special)["input_ids"])

    def _pair_tokens(self, req: Request) -> tuple[list[int], list[int]]:
        """:meth:`loglik_tokens`; a continuation without a token of its own is an error."""
        ctx, cont = self.loglik_tokens(req)
        if not cont:
            raise ConfigError(f"the continuation {req.continuation!r} has no token of its own "
                              "after the context")
        return ctx, cont

    def _plan_loglik(self, requests, idxs, done) -> "_LoglikPlan | None":
        """Group requests by (context, continuation) (repeats share one answer), tokenise
        them, build the prefix tree of the inputs and place every continuation token in
        it; a pair whose continuation has no token of its own becomes error rows."""
        plan = _LoglikPlan()
        for k, members, (ctx, cont) in by_prompt(requests, idxs, done, self._pair_tokens):
            plan.keys.append(k)
            plan.members.append(members)
            plan.contexts.append(ctx)
            plan.conts.append(cont)
        if not plan.keys:
            return None
        plan.tree = PrefixTree([c + t[:-1] for c, t in zip(plan.contexts, plan.conts,
                                                              strict=True)])
        for g, (ctx, cont) in enumerate(zip(plan.contexts, plan.conts, strict=True)):
            path, at, placed = plan.tree.end_of[g].path(), 0, []
            for i, t in enumerate(cont):
                p = len(ctx) - 1 + i           # the position whose next token is cont[i]
                while path[at].end <= p:
                    at += 1
                node = path[at]
                asked = plan.wants.setdefault(id(node), {}).setdefault(p - node.start, [])
                if t not in asked:
                    asked.append(t)
                placed.append((node, p - node.start, t))
            plan.where.append(placed)
        return plan

    def _run_loglik(self, requests, plan: "_LoglikPlan", done, batch_done,
                    workers: Workers) -> None:
        """Every node of the prefix tree once, parents first (as :meth:`_run_choice`),
        keeping what the continuations ask at its positions; a pair's answer when its
        last node is computed. A failing forward pass turns every pair not answered yet
        into error rows."""
        answered = [False] * len(plan.keys)
        scores: dict[int, dict[int, tuple[int, dict[int, float]]]] = {}

        def score(batch: list[Node]):
            return score_nodes(self.loaded(), batch,
                               [plan.wants.get(id(n), {}) for n in batch])
        try:
            for group in plan.tree.batch_groups(self.batch_size,
                                                chunk_tokens=self._chunk_tokens(),
                                                workers=workers.n):
                for batch, (got, passes), dt in workers.run(group, score,
                                                            cost=PrefixTree.batch_cost):
                    self.forward_passes += passes
                    self.computed_tokens += sum(n.length for n in batch)
                    self.padded_tokens += len(batch) * max(n.length for n in batch)
                    for n, s in zip(batch, got, strict=True):
                        n.seconds = dt / len(batch)
                        scores[id(n)] = s
                    for n in batch:
                        latency = sum(m.seconds / m.n_below for m in n.path())
                        for g in n.ends:
                            self._respond_loglik(requests, plan, g, scores, latency, done)
                            answered[g] = True
                    batch_done(PrefixTree.batch_cost(batch))
        except Exception as exc:  # noqa: BLE001 - reported as error rows, never raised
            fail_unanswered(requests, plan.members, answered, exc, done)
            batch_done(0)

    @staticmethod
    def _respond_loglik(requests, plan: "_LoglikPlan", g: int, scores, latency: float,
                        done) -> None:
        """The responses of pair ``g``: the summed log-probabilities of its continuation
        tokens, whether each was the argmax, how many there were."""
        logprob, greedy = 0.0, True
        for node, j, t in plan.where[g]:
            best, lp = scores[id(node)][j]
            logprob += lp[t]
            greedy = greedy and best == t
        n_in = len(plan.contexts[g]) + len(plan.conts[g]) - 1
        for i in plan.members[g]:
            done(i, Response(key=requests[i].key(), logprob=logprob,
                             continuation_tokens=len(plan.conts[g]), is_greedy=greedy,
                             prompt_tokens=n_in, completion_tokens=0, latency_s=latency,
                             status="ok"))
