"""Shared token prefixes of many prompts: a radix tree whose segments are computed once.

A causal model's keys and values at position ``i`` depend only on tokens ``0..i``, so
prompts that begin with the same tokens (every prompt's ``<bos><start_of_turn>user``
and system prompt; the two question polarities of one BBQ context; the disambiguated
context that extends the ambiguous one; the three option rotations of one question)
can share the key/value cache of that prefix. The tree has one node per shared
segment: a node holds the tokens ``seq[start:end]`` of every prompt below it, its
parent holds ``[.., start)``. Tokens computed = the sum of the node lengths; before
merging (below) that is the number of distinct prefixes ``{p[:i] : p a prompt,
1 <= i <= len(p)}``.

Merging: a node whose sharing saves fewer than ``min_saving`` tokens
(``length * (continuations - 1) < min_saving``, continuations = children + 1 if a
prompt ends there) is folded into its children, which then start where it started:
a few tokens computed twice instead of one more, shallower level of small batches.

Order of work (:meth:`PrefixTree.batches`): the distinct prompts in lexicographic token
order (the depth-first order of the tree) are cut into chunks of at most
``chunk_tokens`` prompt tokens. Chunk ``c`` computes the nodes whose first prompt lies
in it: the inner nodes level by level (a node after its parent), then all its leaves
(which nothing waits for) together. Each group is sorted by segment length and cut
into batches of at most ``max_rows`` rows where the padded cost
``sum over batches of (overhead + rows * longest segment)`` is smallest (dynamic
programming over the sorted lengths: length bucketing with the best cut points). A
node's cache is dropped after the last chunk holding one of its prompts, so memory
holds one chunk's inner nodes plus the shared ancestors still needed: a prefix shared
across a chunk boundary is kept, never recomputed.

Pure Python (token id lists in, nodes out): nothing here imports torch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

MIN_SAVING = 16            # tokens a shared segment must save to be computed on its own
BATCH_OVERHEAD = 48        # a forward pass's fixed cost, in tokens, for the batch cut points


@dataclass(eq=False)
class Node:
    """One segment ``seq[start:end]`` of the prompts below it."""
    seq: tuple[int, ...]            # the tokens of one prompt passing through this node
    start: int                      # tokens before the segment (= the parent's end)
    end: int
    parent: "Node | None"
    depth: int = 0                  # 0 for the root (no tokens), 1 for its children, ...
    children: list["Node"] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)   # prompts (input indices) ending here
    first: int = 0                  # rank (lexicographic order) of the first prompt below
    last: int = 0                   # ... and of the last
    n_below: int = 0                # input prompts ending here or below
    kv: Any = None                  # the backend's key/value cache of this segment
    seconds: float = 0.0            # the backend's compute time of this segment

    @property
    def tokens(self) -> tuple[int, ...]:
        return self.seq[self.start:self.end]

    @property
    def length(self) -> int:
        return self.end - self.start

    def path(self) -> list["Node"]:
        """The nodes from the root's child down to this node (the root excluded)."""
        out, n = [], self
        while n is not None and n.parent is not None:
            out.append(n)
            n = n.parent
        return out[::-1]


class PrefixTree:
    """The radix tree of ``prompts`` (lists of token ids). Identical prompts share one
    node (``node.ends`` lists every input index ending there)."""

    def __init__(self, prompts: Sequence[Sequence[int]], min_saving: int = MIN_SAVING):
        self.n_prompts = len(prompts)
        self.prompt_tokens = sum(len(p) for p in prompts)
        self.root = Node(seq=(), start=0, end=0, parent=None)
        self.end_of: list[Node] = []           # the node each input prompt ends at
        by_seq: dict[tuple[int, ...], list[int]] = {}
        for i, p in enumerate(prompts):
            by_seq.setdefault(tuple(int(t) for t in p), []).append(i)
        self.sequences = sorted(by_seq)        # distinct prompts, lexicographic
        end_of: dict[int, Node] = {}
        stack = [self.root]
        prev: tuple[int, ...] = ()
        for rank, seq in enumerate(self.sequences):
            if not seq:
                raise ValueError("an empty prompt has no next-token distribution")
            lcp = _common_prefix(prev, seq)
            while stack[-1] is not self.root and stack[-1].start >= lcp:
                stack.pop()
            top = stack[-1]
            if top.end > lcp:                  # the new prompt leaves inside top: split it
                top = _split(top, lcp)
                stack[-1] = top
            # distinct and sorted, so seq is never a prefix of prev: lcp < len(seq)
            node = Node(seq=seq, start=lcp, end=len(seq), parent=top, first=rank, last=rank)
            top.children.append(node)
            stack.append(node)
            for n in stack[1:]:
                n.last = rank
            node.ends.extend(by_seq[seq])
            for i in by_seq[seq]:
                end_of[i] = node
            prev = seq
        self._merge(int(min_saving))
        self.nodes = self._finish()
        self.end_of = [end_of[i] for i in range(len(prompts))]

    def _merge(self, min_saving: int) -> None:
        """Fold inner nodes that save fewer than ``min_saving`` tokens into their children."""
        if min_saving <= 0:
            return
        post: list[Node] = []
        todo = [self.root]
        while todo:
            n = todo.pop()
            post.append(n)
            todo.extend(n.children)
        for n in reversed(post):               # children before parents
            kept: list[Node] = []
            for ch in n.children:
                if (ch.children and not ch.ends
                        and ch.length * (len(ch.children) - 1) < min_saving):
                    for g in ch.children:
                        g.parent, g.start = n, ch.start
                    kept.extend(ch.children)
                else:
                    kept.append(ch)
            n.children = kept

    def _finish(self) -> list[Node]:
        """Depths and prompt counts; every node but the root, parents first."""
        order: list[Node] = []
        todo = [self.root]
        while todo:
            n = todo.pop()
            order.append(n)
            for ch in n.children:
                ch.depth = n.depth + 1
                todo.append(ch)
        for n in reversed(order):
            n.n_below = len(n.ends) + sum(ch.n_below for ch in n.children)
        return order[1:]

    # ------------------------------------------------------------------ figures
    @property
    def tokens_computed(self) -> int:
        """Sum of the segment lengths: each shared prefix once."""
        return sum(n.length for n in self.nodes)

    # ------------------------------------------------------------------ schedule
    @staticmethod
    def batch_cost(batch: Sequence[Node], overhead: int = BATCH_OVERHEAD) -> int:
        """The cost the cut points minimise, in tokens: ``overhead + rows * longest``."""
        return overhead + len(batch) * max(n.length for n in batch)

    def planned_cost(self, max_rows: int, chunk_tokens: int = 1 << 16,
                     overhead: int = BATCH_OVERHEAD, workers: int = 1) -> int:
        """The summed :meth:`batch_cost` of :meth:`batches` (before any cache exists)."""
        return sum(self.batch_cost(b, overhead)
                   for b in self.batches(max_rows, chunk_tokens, overhead, workers))

    def batches(self, max_rows: int, chunk_tokens: int = 1 << 16,
                overhead: int = BATCH_OVERHEAD, workers: int = 1) -> Iterator[list[Node]]:
        """Batches of nodes, every parent before its children (see the module
        docstring); drops ``node.kv`` once nothing below needs it."""
        for group in self.batch_groups(max_rows, chunk_tokens, overhead, workers):
            yield from group

    def batch_groups(self, max_rows: int, chunk_tokens: int = 1 << 16,
                     overhead: int = BATCH_OVERHEAD,
                     workers: int = 1) -> Iterator[list[list[Node]]]:
        """:meth:`batches` in groups: the batches of one group (one level of a chunk's
        inner nodes, or its leaves) need only nodes of earlier groups, so they may be
        computed in any order or at the same time. Ask for the next group only once the
        last one is computed: ``node.kv`` of the nodes a chunk was the last to need is
        dropped when the next group is asked for.

        ``workers``: how many batches run side by side; each group is cut by
        :func:`balanced_cut_points`, so a group smaller than ``workers`` full batches
        still gives every worker a share."""
        if max_rows < 1 or chunk_tokens < 1:
            raise ValueError("max_rows and chunk_tokens must be >= 1")
        chunk_of, c, used = [], 0, 0
        for seq in self.sequences:
            if used and used + len(seq) > chunk_tokens:
                c, used = c + 1, 0
            chunk_of.append(c)
            used += len(seq)
        n_chunks = c + 1 if self.sequences else 0
        starting: list[list[Node]] = [[] for _ in range(n_chunks)]
        ending: list[list[Node]] = [[] for _ in range(n_chunks)]
        for n in self.nodes:
            starting[chunk_of[n.first]].append(n)
            ending[chunk_of[n.last]].append(n)
        for c in range(n_chunks):
            levels: dict[int, list[Node]] = {}
            leaves: list[Node] = []
            for n in starting[c]:
                if n.children:
                    levels.setdefault(n.depth, []).append(n)
                else:
                    leaves.append(n)
            for group in [levels[d] for d in sorted(levels)] + [leaves]:
                if not group:
                    continue
                group.sort(key=lambda n: (n.length, n.first))
                cuts = balanced_cut_points([n.length for n in group], max_rows, overhead,
                                           workers)
                yield [group[i:j] for i, j in cuts]
            for n in ending[c]:
                n.kv = None


def cut_points(lengths: Sequence[int], max_rows: int, overhead: int) -> list[tuple[int, int]]:
    """Contiguous groups ``[i, j)`` of ascending ``lengths``, at most ``max_rows`` each,
    minimising ``sum(overhead + (j - i) * lengths[j - 1])`` (dynamic programming)."""
    n = len(lengths)
    best: list[float] = [0] + [math.inf] * n  # best[j]: cheapest cover of lengths[:j]
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        top = lengths[j - 1]
        for i in range(max(0, j - max_rows), j):
            cost = best[i] + overhead + (j - i) * top
            if cost < best[j]:
                best[j], cut[j] = cost, i
    out, j = [], n
    while j > 0:
        out.append((cut[j], j))
        j = cut[j]
    return out[::-1]


def balanced_cut_points(lengths: Sequence[int], max_rows: int, overhead: int,
                        workers: int = 1) -> list[tuple[int, int]]:
    """:func:`cut_points` for ``workers`` batches at a time: of the cuts with at most
    ``ceil(n / (k * workers))`` rows a batch (k = 1 to 4; never more than
    ``max_rows``), the one that finishes first when each batch goes to the first free
    worker, longest first (:func:`makespan`); ties go to the smaller total cost. One
    worker: :func:`cut_points` itself."""
    n = len(lengths)
    if workers <= 1 or n == 0:
        return cut_points(lengths, max_rows, overhead)
    best: tuple[float, float, list[tuple[int, int]]] | None = None
    for rows in sorted({max(min(max_rows, -(-n // (k * workers))), 1) for k in (1, 2, 3, 4)},
                       reverse=True):
        cuts = cut_points(lengths, rows, overhead)
        costs = [overhead + (j - i) * lengths[j - 1] for i, j in cuts]
        key = (makespan(costs, workers), sum(costs))
        if best is None or key < best[:2]:
            best = (key[0], key[1], cuts)
    assert best is not None
    return best[2]


def makespan(costs: Sequence[float], workers: int) -> float:
    """When the last of ``costs`` finishes on ``workers`` workers, each job going to
    the first free worker, longest first."""
    free = [0.0] * max(workers, 1)
    for c in sorted(costs, reverse=True):
        i = free.index(min(free))
        free[i] += c
    return max(free)


def _split(node: Node, at: int) -> Node:
    """Cut ``node`` at token ``at`` (start < at < end); the upper part takes the node's
    place under its parent and is returned; the node keeps the lower part."""
    upper = Node(seq=node.seq, start=node.start, end=at, parent=node.parent,
                 children=[node], first=node.first, last=node.last)
    assert node.parent is not None         # the root (no tokens) is never cut
    siblings = node.parent.children
    assert siblings[-1] is node            # the path being extended is the newest one
    siblings[-1] = upper
    node.parent, node.start = upper, at
    return upper


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
